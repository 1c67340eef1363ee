// The workbench's run monitor over a long run whose events arrive as fast as a pipe carries them: a stand-in
// for mpirun (first on PATH) prints the telemetry stream of 10,000 steps at once. The statistics are
// recomputed when the events have grown by a tenth (and at the end), not once per step over every event,
// which froze the window at step ~3,000 of a Slurm run, and on a worker rather than the GUI thread. And a
// Slurm run counts as running while only the cluster runs it: the controller is active, not merely running
// here.
#include "engine/plan/LayoutParser.h"
#include "engine/trace/TelemetryFrames.h"
#include "profiles/ProfileCatalog.h"
#include "profiles/RunStore.h"
#include "profiles/Store.h"
#include "views/MetricsPanel.h"
#include "views/RunMonitor.h"

#include <QDir>
#include <QFile>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>
#include <qcustomplot.h>

using namespace loom;

namespace {

trace::TraceEvent commEvent(std::int32_t rank, std::int64_t step)
{
    trace::TraceEvent e;
    e.rank = rank;
    e.kind = trace::EventKind::AllReduce;
    e.lane = trace::Lane::Comm;
    e.step = step;
    e.startNs = 1000 + step * 10000;
    e.endNs = 2000 + step * 10000;
    e.bytes = 4096;
    e.group = 0;
    e.groupSize = 2;
    e.algorithm = trace::Algorithm::Ring;
    return e;
}

bool writeExecutable(const QString& path, const QByteArray& text)
{
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate) || f.write(text) != text.size())
        return false;
    f.close();
    return f.setPermissions(f.permissions() | QFileDevice::ExeOwner);
}

} // namespace

class TestRunMonitor : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

private slots:
    void statsKeepPaceOverTenThousandSteps()
    {
        constexpr std::int64_t kSteps = 10000;
        std::string stream = trace::encode(trace::RunFrame { 2, R"({"name":"long"})", 2, 1, kSteps });
        stream += trace::encode(trace::GroupsFrame { { { 0, trace::GroupKind::Data, { 0, 1 }, "DP group" } } });
        for (std::int64_t s = 1; s <= kSteps; ++s) {
            stream += trace::encode(trace::EventsFrame { { commEvent(0, s - 1), commEvent(1, s - 1) } });
            stream += trace::encode(trace::StepFrame { s, 3.0 - 1e-4 * double(s), 1000, 0.01, 1, 1e-3, 1e9, {} });
        }
        stream += trace::encode(trace::EndFrame { trace::EndReason::Finished });
        const QString frames = m_dir.filePath(QStringLiteral("frames.txt"));
        QFile f(frames);
        QVERIFY(f.open(QIODevice::WriteOnly));
        QCOMPARE(f.write(stream.data(), qint64(stream.size())), qint64(stream.size()));
        f.close();
        const QString bin = m_dir.filePath(QStringLiteral("bin"));
        QVERIFY(QDir().mkpath(bin));
        QVERIFY(writeExecutable(
            bin + QStringLiteral("/mpirun"), QStringLiteral("#!/bin/sh\nexec cat '%1'\n").arg(frames).toUtf8()));
        qputenv("PATH", (bin + QLatin1Char(':')).toUtf8() + qgetenv("PATH"));
        qputenv("LOOM_TRAIN", (bin + QStringLiteral("/mpirun")).toUtf8()); // must exist; never started

        profiles::Store store(m_dir.filePath(QStringLiteral("loom.db")));
        const profiles::ProfileCatalog catalog(&store);
        auto read = plan::readLayoutFile(LOOM_SOURCE_DIR "/resources/examples/tiny-local.json", catalog);
        QVERIFY(read.layout);
        views::RunMonitor monitor(&store);
        QSignalSpy stats(&monitor, &views::RunMonitor::statsChanged);
        QSignalSpy finished(&monitor, &views::RunMonitor::finished);
        QString error;
        QVERIFY2(monitor.start(*read.layout, kSteps, &error) > 0, qPrintable(error));
        QVERIFY(monitor.running());
        QVERIFY(finished.wait(300000));
        QCOMPARE(toString(finished.first().at(0).value<profiles::RunState>()), toString(profiles::RunState::Finished));
        QCOMPARE(qint64(monitor.steps().size()), kSteps);
        // The statistics are computed on a worker, the last of them after the run's end.
        QTRY_VERIFY_WITH_TIMEOUT(!monitor.statsPending(), 300000);
        QVERIFY(monitor.statsOn() != nullptr);
        QVERIFY(monitor.statsOn() != QThread::currentThread());
        QCOMPARE(monitor.stats().steps, std::int32_t(kSteps));
        // 20,000 events: one refresh per 2,000 new events at most (about ten), and the last at the end; it was
        // 10,000, one per step over every event so far.
        QVERIFY2(stats.count() >= 2 && stats.count() <= 20, qPrintable(QString::number(stats.count())));
        QVERIFY(!monitor.running());
    }

    // A finished run reopened from the store fills the bandwidth and link plots from its stored events, as
    // they were live (they stayed empty: the plots redrew on the reset, before the events came in).
    void reopenedRunFillsBandwidthPlots()
    {
        profiles::Store store(m_dir.filePath(QStringLiteral("reopen.db")));
        const profiles::ProfileCatalog catalog(&store);
        auto read = plan::readLayoutFile(LOOM_SOURCE_DIR "/resources/examples/tiny-local.json", catalog);
        QVERIFY(read.layout);
        profiles::RunStore runs(store);
        const qint64 id = runs.startRun(QStringLiteral("stored"),
            QString::fromStdString(plan::writeLayout(*read.layout)), QStringLiteral("local"), QStringLiteral("x"));
        std::vector<trace::TraceEvent> events;
        for (std::int64_t step = 0; step < 3; ++step) {
            events.push_back(commEvent(0, step));
            events.push_back(commEvent(1, step));
            profiles::StepRecord s;
            s.step = step + 1;
            s.loss = 3.0;
            s.tokensPerSecond = 100;
            runs.addStep(id, s);
        }
        runs.addEvents(id, events);
        runs.finishRun(id, profiles::RunState::Finished, {});

        views::RunMonitor monitor(&store);
        views::MetricsPanel panel(&monitor);
        QString error;
        QVERIFY2(monitor.open(id, &error), qPrintable(error));
        QCOMPARE(monitor.bandwidth().size(), std::size_t(3));
        QVERIFY(panel.collectivePlot()->graphCount() >= 1);
        QVERIFY(panel.linkPlot()->graphCount() >= 1);
        QCOMPARE(panel.collectivePlot()->graph(0)->dataCount(), 3);
        QCOMPARE(panel.linkPlot()->graph(0)->dataCount(), 3);
    }
};

QTEST_MAIN(TestRunMonitor)
#include "tst_runmonitor.moc"
