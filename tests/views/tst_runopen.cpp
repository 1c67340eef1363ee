// Opening a stored run of a million events from the runs panel: the worker that reads the store also
// predicts the layout, builds the timeline's index and computes the statistics (they ran on the GUI thread,
// which froze the window for as long as they took), and hands them over finished. The figures are those a
// synchronous open computes, and the GUI thread's event loop keeps turning meanwhile.
#include "TimelineFixture.h"
#include "ViewsTest.h"
#include "profiles/RunStore.h"
#include "profiles/Store.h"
#include "views/RunMonitor.h"

#include <QSignalSpy>
#include <QTemporaryDir>
#include <QThread>
#include <QTimer>

using namespace loom;
using namespace loom::views;

namespace {

// 40 events a step (2 stages of 4 ranks): 25,000 steps make a million.
constexpr int kSteps = 25000;

qint64 storeRun(profiles::Store& store, const plan::Layout& layout)
{
    profiles::RunStore runs(store);
    const qint64 id = runs.startRun(QString::fromStdString(layout.name),
        QString::fromStdString(plan::writeLayout(layout)), QStringLiteral("local"), QStringLiteral("mpirun"));
    runs.addEvents(id, test::pipelineFixture(2, 4, kSteps).events);
    for (qint64 s = 1; s <= 3; ++s) {
        profiles::StepRecord step;
        step.step = s;
        step.loss = 3.0;
        step.tokensPerSecond = 1000;
        runs.addStep(id, step);
    }
    runs.finishRun(id, profiles::RunState::Finished, QString());
    return id;
}

void compareRows(const TimelineData& a, const TimelineData& b)
{
    QVERIFY(a.events() == b.events());
    QCOMPARE(a.rows().size(), b.rows().size());
    for (std::size_t r = 0; r < a.rows().size(); ++r) {
        const auto &x = a.rows()[r], &y = b.rows()[r];
        QCOMPARE(x.rank, y.rank);
        QVERIFY(x.lane == y.lane);
        QVERIFY(x.events == y.events);
        QVERIFY(x.maxEnd == y.maxEnd);
        QCOMPARE(x.maxDuration, y.maxDuration);
        QVERIFY(x.mixSum == y.mixSum);
    }
    QCOMPARE(a.beginNs(), b.beginNs());
    QCOMPARE(a.endNs(), b.endNs());
    QCOMPARE(a.lastStep(), b.lastStep());
}

void compareStats(const trace::TraceStats& a, const trace::TraceStats& b)
{
    QCOMPARE(a.ranks, b.ranks);
    QCOMPARE(a.steps, b.steps);
    QCOMPARE(a.stepSeconds, b.stepSeconds);
    QCOMPARE(a.tokensPerSecond, b.tokensPerSecond);
    QCOMPARE(a.overlap, b.overlap);
    QCOMPARE(a.flops.mfu, b.flops.mfu);
    QCOMPARE(a.bottleneckStage, b.bottleneckStage);
    QCOMPARE(a.stages.size(), b.stages.size());
    for (std::size_t s = 0; s < a.stages.size(); ++s) {
        QCOMPARE(a.stages[s].bubbleFraction, b.stages[s].bubbleFraction);
        QCOMPARE(a.stages[s].busySeconds, b.stages[s].busySeconds);
    }
    QCOMPARE(a.collectives.size(), b.collectives.size());
    for (std::size_t c = 0; c < a.collectives.size(); ++c) {
        QCOMPARE(a.collectives[c].kind, b.collectives[c].kind);
        QCOMPARE(a.collectives[c].count, b.collectives[c].count);
        QCOMPARE(a.collectives[c].bytes, b.collectives[c].bytes);
        QCOMPARE(a.collectives[c].seconds, b.collectives[c].seconds);
    }
}

} // namespace

class TestRunOpen : public QObject {
    Q_OBJECT
private slots:
    void millionEventsComputedOffTheGuiThread()
    {
        QTemporaryDir dir;
        profiles::Store store(dir.filePath(QStringLiteral("loom.db")));
        const plan::Layout layout = test::tinyLayout();
        const qint64 id = storeRun(store, layout);

        RunMonitor monitor(&store);
        QSignalSpy reset(&monitor, &RunMonitor::reset);
        QSignalSpy stats(&monitor, &RunMonitor::statsChanged);
        QSignalSpy failed(&monitor, &RunMonitor::openFailed);
        int ticks = 0;
        QTimer ticker;
        connect(&ticker, &QTimer::timeout, this, [&ticks] { ++ticks; });
        ticker.start(0);
        monitor.openInBackground(id);
        QVERIFY(monitor.loading());
        QCOMPARE(reset.count(), 0); // nothing read yet on this thread
        QTRY_VERIFY_WITH_TIMEOUT(!monitor.loading(), 600000);
        ticker.stop();
        QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.first().at(0).toString()));
        QVERIFY(ticks > 0);
        // The prediction, the index and the statistics came from the worker, not from this thread.
        QVERIFY(monitor.openedOn() != nullptr);
        QVERIFY(monitor.openedOn() != QThread::currentThread());
        QCOMPARE(reset.count(), 1);
        QCOMPARE(stats.count(), 1);
        QCOMPARE(monitor.timeline()->timeline().events().size(), std::size_t(40) * kSteps);
        QVERIFY(monitor.prediction().has_value());
        QCOMPARE(monitor.steps().size(), std::size_t(3));

        // A synchronous open computes the same figures here.
        RunMonitor here(&store);
        QString error;
        QVERIFY2(here.open(id, &error), qPrintable(error));
        QCOMPARE(here.openedOn(), QThread::currentThread());
        compareRows(monitor.timeline()->timeline(), here.timeline()->timeline());
        compareStats(monitor.stats(), here.stats());
        QCOMPARE(monitor.stats().steps, kSteps);
        QCOMPARE(monitor.bandwidth().size(), here.bandwidth().size());
        QCOMPARE(monitor.bandwidth().size(), std::size_t(kSteps));
        QCOMPARE(monitor.prediction()->stepTime, here.prediction()->stepTime);
        QCOMPARE(monitor.layout().name, layout.name);
    }

    // A run that is not in the store fails on the worker too, with the reason, and shows nothing.
    void missingRunFails()
    {
        QTemporaryDir dir;
        profiles::Store store(dir.filePath(QStringLiteral("loom.db")));
        RunMonitor monitor(&store);
        QSignalSpy failed(&monitor, &RunMonitor::openFailed);
        QSignalSpy reset(&monitor, &RunMonitor::reset);
        monitor.openInBackground(42);
        QVERIFY(failed.wait(60000));
        QVERIFY(failed.first().at(0).toString().contains(QStringLiteral("no run 42")));
        QCOMPARE(reset.count(), 0);
        QVERIFY(!monitor.loading());
        QCOMPARE(monitor.openedOn(), nullptr);
    }
};

QTEST_MAIN(TestRunOpen)
#include "tst_runopen.moc"
