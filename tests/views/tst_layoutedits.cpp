// The edit policy of the workbench: degrees (with refusals that say why) and dropping blocks on stages.

#include "ViewsTest.h"
#include "engine/plan/LayoutValidator.h"
#include "engine/plan/StageAssignment.h"
#include "views/LayoutEdits.h"

using namespace loom;
using namespace loom::views;

Q_DECLARE_METATYPE(std::vector<loom::plan::StageRange>)

namespace {
std::vector<plan::StageRange> ranges(std::initializer_list<std::pair<int, int>> list)
{
    std::vector<plan::StageRange> out;
    for (auto [a, b] : list)
        out.push_back({ a, b });
    return out;
}
} // namespace

class TestLayoutEdits : public QObject {
    Q_OBJECT
private slots:
    void assignBlocks_data()
    {
        QTest::addColumn<std::vector<plan::StageRange>>("before");
        QTest::addColumn<int>("stage");
        QTest::addColumn<int>("first");
        QTest::addColumn<int>("last");
        QTest::addColumn<std::vector<plan::StageRange>>("after"); // empty: refused
        const auto even = ranges({ { 0, 3 }, { 4, 7 }, { 8, 11 }, { 12, 15 } });
        QTest::newRow("grow forward") << even << 1 << 8 << 9 << ranges({ { 0, 3 }, { 4, 9 }, { 10, 11 }, { 12, 15 } });
        QTest::newRow("grow backward") << even << 2 << 6 << 6 << ranges({ { 0, 3 }, { 4, 5 }, { 6, 11 }, { 12, 15 } });
        QTest::newRow("already there") << even << 1 << 5 << 6 << even;
        QTest::newRow("reversed range") << even << 1 << 9 << 8
                                        << ranges({ { 0, 3 }, { 4, 9 }, { 10, 11 }, { 12, 15 } });
        QTest::newRow("pushes later stages")
            << even << 1 << 12 << 13 << ranges({ { 0, 3 }, { 4, 13 }, { 14, 14 }, { 15, 15 } });
        QTest::newRow("pulls earlier stages")
            << even << 3 << 3 << 3 << ranges({ { 0, 0 }, { 1, 1 }, { 2, 2 }, { 3, 15 } });
        QTest::newRow("first stage takes all but three")
            << even << 0 << 12 << 12 << ranges({ { 0, 12 }, { 13, 13 }, { 14, 14 }, { 15, 15 } });
        QTest::newRow("refused: no room after") << even << 1 << 14 << 15 << std::vector<plan::StageRange> {};
        QTest::newRow("refused: no room before") << even << 2 << 0 << 1 << std::vector<plan::StageRange> {};
        QTest::newRow("refused: outside the model") << even << 1 << 15 << 16 << std::vector<plan::StageRange> {};
        QTest::newRow("refused: no such stage") << even << 4 << 1 << 1 << std::vector<plan::StageRange> {};
    }
    void assignBlocks()
    {
        QFETCH(std::vector<plan::StageRange>, before);
        QFETCH(int, stage);
        QFETCH(int, first);
        QFETCH(int, last);
        QFETCH(std::vector<plan::StageRange>, after);
        const auto r = plan::assignBlocksToStage(before, stage, first, last);
        if (after.empty()) {
            QVERIFY(!r.ok());
            QVERIFY(r.ranges.empty());
            QVERIFY2(r.refusal.size() > 30, r.refusal.c_str()); // a sentence, not a code
        } else {
            QVERIFY2(r.ok(), r.refusal.c_str());
            QCOMPARE(r.ranges, after);
        }
    }

    void refusedTpSaysWhy()
    {
        const plan::Layout l = test::tinyLayout(); // gpt-tiny: 4 heads
        const EditResult r = withDegree(l, Degree::Tp, 3);
        QVERIFY(!r.ok());
        QVERIFY2(QString::fromStdString(r.refusal).contains(QStringLiteral("does not divide model.heads=4")),
            r.refusal.c_str());
        QVERIFY(QString::fromStdString(r.refusal).contains(QStringLiteral("valid tp: 1, 2, 4")));
    }

    void tpKeepsTheNodesFilled()
    {
        const plan::Layout l = test::megatron1t(); // 8 x 64 x 6 on 384 x 8
        const EditResult r = withDegree(l, Degree::Tp, 4);
        QVERIFY2(r.ok(), r.refusal.c_str());
        QCOMPARE(r.layout->parallel.tp, 4);
        QCOMPARE(r.layout->parallel.dp, 12);
        QCOMPARE(r.layout->nodes, 384);
        QVERIFY(!plan::validateRules(*r.layout).hasErrorAt("parallel.tp"));
        // 5·64 does not divide 3072 devices.
        const EditResult bad = withDegree(l, Degree::Tp, 5);
        QVERIFY(!bad.ok());
        QVERIFY2(QString::fromStdString(bad.refusal).contains(QStringLiteral("tp")), bad.refusal.c_str());
    }

    void dpChangesTheNodeCount()
    {
        const plan::Layout l = test::megatron1t();
        const EditResult r = withDegree(l, Degree::Dp, 3);
        QVERIFY2(r.ok(), r.refusal.c_str());
        QCOMPARE(r.layout->nodes, 192);
        const plan::Layout tiny = test::tinyLayout(); // the local cluster: any dp
        const EditResult t = withDegree(tiny, Degree::Dp, 3);
        QVERIFY2(t.ok(), t.refusal.c_str());
        QCOMPARE(t.layout->parallel.worldSize(), 12);
    }

    void ppResetsExplicitStages()
    {
        plan::Layout l = test::tinyLayout();
        l.parallel.stages = ranges({ { 0, 0 }, { 1, 3 } });
        const EditResult r = withDegree(l, Degree::Pp, 4);
        QVERIFY2(r.ok(), r.refusal.c_str());
        QVERIFY(r.layout->parallel.stages.empty());
        QVERIFY(!withDegree(l, Degree::Pp, 5).ok()); // 5 stages for 4 blocks
        QVERIFY(!withDegree(l, Degree::Pp, 0).ok());
    }

    void choicesListRefusalsWithReasons()
    {
        const plan::Layout l = test::megatron1t(); // 160 heads
        const auto choices = degreeChoices(l, Degree::Tp);
        bool sawValid8 = false, sawRefused3 = false;
        for (const auto& [value, refusal] : choices) {
            if (value == 8)
                sawValid8 = refusal.empty();
            if (value == 3) {
                sawRefused3 = !refusal.empty();
                QVERIFY(QString::fromStdString(refusal).contains(QStringLiteral("does not divide")));
            }
        }
        QVERIFY(sawValid8);
        QVERIFY(sawRefused3);
    }

    void dropOnDeviceMovesBlocksToItsStage()
    {
        const plan::Layout l = test::tinyLayout(); // pp 2: stages {0,1}, {2,3}; rank 2 is stage 1 (tp-pp-dp)
        const EditResult r = dropBlocksOnRank(l, 2, 1, 1);
        QVERIFY2(r.ok(), r.refusal.c_str());
        QCOMPARE(r.layout->parallel.stages, ranges({ { 0, 0 }, { 1, 3 } }));
        QVERIFY(!plan::validateRules(*r.layout).hasErrors());
        const EditResult refused = dropBlocksOnRank(l, 2, 0, 0); // stage 0 would be left empty
        QVERIFY(!refused.ok());
        QVERIFY(!dropBlocksOnRank(l, 99, 0, 0).ok());
    }

    void dropWithInterleavingPicksTheNearestChunk()
    {
        plan::Layout l = test::tinyLayout();
        l.model.layers = 8;
        l.parallel.schedule = plan::ScheduleKind::Interleaved;
        l.parallel.vpp = 2; // virtual stages: 0:{0,1} 1:{2,3} 2:{4,5} 3:{6,7}; rank 0 holds 0 and 2
        QCOMPARE(plan::nearestChunkStage(l, 0, 5, 5), 2);
        QCOMPARE(plan::nearestChunkStage(l, 0, 0, 0), 0);
        const EditResult r = dropBlocksOnRank(l, 0, 6, 6);
        QVERIFY2(r.ok(), r.refusal.c_str());
        QCOMPARE(r.layout->parallel.stages, ranges({ { 0, 1 }, { 2, 3 }, { 4, 6 }, { 7, 7 } }));
    }
};

QTEST_GUILESS_MAIN(TestLayoutEdits)
#include "tst_layoutedits.moc"
