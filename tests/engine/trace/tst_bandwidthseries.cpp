// The bandwidth series the run monitor draws, computed in engine/trace: bus bandwidth per kind of collective
// (nccl-tests' factors) and bytes per second per link class, per step, the same however the events arrive.
#include "engine/trace/BandwidthSeries.h"

#include <QTest>

using namespace loom::trace;

Q_DECLARE_METATYPE(std::vector<loom::trace::TraceEvent>)

namespace {

// 4 ranks, two per node; TP inside a node, DP across nodes.
const std::vector<GroupInfo> kGroups = { { 0, GroupKind::Tensor, { 0, 1 }, "TP group of pp=0 dp=0" },
    { 1, GroupKind::Data, { 0, 2 }, "DP group of tp=0 pp=0" },
    { 2, GroupKind::Data, { 1, 3 }, "DP group of tp=1 pp=0" }, { 3, GroupKind::World, { 0, 1, 2, 3 }, "world" } };
const std::vector<std::int64_t> kNodes = { 0, 0, 1, 1 };

TraceEvent comm(std::int32_t rank, EventKind kind, std::int32_t group, std::int32_t groupSize, double gigabytes,
    double seconds, std::int32_t step = 0)
{
    TraceEvent e;
    e.rank = rank;
    e.kind = kind;
    e.lane = laneOf(kind);
    e.step = step;
    e.group = group;
    e.groupSize = groupSize;
    e.startNs = 1'000'000;
    e.endNs = e.startNs + std::int64_t(seconds * 1e9);
    e.bytes = std::uint64_t(gigabytes * 1e9);
    return e;
}

} // namespace

class TestBandwidthSeries : public QObject {
    Q_OBJECT
private slots:
    void oneStep_data()
    {
        QTest::addColumn<std::vector<TraceEvent>>("events");
        QTest::addColumn<QString>("collective");
        QTest::addColumn<double>("busGBs");
        QTest::addColumn<QString>("link");
        QTest::addColumn<double>("linkGBs");
        QTest::newRow("TP all-reduce in a node: factor 2(n-1)/n = 1")
            << std::vector { comm(0, EventKind::AllReduce, 0, 2, 1, 1) } << "TP all-reduce" << 1.0 << "intra-node"
            << 1.0;
        QTest::newRow("DP all-reduce across nodes") << std::vector { comm(0, EventKind::AllReduce, 1, 2, 2, 0.5) }
                                                    << "DP all-reduce" << 4.0 << "inter-node" << 4.0;
        TraceEvent compressed = comm(0, EventKind::AllReduce, 1, 2, 2, 0.5);
        compressed.wireBytes = 500'000'000; // the link carried what went on the wire
        QTest::newRow("compressed: the link counts wire bytes")
            << std::vector { compressed } << "DP all-reduce" << 4.0 << "inter-node" << 1.0;
        TraceEvent send = comm(1, EventKind::Send, -1, 0, 1, 2);
        send.peer = 3;
        QTest::newRow("send to another node: no group, factor 1")
            << std::vector { send } << "send" << 0.5 << "inter-node" << 0.5;
        QTest::newRow("world all-gather of 4: factor (n-1)/n")
            << std::vector { comm(0, EventKind::AllGather, 3, 4, 4, 1) } << "world all-gather" << 3.0 << "inter-node"
            << 4.0;
        QTest::newRow("two ranks: bytes over time, summed") << std::vector {
            comm(0, EventKind::ReduceScatter, 0, 2, 1, 1), comm(1, EventKind::ReduceScatter, 0, 2, 3, 1)
        } << "TP reduce-scatter" << 1.0 << "intra-node" << 2.0;
        QTest::newRow("unknown group id counts as a plain collective")
            << std::vector { comm(2, EventKind::Broadcast, 42, 2, 1, 1) } << "broadcast" << 1.0 << "intra-node" << 1.0;
    }

    void oneStep()
    {
        QFETCH(std::vector<TraceEvent>, events);
        QFETCH(QString, collective);
        QFETCH(double, busGBs);
        QFETCH(QString, link);
        QFETCH(double, linkGBs);
        const auto series = bandwidthSeries(events, kGroups, kNodes);
        QCOMPARE(int(series.size()), 1);
        QCOMPARE(series[0].step, 1); // steps are shown 1-based
        QCOMPARE(int(series[0].perCollective.size()), 1);
        QCOMPARE(series[0].perCollective.at(collective.toStdString()), busGBs);
        QCOMPARE(int(series[0].perLinkClass.size()), 1);
        QCOMPARE(series[0].perLinkClass.at(link.toStdString()), linkGBs);
    }

    void ignoredEvents()
    {
        TraceEvent wait = comm(0, EventKind::AllReduce, 1, 2, 1, 1);
        wait.kind = EventKind::Wait; // a wait on the comm lane is not a transfer
        TraceEvent empty = comm(0, EventKind::AllReduce, 1, 2, 0, 1);
        TraceEvent instant = comm(0, EventKind::AllReduce, 1, 2, 1, 0);
        TraceEvent forward = comm(0, EventKind::Forward, -1, 0, 1, 1);
        QVERIFY(bandwidthSeries({ wait, empty, instant, forward }, kGroups, kNodes).empty());
    }

    // Live, events come one frame (or part of one) at a time: the series is the same as from all at once,
    // sorted by step whatever the order.
    void incrementalEqualsWhole()
    {
        std::vector<TraceEvent> all;
        for (std::int32_t step : { 2, 0, 1 })
            for (std::int32_t rank = 0; rank < 4; ++rank) {
                all.push_back(
                    comm(rank, EventKind::AllReduce, rank % 2 + 1, 2, 0.1 * (rank + 1), 0.01 * (step + 1), step));
                all.push_back(comm(rank, EventKind::AllReduce, 0, 2, 0.05, 0.02, step));
            }
        const auto whole = bandwidthSeries(all, kGroups, kNodes);
        BandwidthSeries live(kNodes);
        for (std::size_t at = 0; at < all.size(); at += 5)
            live.add(std::vector<TraceEvent>(all.begin() + long(at), all.begin() + long(std::min(all.size(), at + 5))),
                kGroups);
        QVERIFY(live.points() == whole);
        QCOMPARE(int(whole.size()), 3);
        QCOMPARE(whole[0].step, 1);
        QCOMPARE(whole[2].step, 3);
        // Step 3 (index 2): DP all-reduces move 0.1+0.2+0.3+0.4 GB in 4 × 0.03 s, factor 1.
        QVERIFY(std::abs(whole[2].perCollective.at("DP all-reduce") - 1.0 / 0.12) < 1e-6);
        QVERIFY(whole[2].perLinkClass.count(BandwidthSeries::kIntraNode)
            && whole[2].perLinkClass.count(BandwidthSeries::kInterNode));
        live.clear();
        QVERIFY(live.points().empty());
    }
};

QTEST_GUILESS_MAIN(TestBandwidthSeries)
#include "tst_bandwidthseries.moc"
