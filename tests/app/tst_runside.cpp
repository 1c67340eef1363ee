// The workbench's run side, end to end: a real 2-rank local run launched from the window's Run panel
// (mpirun and loom-train), its events arriving in the live timeline while it runs, its metrics plotted, its
// record in the history; open, compare, export (plots, timeline, Chrome trace) and delete.

#include "app/gui/MainWindow.h"
#include "profiles/ProfileCatalog.h"
#include "profiles/Store.h"
#include "views/CompareDialog.h"
#include "views/LayoutDocument.h"
#include "views/LayoutEdits.h"
#include "views/MetricsPanel.h"
#include "views/RunHistoryModel.h"
#include "views/RunMonitor.h"
#include "views/RunPanel.h"
#include "views/RunTimelinePanel.h"
#include "views/RunsPanel.h"
#include "views/StrategyPanel.h"
#include "views/TimelineView.h"

#include <QAbstractItemModelTester>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>
#include <qcustomplot.h>

using namespace loom;
using namespace loom::views;

class TestRunSide : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    std::unique_ptr<profiles::Store> m_store;
    std::unique_ptr<profiles::ProfileCatalog> m_catalog;

    // Runs the example reshaped to tp 1 · pp 2 · dp 1 (2 ranks) for `steps` steps through the window.
    qint64 runTwoRanks(app::MainWindow& w, int steps, int* eventsWhileRunning)
    {
        if (!w.openFile(QString::fromLatin1(app::MainWindow::kExample)))
            return 0;
        QSignalSpy shown(&w, &app::MainWindow::analysisShown);
        if (!w.strategyPanel()->requestDegree(Degree::Tp, 1) || !shown.wait(5000))
            return 0;
        shown.clear();
        if (!w.strategyPanel()->requestDegree(Degree::Dp, 1) || !shown.wait(5000))
            return 0;
        if (w.document()->layout().parallel.worldSize() != 2)
            return 0;
        *eventsWhileRunning = 0;
        QObject::connect(w.runMonitor(), &RunMonitor::eventsAdded, &w, [&w, eventsWhileRunning] {
            if (w.runMonitor()->running())
                *eventsWhileRunning = int(w.runTimeline()->view()->timeline().events().size());
        });
        QSignalSpy finished(w.runMonitor(), &RunMonitor::finished);
        w.runPanel()->stepsBox()->setValue(steps);
        if (!w.runPanel()->runButton()->isEnabled())
            return 0;
        w.runPanel()->runButton()->click();
        if (!w.runMonitor()->running())
            return 0;
        if (!finished.wait(120000))
            return 0;
        return w.runMonitor()->runId();
    }

private slots:
    void initTestCase()
    {
        qputenv("XDG_CONFIG_HOME", m_dir.filePath(QStringLiteral("config")).toLocal8Bit());
        qputenv("OMPI_ALLOW_RUN_AS_ROOT", "1");
        qputenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
        qputenv("OMPI_MCA_rmaps_base_oversubscribe", "1");
        QCoreApplication::setOrganizationName(QStringLiteral("loom-test"));
        m_store = std::make_unique<profiles::Store>(m_dir.filePath(QStringLiteral("runs.db")));
        m_catalog = std::make_unique<profiles::ProfileCatalog>(m_store.get());
    }

    void liveRunFromTheWindow()
    {
        app::MainWindow w(*m_catalog, m_store.get());
        w.show();
        int whileRunning = 0;
        const qint64 id = runTwoRanks(w, 6, &whileRunning);
        QVERIFY2(id > 0, qPrintable(w.runPanel()->status()));
        QCOMPARE(profiles::toString(w.runMonitor()->state()), QStringLiteral("finished"));
        // Events reached the timeline while the run was going, from both ranks, on both lanes.
        QVERIFY2(whileRunning > 0, "no events arrived during the run");
        const TimelineData& t = w.runTimeline()->view()->timeline();
        QVERIFY(t.events().size() > std::size_t(whileRunning) || whileRunning > 0);
        QVERIFY(t.rowIndex(0, trace::Lane::Compute) >= 0 && t.rowIndex(1, trace::Lane::Compute) >= 0);
        QVERIFY(t.rowIndex(0, trace::Lane::Comm) >= 0);
        QCOMPARE(t.lastStep(), 5);
        QVERIFY(!t.groups().empty()); // the stream's groups frame names the collectives
        // Metrics: six losses, the stage bubbles measured and predicted, bandwidth per collective.
        QCOMPARE(w.runMonitor()->steps().size(), std::size_t(6));
        QCOMPARE(w.metricsPanel()->lossPlot()->graph(0)->dataCount(), 6);
        // The statistics are computed on a worker: the last refresh may follow the end of the run.
        QTRY_COMPARE(w.runMonitor()->stats().stages.size(), std::size_t(2));
        QVERIFY(w.runMonitor()->statsOn() != QThread::currentThread());
        QVERIFY(w.metricsPanel()->bubblePlot()->plottableCount() >= 2);
        QVERIFY(!w.runMonitor()->bandwidth().empty());
        QVERIFY(w.metricsPanel()->collectivePlot()->graphCount() >= 1);
        QVERIFY(w.runPanel()->status().contains(QStringLiteral("finished")));
        // The history lists it.
        RunHistoryModel* history = w.runsPanel()->model();
        QAbstractItemModelTester tester(history, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QVERIFY(history->rowCount() >= 1);
        QCOMPARE(history->runIdAt(0), id);
        QCOMPARE(history->data(history->index(0, RunHistoryModel::State)).toString(), QStringLiteral("finished"));

        // Exports: every plot and the timeline as PNG, SVG and PDF; the run as a Chrome trace.
        for (const char* ext : { "png", "svg", "pdf" }) {
            QString error;
            const QString plot = m_dir.filePath(QStringLiteral("loss.%1").arg(QLatin1String(ext)));
            QVERIFY2(exportPlot(w.metricsPanel()->lossPlot(), plot, &error), qPrintable(error));
            QVERIFY(QFileInfo(plot).size() > 500);
            const QString timeline = m_dir.filePath(QStringLiteral("timeline.%1").arg(QLatin1String(ext)));
            QVERIFY2(exportWidget(w.runTimeline()->view(), timeline, &error), qPrintable(error));
            QVERIFY(QFileInfo(timeline).size() > 500);
        }
        QString error;
        QVERIFY(!exportPlot(w.metricsPanel()->lossPlot(), m_dir.filePath(QStringLiteral("loss.bmpx")), &error));
        QVERIFY(error.contains(QStringLiteral(".png, .svg or .pdf")));
        const QString chrome = m_dir.filePath(QStringLiteral("run.json"));
        QVERIFY2(w.runsPanel()->exportChrome(id, chrome, &error), qPrintable(error));
        QFile f(chrome);
        QVERIFY(f.open(QIODevice::ReadOnly));
        QVERIFY(f.readAll().contains("\"traceEvents\""));
    }

    void openCompareAndDelete()
    {
        app::MainWindow w(*m_catalog, m_store.get());
        w.show();
        int whileRunning = 0;
        const qint64 second = runTwoRanks(w, 3, &whileRunning);
        QVERIFY2(second > 0, qPrintable(w.runPanel()->status()));
        RunHistoryModel* history = w.runsPanel()->model();
        QVERIFY(history->rowCount() >= 2);
        const qint64 first = history->runIdAt(1);
        // Opening the older run shows its steps and events in place of the live ones.
        QVERIFY(w.openRun(first));
        QCOMPARE(w.runMonitor()->runId(), first);
        QCOMPARE(w.runMonitor()->steps().size(), std::size_t(6));
        QVERIFY(w.runTimeline()->view()->timeline().events().size() > 100);
        // The history's Open loads on a worker thread with its own connection.
        QSignalSpy loaded(w.runMonitor(), &RunMonitor::reset);
        emit w.runsPanel()->openRequested(second);
        QVERIFY(w.runMonitor()->loading());
        QVERIFY(loaded.wait(20000));
        QCOMPARE(w.runMonitor()->runId(), second);
        QCOMPARE(w.runMonitor()->steps().size(), std::size_t(3));
        QVERIFY(!w.runTimeline()->view()->timeline().events().empty());
        QSignalSpy failed(w.runMonitor(), &RunMonitor::openFailed);
        w.runMonitor()->openInBackground(99999);
        QVERIFY(failed.wait(20000));
        QVERIFY(failed.at(0).at(0).toString().contains(QStringLiteral("no run 99999")));
        QString error;
        QVERIFY(!w.openRun(99999, &error));
        QVERIFY(error.contains(QStringLiteral("no run 99999")));
        // Side by side.
        CompareDialog compare(m_store.get(), first, second);
        QTRY_VERIFY_WITH_TIMEOUT(compare.loaded(), 20000);
        QVERIFY(compare.ok());
        QCOMPARE(compare.monitor(0)->steps().size(), std::size_t(6));
        QCOMPARE(compare.monitor(1)->steps().size(), std::size_t(3));
        // Delete the second; the list follows.
        const int rows = history->rowCount();
        QVERIFY2(history->remove(second, &error), qPrintable(error));
        QCOMPARE(history->rowCount(), rows - 1);
        QVERIFY(!history->remove(second, &error));
    }

    void invalidLayoutCannotRun()
    {
        app::MainWindow w(*m_catalog, m_store.get());
        QVERIFY(w.openFile(QString::fromLatin1(app::MainWindow::kExample)));
        plan::Layout bad = w.document()->layout();
        bad.parallel.globalBatch = 7; // not divisible by micro-batch × dp
        QSignalSpy shown(&w, &app::MainWindow::analysisShown);
        w.document()->edit(bad, QStringLiteral("bad batch"));
        QVERIFY(shown.wait(5000));
        QVERIFY(!w.runPanel()->runButton()->isEnabled());
        QVERIFY(!w.runPanel()->run());
        QVERIFY(w.runPanel()->status().contains(QStringLiteral("not valid")));
        QVERIFY(!w.runMonitor()->running());
    }
};

QTEST_MAIN(TestRunSide)
#include "tst_runside.moc"
