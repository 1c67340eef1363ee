// The workbench against a real Slurm (the one-node cluster of tests/launcher/slurm-cluster.sh): a layout on a
// Slurm cluster profile run from the window's Run button, cancelled by a click on Cancel while the job trains.
// The job leaves the queue, the store records the run cancelled, the panel keeps saying that it is cancelling
// until it has ended, and Run is enabled again. Skipped, with the reason, where the daemons cannot start.
#include "../launcher/LoomTestHelpers.h"
#include "../launcher/SlurmTestCluster.h"
#include "app/gui/MainWindow.h"
#include "profiles/ProfileCatalog.h"
#include "profiles/RunStore.h"
#include "profiles/Store.h"
#include "views/RunMonitor.h"
#include "views/RunPanel.h"

#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTest>

using namespace loom;
using namespace loomtest;

class TestWorkbenchSlurm : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    SlurmTestCluster m_cluster;

    QString db() const { return m_dir.filePath(QStringLiteral("loom.db")); }

private slots:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        qputenv("XDG_CONFIG_HOME", m_dir.filePath(QStringLiteral("config")).toLocal8Bit());
        QCoreApplication::setOrganizationName(QStringLiteral("loom-test"));
        QString message;
        const SlurmTestCluster::Up up = m_cluster.up(m_dir.filePath(QStringLiteral("slurm")), 4, &message);
        if (up == SlurmTestCluster::Up::NotHere)
            QSKIP(qPrintable(QStringLiteral("no Slurm here: ") + message));
        QVERIFY2(up == SlurmTestCluster::Up::Started, qPrintable(message));
        // The window's launcher runs sbatch, scontrol and scancel with this process's environment.
        qputenv("SLURM_CONF", m_cluster.conf().toUtf8());
        qunsetenv("SLURM_JOB_ID");
        const QString profile = m_dir.filePath(QStringLiteral("slurm-here.json"));
        QVERIFY(writeFile(profile,
            QStringLiteral(R"({"loom_profile": 1, "kind": "cluster", "name": "slurm-here", "nodes": 1,
            "devices_per_node": 2,
            "device": {"name": "CPU core", "memory_gb": 2, "memory_bandwidth_gbs": 10,
                       "peak_tflops": {"fp32": 0.09, "fp16": 0.09, "bf16": 0.09}},
            "intra_node": {"link": "shm", "bandwidth_gbs": 5, "latency_us": 1},
            "launch": {"method": "slurm", "partition": "loomtest", "time_limit": "00:10:00", "engine": "%1",
                       "mpirun_options": ["--oversubscribe"]}})")
                .arg(QStringLiteral(LOOM_TRAIN_EXE))
                .toUtf8()));
        const LoomResult r = loomtest::loom(db(), { QStringLiteral("profiles"), QStringLiteral("import"), profile });
        QVERIFY2(r.exitCode == 0, qPrintable(r.output));
    }

    void cleanupTestCase() { m_cluster.down(); }

    void cancelASlurmRunFromTheWindow()
    {
        const QString file = m_dir.filePath(QStringLiteral("slurm-layout.json"));
        QVERIFY(writeFile(file,
            R"({"loom_layout": 1, "name": "window slurm", "model": "gpt-tiny", "cluster": "slurm-here",
            "nodes": 1, "parallel": {"tp": 1, "pp": 1, "dp": 2, "micro_batch": 1, "global_batch": 2}})"));
        profiles::Store store(db());
        profiles::ProfileCatalog catalog(&store);
        app::MainWindow w(catalog, &store);
        w.show();
        QString error;
        QVERIFY2(w.openFile(file, &error), qPrintable(error));
        views::RunPanel* panel = w.runPanel();
        QTRY_VERIFY2_WITH_TIMEOUT(panel->runButton()->isEnabled(), qPrintable(panel->runButton()->toolTip()), 10000);
        QVERIFY2(panel->target().contains(QLatin1String("a Slurm job")), qPrintable(panel->target()));
        panel->stepsBox()->setValue(100000);
        QSignalSpy finished(w.runMonitor(), &views::RunMonitor::finished);
        QTest::mouseClick(panel->runButton(), Qt::LeftButton);
        // While the job is submitted and trains, nothing of it runs here: Cancel is enabled and Run is not.
        QVERIFY(panel->cancelButton()->isEnabled());
        QVERIFY(!panel->runButton()->isEnabled());
        QTRY_VERIFY2_WITH_TIMEOUT(w.runMonitor()->steps().size() >= 2, qPrintable(panel->status()), 90000);
        QVERIFY(!m_cluster.queueEmpty());
        const qint64 id = w.runMonitor()->runId();
        QTest::mouseClick(panel->cancelButton(), Qt::LeftButton);
        QVERIFY2(panel->status().startsWith(QLatin1String("Cancelling")), qPrintable(panel->status()));
        // The ranks finish their step (more steps may arrive): the panel still says it is cancelling.
        const std::size_t atCancel = w.runMonitor()->steps().size();
        QVERIFY(finished.wait(60000));
        if (w.runMonitor()->steps().size() > atCancel)
            qInfo("%zu steps arrived after Cancel", w.runMonitor()->steps().size() - atCancel);
        QCOMPARE(profiles::toString(w.runMonitor()->state()), QStringLiteral("cancelled"));
        QVERIFY2(panel->status().contains(QLatin1String("cancelled")), qPrintable(panel->status()));
        QVERIFY(waitFor([this] { return m_cluster.queueEmpty(); }, 20000));
        const auto record = profiles::RunStore(store).run(id);
        QVERIFY(record);
        QCOMPARE(profiles::toString(record->state), QStringLiteral("cancelled"));
        QVERIFY2(record->command.contains(QLatin1String("(Slurm job ")), qPrintable(record->command));
        QVERIFY(panel->runButton()->isEnabled());
        QVERIFY(!panel->cancelButton()->isEnabled());
    }
};

QTEST_MAIN(TestWorkbenchSlurm)
#include "tst_workbench_slurm.moc"
