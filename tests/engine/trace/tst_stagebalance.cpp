// The bottleneck stage and load imbalance of a measured run (issue 36): the busiest stage is named, its idle
// share is the bubble the step pays, and the stages' uneven work is reported apart from it, on hand-made
// timelines with known answers.
#include "engine/trace/TraceStats.h"

#include <QTest>

#include <cmath>

using namespace loom::trace;

namespace {

// One compute event of `rank` (= its stage) from startUs to endUs in step 1.
TraceEvent busy(std::int32_t rank, std::int64_t startUs, std::int64_t endUs)
{
    TraceEvent e;
    e.rank = rank;
    e.kind = EventKind::Forward;
    e.lane = laneOf(e.kind);
    e.startNs = startUs * 1000;
    e.endNs = endUs * 1000;
    e.stage = rank;
    e.step = 1;
    return e;
}

} // namespace

class TestStageBalance : public QObject {
    Q_OBJECT
private slots:
    void bottleneck_data()
    {
        QTest::addColumn<QList<int>>("spans"); // per stage: start, end (µs) of its one compute event
        QTest::addColumn<int>("stage"); // the bottleneck
        QTest::addColumn<double>("bubble"); // its idle share of the 100 µs pipeline phase
        QTest::addColumn<double>("imbalance");
        // Blocks dropped onto stage 1: stage 0 idles 70 % for lack of work; the step pays stage 1's 10 %.
        QTest::newRow("stage 1 overloaded") << QList<int> { 0, 30, 10, 100 } << 1 << 0.1 << 1.0 - 60.0 / 90.0;
        QTest::newRow("stage 0 overloaded") << QList<int> { 0, 80, 60, 100 } << 0 << 0.2 << 1.0 - 60.0 / 80.0;
        // Equal work: all the idle time is the pipeline's own bubble.
        QTest::newRow("balanced") << QList<int> { 0, 60, 40, 100 } << 0 << 0.4 << 0.0;
        QTest::newRow("three stages") << QList<int> { 0, 50, 10, 100, 30, 70 } << 1 << 0.1
                                      << 1.0 - (50.0 + 90.0 + 40.0) / 3.0 / 90.0;
    }
    void bottleneck()
    {
        QFETCH(QList<int>, spans);
        QFETCH(int, stage);
        QFETCH(double, bubble);
        QFETCH(double, imbalance);
        std::vector<TraceEvent> events;
        for (int i = 0; i + 1 < spans.size(); i += 2)
            events.push_back(busy(i / 2, spans[i], spans[i + 1]));
        StatsContext c;
        c.pp = spans.size() / 2;
        c.microBatches = 4;
        const TraceStats s = computeStats(events, c);
        QCOMPARE(s.bottleneckStage, stage);
        QVERIFY2(std::fabs(s.bottleneckBubble - bubble) < 1e-9, qPrintable(QString::number(s.bottleneckBubble)));
        QVERIFY2(std::fabs(s.loadImbalance - imbalance) < 1e-9, qPrintable(QString::number(s.loadImbalance)));
        const auto& st = s.stages[static_cast<std::size_t>(stage)];
        QVERIFY(std::fabs(st.busySeconds - double(spans[2 * stage + 1] - spans[2 * stage]) * 1e-6) < 1e-12);
    }

    void noStages()
    {
        const TraceStats s = computeStats({}, StatsContext {});
        QCOMPARE(s.bottleneckStage, -1);
        QCOMPARE(s.loadImbalance, 0.0);
    }
};

QTEST_GUILESS_MAIN(TestStageBalance)
#include "tst_stagebalance.moc"
