// The rank grid's worked examples (docs/rank-grid.md shows the same ones) and its invariants.
#include "engine/plan/LayoutParser.h"
#include "engine/plan/RankGrid.h"
#include "engine/profiles/BuiltinProfiles.h"

#include <QTest>

#include <random>
#include <set>

using namespace loom::plan;
using Groups = std::vector<std::vector<std::int64_t>>;

class TestRankGrid : public QObject {
    Q_OBJECT
private slots:
    void sixteenRanksDefaultOrder()
    {
        // 16 ranks, tp=2, pp=4, dp=2 on 2 nodes of 8, order tp-pp-dp.
        const RankGrid g(2, 4, 2, 8);
        QCOMPARE(g.size(), 16);
        QCOMPARE(g.nodeCount(), 2);
        QCOMPARE(g.groups(GroupKind::Tensor),
            (Groups { { 0, 1 }, { 2, 3 }, { 4, 5 }, { 6, 7 }, { 8, 9 }, { 10, 11 }, { 12, 13 }, { 14, 15 } }));
        QCOMPARE(g.groups(GroupKind::Pipeline),
            (Groups { { 0, 2, 4, 6 }, { 1, 3, 5, 7 }, { 8, 10, 12, 14 }, { 9, 11, 13, 15 } }));
        QCOMPARE(g.groups(GroupKind::Data),
            (Groups { { 0, 8 }, { 1, 9 }, { 2, 10 }, { 3, 11 }, { 4, 12 }, { 5, 13 }, { 6, 14 }, { 7, 15 } }));
        QCOMPARE(g.coordOf(13), (RankCoord { 1, 2, 1 }));
        QCOMPARE(g.nodeOf(13), 1);
        QCOMPARE(g.localIndexOf(13), 5);
        // TP and the whole pipeline stay in a node; only DP crosses nodes.
        QCOMPARE(g.maxNodesSpanned(GroupKind::Tensor), 1);
        QCOMPARE(g.maxNodesSpanned(GroupKind::Pipeline), 1);
        QCOMPARE(g.maxNodesSpanned(GroupKind::Data), 2);
        QVERIFY(g.placementNotes().empty());
    }

    void sixteenRanksMegatronOrder()
    {
        // The example in Megatron-LM's parallel_state: 16 GPUs, tp=2, pp=4, so dp=2, order tp-dp-pp.
        const RankGrid g(2, 4, 2, 8, RankOrder::TpDpPp);
        QCOMPARE(g.groups(GroupKind::Tensor),
            (Groups { { 0, 1 }, { 2, 3 }, { 4, 5 }, { 6, 7 }, { 8, 9 }, { 10, 11 }, { 12, 13 }, { 14, 15 } }));
        QCOMPARE(g.groups(GroupKind::Pipeline),
            (Groups { { 0, 4, 8, 12 }, { 1, 5, 9, 13 }, { 2, 6, 10, 14 }, { 3, 7, 11, 15 } }));
        QCOMPARE(g.groups(GroupKind::Data),
            (Groups { { 0, 2 }, { 1, 3 }, { 4, 6 }, { 5, 7 }, { 8, 10 }, { 9, 11 }, { 12, 14 }, { 13, 15 } }));
        QCOMPARE(g.maxNodesSpanned(GroupKind::Pipeline), 2);
        QCOMPARE(g.maxNodesSpanned(GroupKind::Data), 1);
    }

    void contextParallelGrid_data()
    {
        QTest::addColumn<int>("order");
        QTest::addColumn<Groups>("pipeline");
        QTest::addColumn<Groups>("data");
        QTest::addColumn<std::vector<std::int64_t>>("gradientOf0");
        QTest::addColumn<int>("gradientNodes");
        // 16 ranks, tp=2, cp=2, pp=2, dp=2 on 2 nodes of 8. tp-cp-pp-dp: rank = tp + 2·(cp + 2·(pp + 2·dp)).
        QTest::newRow("tp-cp-pp-dp") << int(RankOrder::TpPpDp)
                                     << Groups { { 0, 4 }, { 1, 5 }, { 2, 6 }, { 3, 7 }, { 8, 12 }, { 9, 13 },
                                            { 10, 14 }, { 11, 15 } }
                                     << Groups { { 0, 8 }, { 1, 9 }, { 2, 10 }, { 3, 11 }, { 4, 12 }, { 5, 13 },
                                            { 6, 14 }, { 7, 15 } }
                                     << std::vector<std::int64_t> { 0, 2, 8, 10 } << 2;
        // tp-cp-dp-pp (Megatron-LM's tp-cp-ep-dp-pp): rank = tp + 2·(cp + 2·(dp + 2·pp)).
        QTest::newRow("tp-cp-dp-pp") << int(RankOrder::TpDpPp)
                                     << Groups { { 0, 8 }, { 1, 9 }, { 2, 10 }, { 3, 11 }, { 4, 12 }, { 5, 13 },
                                            { 6, 14 }, { 7, 15 } }
                                     << Groups { { 0, 4 }, { 1, 5 }, { 2, 6 }, { 3, 7 }, { 8, 12 }, { 9, 13 },
                                            { 10, 14 }, { 11, 15 } }
                                     << std::vector<std::int64_t> { 0, 2, 4, 6 } << 1;
    }
    void contextParallelGrid()
    {
        QFETCH(int, order);
        QFETCH(Groups, pipeline);
        QFETCH(Groups, data);
        QFETCH(std::vector<std::int64_t>, gradientOf0);
        QFETCH(int, gradientNodes);
        const RankGrid g(2, 2, 2, 8, RankOrder(order), 2);
        QCOMPARE(g.size(), 16);
        QCOMPARE(g.cp(), 2);
        // TP groups stay pairs of neighbours and CP groups their neighbours one TP group on: a node of 8 holds
        // two whole TP×CP blocks.
        QCOMPARE(g.groups(GroupKind::Tensor),
            (Groups { { 0, 1 }, { 2, 3 }, { 4, 5 }, { 6, 7 }, { 8, 9 }, { 10, 11 }, { 12, 13 }, { 14, 15 } }));
        QCOMPARE(g.groups(GroupKind::Context),
            (Groups { { 0, 2 }, { 1, 3 }, { 4, 6 }, { 5, 7 }, { 8, 10 }, { 9, 11 }, { 12, 14 }, { 13, 15 } }));
        QCOMPARE(g.groups(GroupKind::Pipeline), pipeline);
        QCOMPARE(g.groups(GroupKind::Data), data);
        QCOMPARE(g.gradientGroupOf(0), gradientOf0);
        QCOMPARE(g.gradientNodesSpanned(), std::int64_t(gradientNodes));
        QCOMPARE(g.coordOf(3).cp, 1);
        QCOMPARE(g.coordOf(3).tp, 1);
        QCOMPARE(g.maxNodesSpanned(GroupKind::Context), 1);
        QVERIFY(g.placementNotes().empty());
    }

    void contextGroupAcrossNodes()
    {
        // tp=4, cp=4 on nodes of 8: a TP×CP block is 16 ranks, so every CP group spans two nodes.
        const RankGrid g(4, 1, 1, 8, RankOrder::TpPpDp, 4);
        QCOMPARE(g.groupOf(GroupKind::Context, 1), (std::vector<std::int64_t> { 1, 5, 9, 13 }));
        QCOMPARE(g.maxNodesSpanned(GroupKind::Context), 2);
        const auto notes = g.placementNotes();
        QCOMPARE(notes.size(), std::size_t(1));
        QVERIFY(notes[0].find("a CP group spans 2 nodes") != std::string::npos);
    }

    void tensorGroupAcrossNodes()
    {
        // tp=16 on nodes of 8: every TP group needs two nodes, and the grid says so.
        const RankGrid g(16, 1, 2, 8);
        QCOMPARE(g.maxNodesSpanned(GroupKind::Tensor), 2);
        const auto notes = g.placementNotes();
        QCOMPARE(notes.size(), std::size_t(1));
        QVERIFY(notes[0].find("tp=16 is more than the 8 devices of a node") != std::string::npos);

        // tp=3 on nodes of 8: groups {6,7,8} and {15,16,17} straddle a node boundary.
        const RankGrid h(3, 1, 8, 8);
        QCOMPARE(h.groupOf(GroupKind::Tensor, 7), (std::vector<std::int64_t> { 6, 7, 8 }));
        QCOMPARE(h.nodeOf(6), 0);
        QCOMPARE(h.nodeOf(8), 1);
        QCOMPARE(h.maxNodesSpanned(GroupKind::Tensor), 2);
        QVERIFY(h.placementNotes()[0].find("tp=3 does not divide the 8 devices of a node") != std::string::npos);
    }

    void gpt3OnA100Cluster()
    {
        // The shipped 175B example: 1,024 GPUs, tp=8 inside each node, 16 stages, 8 replicas.
        auto r = readLayoutFile(LOOM_SOURCE_DIR "/resources/examples/gpt3-175b-1024-a100.json",
            loom::profiles::BuiltinProfiles::instance());
        QVERIFY(r.ok());
        const RankGrid g = RankGrid::forLayout(*r.layout);
        QCOMPARE(g.size(), 1024);
        QCOMPARE(g.nodeCount(), 128);
        QCOMPARE(g.maxNodesSpanned(GroupKind::Tensor), 1);
        QCOMPARE(g.maxNodesSpanned(GroupKind::Pipeline), 16); // one node per stage
        QCOMPARE(g.groupOf(GroupKind::Pipeline, 0),
            (std::vector<std::int64_t> { 0, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120 }));
        QCOMPARE(g.groupOf(GroupKind::Data, 0), (std::vector<std::int64_t> { 0, 128, 256, 384, 512, 640, 768, 896 }));
    }

    void localClusterIsOneNode()
    {
        auto r = readLayoutFile(
            LOOM_SOURCE_DIR "/resources/examples/tiny-local.json", loom::profiles::BuiltinProfiles::instance());
        QVERIFY(r.ok());
        const RankGrid g = RankGrid::forLayout(*r.layout);
        QCOMPARE(g.size(), 8);
        QCOMPARE(g.nodeCount(), 1);
        QCOMPARE(g.devicesPerNode(), 8);
    }

    void invariants_data()
    {
        QTest::addColumn<int>("order");
        QTest::newRow("tp-pp-dp") << int(RankOrder::TpPpDp);
        QTest::newRow("tp-dp-pp") << int(RankOrder::TpDpPp);
    }
    void invariants()
    {
        // For many shapes: coordOf and rankOf are inverse; each rank is in exactly one group of each kind,
        // at the index of its own coordinate; groups have the degree's size.
        QFETCH(int, order);
        std::mt19937 rng(11);
        for (int trial = 0; trial < 200; ++trial) {
            const std::int64_t tp = 1 + rng() % 8, pp = 1 + rng() % 6, dp = 1 + rng() % 5, perNode = 1 + rng() % 9;
            const std::int64_t cp = trial % 2 ? 1 : 1 + rng() % 4;
            const RankGrid g(tp, pp, dp, perNode, RankOrder(order), cp);
            std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>> seen;
            for (std::int64_t r = 0; r < g.size(); ++r) {
                const RankCoord c = g.coordOf(r);
                QVERIFY(c.tp < tp && c.pp < pp && c.dp < dp && c.cp < cp);
                QCOMPARE(g.rankOf(c), r);
                seen.insert({ c.tp, c.pp, c.dp, c.cp });
                QCOMPARE(g.groupOf(GroupKind::Context, r)[static_cast<std::size_t>(c.cp)], r);
                // The gradient group: every (dp, cp) once, this rank at index dp·cp + its cp coordinate.
                const auto gradient = g.gradientGroupOf(r);
                QCOMPARE(static_cast<std::int64_t>(gradient.size()), dp * cp);
                QCOMPARE(gradient[static_cast<std::size_t>(c.dp * cp + c.cp)], r);
                QCOMPARE(g.groupOf(GroupKind::Tensor, r)[static_cast<std::size_t>(c.tp)], r);
                QCOMPARE(g.groupOf(GroupKind::Pipeline, r)[static_cast<std::size_t>(c.pp)], r);
                QCOMPARE(g.groupOf(GroupKind::Data, r)[static_cast<std::size_t>(c.dp)], r);
            }
            QCOMPARE(static_cast<std::int64_t>(seen.size()), g.size());
            for (GroupKind kind : { GroupKind::Tensor, GroupKind::Pipeline, GroupKind::Data, GroupKind::Context }) {
                std::vector<int> membership(static_cast<std::size_t>(g.size()), 0);
                for (const auto& group : g.groups(kind)) {
                    QCOMPARE(static_cast<std::int64_t>(group.size()),
                        kind == GroupKind::Tensor         ? tp
                            : kind == GroupKind::Pipeline ? pp
                            : kind == GroupKind::Context  ? cp
                                                          : dp);
                    for (auto m : group)
                        ++membership[static_cast<std::size_t>(m)];
                }
                for (int count : membership)
                    QCOMPARE(count, 1);
            }
        }
    }
};

QTEST_GUILESS_MAIN(TestRankGrid)
#include "tst_rankgrid.moc"
