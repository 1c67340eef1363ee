// The all-reduce stepper's step sequence (engine/plan/AllReduceSteps.h) against counts derived by hand.
#include "engine/plan/CostModel.h"
#include "views/teaching/AllReduceSteps.h"

#include <QTest>

#include <set>

using namespace loom::plan;

namespace {
const LinkSpec kNvlink { LinkKind::NvLink, 300, 2, 0 };
const LinkSpec kIb { LinkKind::InfiniBand, 25, 5, 8 };
constexpr double kMB = 1e6;
} // namespace

class TestAllReduceSteps : public QObject {
    Q_OBJECT
private slots:
    void ringOfFourInOneNode()
    {
        // 4 ranks, B = 4 MB: 2(n−1) = 6 steps, each with 4 transfers of B/n = 1 MB.
        const auto steps = ringAllReduceSteps({ 0, 1, 2, 3 }, 4 * kMB, 8, kNvlink, kIb);
        QCOMPARE(steps.size(), std::size_t(6));
        for (std::size_t s = 0; s < steps.size(); ++s) {
            QCOMPARE(steps[s].phase, std::string(s < 3 ? "reduce-scatter" : "all-gather"));
            QCOMPARE(steps[s].transfers.size(), std::size_t(4));
            std::set<std::int64_t> chunks;
            for (const auto& t : steps[s].transfers) {
                QCOMPARE(t.bytes, 1 * kMB);
                QCOMPARE(t.dst, (t.src + 1) % 4);
                QVERIFY(!t.interNode);
                chunks.insert(t.chunk);
            }
            QCOMPARE(chunks.size(), std::size_t(4)); // every chunk moves once per step
            // α + (B/n)/β = 2 µs + 1 MB / 300 GB/s
            QVERIFY(qAbs(steps[s].seconds - (2e-6 + 1e6 / 300e9)) < 1e-15);
        }
        // Rank 0 sends chunks 0, 3, 2 while reducing, then 1, 0, 3 while gathering.
        std::vector<std::int64_t> sent;
        for (const auto& s : steps)
            for (const auto& t : s.transfers)
                if (t.src == 0)
                    sent.push_back(t.chunk);
        QCOMPARE(sent, (std::vector<std::int64_t> { 0, 3, 2, 1, 0, 3 }));
        // Each rank sends 2(n−1)/n · B = 6 MB; the whole takes what the cost model's formula gives.
        QCOMPARE(bytesSentBy(steps, 2), 6 * kMB);
        QVERIFY(qAbs(totalSeconds(steps) - ringAllReduceSeconds(4 * kMB, 4, kNvlink)) < 1e-12);
    }

    void ringAcrossTwoNodes()
    {
        // 8 ranks on 2 nodes of 4: 14 steps; in each, 3→4 and 7→0 cross nodes, so every step runs at the
        // InfiniBand's pace: 5 µs + (8 MB / 8) / 25 GB/s.
        std::vector<std::int64_t> ranks { 0, 1, 2, 3, 4, 5, 6, 7 };
        const auto steps = ringAllReduceSteps(ranks, 8 * kMB, 4, kNvlink, kIb);
        QCOMPARE(steps.size(), std::size_t(14));
        for (const auto& s : steps) {
            int crossing = 0;
            for (const auto& t : s.transfers)
                crossing += t.interNode;
            QCOMPARE(crossing, 2);
            QVERIFY(qAbs(s.seconds - (5e-6 + 1e6 / 25e9)) < 1e-15);
        }
        QCOMPARE(bytesSentBy(steps, 3, true), 14 * kMB);
        QCOMPARE(bytesSentBy(steps, 2, true), 0.0);
    }

    void hierarchicalTwoNodesOfFour()
    {
        // k = 4 per node, N = 2 nodes: 2(k−1) + 2(N−1) = 8 steps.
        std::vector<std::int64_t> ranks { 0, 1, 2, 3, 4, 5, 6, 7 };
        const auto steps = hierarchicalAllReduceSteps(ranks, 8 * kMB, 4, kNvlink, kIb);
        QCOMPARE(steps.size(), std::size_t(8));
        const char* phases[] = { "reduce-scatter", "reduce-scatter", "reduce-scatter", "inter-node reduce-scatter",
            "inter-node all-gather", "all-gather", "all-gather", "all-gather" };
        for (std::size_t s = 0; s < 8; ++s) {
            QCOMPARE(steps[s].phase, std::string(phases[s]));
            QCOMPARE(steps[s].transfers.size(), std::size_t(8));
            const bool across = s == 3 || s == 4;
            for (const auto& t : steps[s].transfers) {
                QCOMPARE(t.interNode, across);
                QCOMPARE(t.bytes, across ? 1 * kMB : 2 * kMB); // B/(k·N) across, B/k inside
                if (across)
                    QCOMPARE(t.dst, (t.src + 4) % 8); // the same place in the other node
            }
        }
        // Only B/k · 2(N−1)/N = 2 MB of each rank's 2(k−1)/k·B + ... cross nodes (the ring: 14 MB from rank 3).
        QCOMPARE(bytesSentBy(steps, 3, true), 2 * kMB);
        QCOMPARE(bytesSentBy(steps, 3), 3 * 2 * kMB * 2 + 2 * kMB);
        const double expected = 6 * (2e-6 + 2e6 / 300e9) + 2 * (5e-6 + 1e6 / 25e9);
        QVERIFY(qAbs(totalSeconds(steps) - expected) < 1e-12);
        QVERIFY(totalSeconds(steps) < totalSeconds(ringAllReduceSteps(ranks, 8 * kMB, 4, kNvlink, kIb)));
        // Inside the node the chunks after the reduce-scatter: place i holds chunk i+1, so across the nodes
        // place 0 (ranks 0 and 4) works on pieces 2 and 3 of the finer numbering (chunk 1 of 4, cut in 2).
        std::set<std::int64_t> pieces;
        for (const auto& t : steps[3].transfers)
            if (t.src == 0 || t.src == 4)
                pieces.insert(t.chunk);
        QCOMPARE(pieces, (std::set<std::int64_t> { 2, 3 }));
    }

    void smallGroups()
    {
        QVERIFY(ringAllReduceSteps({ 5 }, kMB, 8, kNvlink, kIb).empty());
        // One node: the hierarchical algorithm is the ring.
        QCOMPARE(hierarchicalAllReduceSteps({ 0, 1 }, kMB, 8, kNvlink, kIb).size(), std::size_t(2));
        // Uneven nodes (3 + 1): the ring too.
        QCOMPARE(hierarchicalAllReduceSteps({ 1, 2, 3, 4 }, kMB, 4, kNvlink, kIb).size(), std::size_t(6));
    }
};

QTEST_GUILESS_MAIN(TestAllReduceSteps)
#include "tst_allreducesteps.moc"
