// The measured timeline's panel and the compare dialog on stored runs (no MPI): the overlay of the simulated
// step aligned on the last complete step and scaled to it, with the predicted-against-measured table; two
// runs' timelines aligned on their step starts and moving together, their configuration difference listed.
#include "TimelineFixture.h"
#include "ViewsTest.h"
#include "engine/trace/PredictedMeasured.h"
#include "profiles/ProfileCatalog.h"
#include "profiles/RunStore.h"
#include "profiles/Store.h"
#include "views/CalibrateDialog.h"
#include "views/CompareDialog.h"
#include "views/Explain.h"
#include "views/RunMonitor.h"
#include "views/RunTimelinePanel.h"
#include "views/TimelineView.h"

#include <QCheckBox>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QTableWidget>
#include <QTemporaryDir>

using namespace loom;
using namespace loom::views;

namespace {

qint64 storeRun(profiles::Store& store, const plan::Layout& layout, std::int64_t shift, int steps)
{
    profiles::RunStore runs(store);
    const qint64 id = runs.startRun(QString::fromStdString(layout.name),
        QString::fromStdString(plan::writeLayout(layout)), QStringLiteral("local"), QStringLiteral("mpirun"));
    auto run = test::pipelineFixture(2, 4, steps);
    for (auto& e : run.events) {
        e.startNs += shift;
        e.endNs += shift;
    }
    runs.addEvents(id, run.events);
    runs.finishRun(id, profiles::RunState::Finished, QString());
    return id;
}

std::int64_t lastStepStart(const TimelineData& d)
{
    const std::int32_t step = trace::lastCompleteStep(d.events());
    std::int64_t start = INT64_MAX;
    for (const auto& e : d.events())
        if (e.step == step)
            start = std::min(start, e.startNs);
    return start;
}

} // namespace

class TestTimelinePanels : public QObject {
    Q_OBJECT
private slots:
    void predictedAgainstMeasured()
    {
        QTemporaryDir dir;
        profiles::Store store(dir.filePath(QStringLiteral("loom.db")));
        const qint64 id = storeRun(store, test::tinyLayout(), 0, 3);
        RunMonitor monitor(&store);
        RunTimelinePanel panel(&monitor);
        panel.resize(1400, 800);
        panel.show();
        QString error;
        QVERIFY2(monitor.open(id, &error), qPrintable(error));
        QTRY_VERIFY(monitor.prediction().has_value());
        QTRY_COMPARE(panel.view()->timeline().events().size(), test::pipelineFixture(2, 4, 3).events.size());
        // Follow names the steps it keeps in view.
        QTRY_VERIFY(!panel.view()->stepsInView().empty());
        const auto kept = panel.view()->stepsInView();
        QVERIFY(panel.followBox()->isChecked());
        QCOMPARE(panel.followBox()->text(),
            QStringLiteral("Follow (steps %1–%2)").arg(kept.front().step).arg(kept.back().step));
        panel.view()->setFocus();
        QTest::keyClick(panel.view(), Qt::Key_W); // navigating stops following
        QCOMPARE(panel.followBox()->text(), QStringLiteral("Follow"));
        QVERIFY(panel.comparisonTable()->isHidden());
        QTest::mouseClick(panel.overlayBox(), Qt::LeftButton);
        QVERIFY(panel.comparisonTable()->isVisible());
        const auto& c = panel.comparison();
        QCOMPARE(c.step, 2);
        QCOMPARE(c.measuredStartNs, lastStepStart(panel.view()->timeline()));
        QCOMPARE(panel.overlayOffset(), c.measuredStartNs);
        // The overlay is stretched to the measured step: its scale is the steps' ratio.
        QCOMPARE(panel.view()->overlayScale(), c.scale);
        QVERIFY(c.scale > 0);
        QCOMPARE(c.kinds.back().ratio, c.scale);
        // The table: one column a kind either side has, predicted, measured and their ratio.
        auto* t = panel.comparisonTable();
        QVERIFY(t->columnCount() >= 4);
        QCOMPARE(t->horizontalHeaderItem(0)->text(), QStringLiteral("forward"));
        QVERIFY(t->item(2, 0)->text().startsWith(QStringLiteral("× ")));
        QCOMPARE(t->horizontalHeaderItem(t->columnCount() - 1)->text(), QStringLiteral("step"));
        QVERIFY(panel.comparisonSummary()->text().contains(QStringLiteral("Step 2: predicted")));
        // Unscaled: drawn at the prediction's own pace from the step's start.
        QTest::mouseClick(panel.scaleBox(), Qt::LeftButton);
        QCOMPARE(panel.view()->overlayScale(), 1.0);
        QTest::mouseClick(panel.overlayBox(), Qt::LeftButton);
        QVERIFY(panel.view()->overlay().events().empty());
    }

    // "Calibrate from this run" through a real click: the dialog holds the planner's fit of the run's events
    // (the same as plan::calibrate called on them), its parameters and the prediction before and after, and
    // saves the calibrated profile in the store as loom plan calibrate does; a name the store refuses says why.
    void calibrateFromThisRun()
    {
        QTemporaryDir dir;
        profiles::Store store(dir.filePath(QStringLiteral("loom.db")));
        const qint64 id = storeRun(store, test::tinyLayout(), 0, 3);
        RunMonitor monitor(&store);
        RunTimelinePanel panel(&monitor);
        panel.resize(1400, 800);
        panel.show();
        QVERIFY(!panel.calibrateButton()->isEnabled()); // no run yet
        QString error;
        QVERIFY2(monitor.open(id, &error), qPrintable(error));
        QTRY_COMPARE(panel.view()->timeline().events().size(), test::pipelineFixture(2, 4, 3).events.size());
        QTRY_VERIFY(panel.calibrateButton()->isEnabled());
        QTest::mouseClick(panel.calibrateButton(), Qt::LeftButton);
        CalibrateDialog* dialog = panel.calibrateDialog();
        QVERIFY(dialog);
        QTRY_VERIFY(dialog->isVisible());
        QVERIFY2(dialog->calibration().has_value(), qPrintable(dialog->summary()->text()));
        std::map<std::int32_t, trace::GroupKind> kinds;
        for (const auto& g : panel.view()->timeline().groups())
            kinds[g.id] = g.kind;
        const plan::Calibration direct = plan::calibrate(monitor.layout(), panel.view()->timeline().events(), kinds);
        const plan::Calibration& fit = *dialog->calibration();
        QCOMPARE(fit.steps, direct.steps);
        QCOMPARE(fit.predictedAfter, direct.predictedAfter);
        QCOMPARE(fit.cluster.device.gemmMax, direct.cluster.device.gemmMax);
        QVERIFY(fit.predictedBefore != fit.predictedAfter);
        QCOMPARE(dialog->parameters()->rowCount(), int(fit.parameters.size()));
        QCOMPARE(dialog->parameters()->item(0, 0)->text(), QString::fromStdString(fit.parameters[0].name));
        const QString summary = dialog->summary()->text();
        QVERIFY2(summary.contains(QStringLiteral("predicted %1 before").arg(formatSeconds(fit.predictedBefore)))
                && summary.contains(QStringLiteral("%1 after").arg(formatSeconds(fit.predictedAfter))),
            qPrintable(summary));
        QCOMPARE(dialog->nameEdit()->text(), QStringLiteral("local-calibrated"));
        // A name the store refuses: nothing saved, the reason shown.
        dialog->nameEdit()->clear();
        QTest::keyClicks(dialog->nameEdit(), QStringLiteral("-x"));
        QTest::mouseClick(dialog->saveButton(), Qt::LeftButton);
        QVERIFY2(dialog->saveStatus()->text().startsWith(QStringLiteral("Not saved")),
            qPrintable(dialog->saveStatus()->text()));
        dialog->nameEdit()->clear();
        QTest::keyClicks(dialog->nameEdit(), QStringLiteral("my-run-profile"));
        QTest::mouseClick(dialog->saveButton(), Qt::LeftButton);
        QVERIFY2(dialog->saveStatus()->text().startsWith(QStringLiteral("Saved cluster profile \"my-run-profile\"")),
            qPrintable(dialog->saveStatus()->text()));
        profiles::ProfileCatalog catalog(&store);
        const auto saved = catalog.findCluster("my-run-profile");
        QVERIFY(saved.has_value());
        QCOMPARE(saved->device.gemmMax, fit.cluster.device.gemmMax);
        const auto entries = catalog.find("my-run-profile");
        QCOMPARE(entries.size(), std::size_t(1));
        QVERIFY(QString::fromStdString(entries.front().profile.source)
                    .startsWith(QStringLiteral("the workbench's Calibrate from run %1: 2 measured steps").arg(id)));
    }

    // A run over ssh names each lane's host ("rank 3 · hostb"), two ranks a host as its hostfile places
    // them; a local run's lanes name none.
    void lanesNameTheirHosts()
    {
        QTemporaryDir dir;
        profiles::Store store(dir.filePath(QStringLiteral("loom.db")));
        plan::Layout ssh = test::tinyLayout();
        ssh.nodes = 2;
        ssh.cluster.launch.method = "ssh";
        ssh.cluster.hosts = { "hosta", "hostb", "hostc" };
        ssh.clusterProfile.clear(); // stored inline, as the launcher stores it
        ssh.cluster.name = "lab";
        const qint64 remote = storeRun(store, ssh, 0, 2);
        const qint64 local = storeRun(store, test::tinyLayout(), 0, 2);
        RunMonitor monitor(&store);
        RunTimelinePanel panel(&monitor);
        QString error;
        QVERIFY2(monitor.open(remote, &error), qPrintable(error));
        const std::int64_t perHost = ssh.parallel.worldSize() / 2;
        QTRY_COMPARE(panel.view()->rankName(0), QStringLiteral("rank 0 · hosta"));
        QCOMPARE(panel.view()->rankName(perHost - 1), QStringLiteral("rank %1 · hosta").arg(perHost - 1));
        QCOMPARE(panel.view()->rankName(perHost), QStringLiteral("rank %1 · hostb").arg(perHost));
        QCOMPARE(panel.view()->rankName(2 * perHost), QStringLiteral("rank %1").arg(2 * perHost)); // no third host
        QVERIFY2(monitor.open(local, &error), qPrintable(error));
        QTRY_COMPARE(panel.view()->rankName(0), QStringLiteral("rank 0"));
    }

    void compareAlignsStepsAndListsTheDifference()
    {
        QTemporaryDir dir;
        profiles::Store store(dir.filePath(QStringLiteral("loom.db")));
        plan::Layout other = test::tinyLayout();
        other.name = "tiny, twice the batch";
        other.parallel.globalBatch *= 2;
        other.comm.dpCodec = *plan::Codec::parse("int8");
        const qint64 a = storeRun(store, test::tinyLayout(), 0, 3);
        const qint64 b = storeRun(store, other, 12345678, 4);
        CompareDialog dialog(&store, a, b);
        dialog.show();
        QTRY_VERIFY(dialog.loaded());
        QString error;
        QVERIFY2(dialog.ok(&error), qPrintable(error));
        QTRY_VERIFY(dialog.difference()->text().contains(QStringLiteral("Configuration difference")));
        const QString diff = dialog.difference()->text();
        QVERIFY2(diff.contains(QStringLiteral("name")), qPrintable(diff));
        QVERIFY2(diff.contains(QStringLiteral("global_batch")) || diff.contains(QStringLiteral("globalBatch")),
            qPrintable(diff));
        QVERIFY2(diff.contains(QStringLiteral("dp_codec")), qPrintable(diff));
        // Each summary names its codec and the run's bubble: the busiest stage's idle share, not stage 0's.
        QTRY_VERIFY(dialog.summary(1)->text().contains(QStringLiteral("codec int8")));
        QVERIFY(dialog.summary(0)->text().contains(QStringLiteral("codec none")));
        for (int side = 0; side < 2; ++side) {
            const auto& stages = dialog.monitor(side)->stats().stages;
            QVERIFY(stages.size() >= 2);
            const auto busiest = *std::min_element(stages.begin(), stages.end(),
                [](const auto& x, const auto& y) { return x.bubbleFraction < y.bubbleFraction; });
            const QString text = dialog.summary(side)->text();
            QVERIFY2(text.contains(QStringLiteral("bubble %1 % (stage %2, the busiest)")
                                       .arg(QLocale().toString(100 * busiest.bubbleFraction, 'f', 1))
                                       .arg(busiest.stage)),
                qPrintable(text));
        }
        // Each timeline starts at its own last complete step: the same offset from it in both.
        const auto offset = [&dialog](int side) {
            return dialog.timeline(side)->window().first - lastStepStart(dialog.timeline(side)->timeline());
        };
        QTRY_COMPARE(offset(0), offset(1));
        QVERIFY(offset(0) < 0 && offset(0) > -100000);
        // Panning one pans the other.
        dialog.timeline(0)->setFocus();
        QTest::keyClick(dialog.timeline(0), Qt::Key_D);
        QVERIFY(offset(0) > 0);
        QCOMPARE(offset(1), offset(0));
    }
};

QTEST_MAIN(TestTimelinePanels)
#include "tst_timelinepanels.moc"
