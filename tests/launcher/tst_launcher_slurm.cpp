// `loom run` under Slurm for real: a one-node cluster (munged, slurmctld, slurmd from slurm-wlm, started by
// slurm-cluster.sh with a generated slurm.conf), a run through sbatch whose output is followed to the end,
// a cancel (scancel), and srun inside an allocation (salloc). Skipped, with the reason, where the daemons
// cannot start (not root, slurm-wlm missing).
#include "LoomTestHelpers.h"
#include "ProcessTree.h"
#include "SlurmRequest.h"
#include "SlurmTestCluster.h"
#include "launcher/LaunchCommands.h"
#include "launcher/RunController.h"

#include <QDir>
#include <QElapsedTimer>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>

#include <csignal>

using namespace loomtest;

class TestLauncherSlurm : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    SlurmTestCluster m_cluster;
    QString m_conf;

    QString db() const { return m_dir.filePath(QStringLiteral("loom.db")); }
    QProcessEnvironment slurmEnv() const { return m_cluster.env(); }
    // Outside an allocation: the launcher must use sbatch, whatever ctest was started from.
    static QStringList withoutJob()
    {
        return { QStringLiteral("env"), QStringLiteral("-u"), QStringLiteral("SLURM_JOB_ID") };
    }

    QString layout(const QString& cluster = QStringLiteral("slurm-here"))
    {
        const QString file = m_dir.filePath(QStringLiteral("$(touch pwned)-%1.json").arg(cluster));
        writeFile(file,
            QStringLiteral(R"({"loom_layout": 1, "name": "$(touch pwned) slurm", "model": "gpt-tiny", "cluster": "%1",
            "nodes": 1, "parallel": {"tp": 1, "pp": 1, "dp": 2, "micro_batch": 1, "global_batch": 2}})")
                .arg(cluster)
                .toUtf8());
        return file;
    }

    // `loom run` in the background, outside any allocation, until its output shows `until`.
    void startLoom(QProcess& p, const QStringList& args, const QByteArray& until, QByteArray& seen)
    {
        startLoomUntil(p, db(), args, until, seen, {}, slurmEnv(), { QStringLiteral("SLURM_JOB_ID") });
    }

    void importProfile(const QString& name, const QString& extraLaunch)
    {
        const QString profile = m_dir.filePath(name + QStringLiteral(".json"));
        QVERIFY(writeFile(profile,
            QStringLiteral(R"({"loom_profile": 1, "kind": "cluster", "name": "%1", "nodes": 1,
            "devices_per_node": 2,
            "device": {"name": "CPU core", "memory_gb": 2, "memory_bandwidth_gbs": 10,
                       "peak_tflops": {"fp32": 0.09, "fp16": 0.09, "bf16": 0.09}},
            "intra_node": {"link": "shm", "bandwidth_gbs": 5, "latency_us": 1},
            "launch": {"method": "slurm", "partition": "loomtest", "time_limit": "00:10:00", "engine": "%2",
                       "mpirun_options": ["--oversubscribe"]%3}})")
                .arg(name, QStringLiteral(LOOM_TRAIN_EXE), extraLaunch)
                .toUtf8()));
        const LoomResult r = loomtest::loom(db(), { QStringLiteral("profiles"), QStringLiteral("import"), profile });
        QVERIFY2(r.exitCode == 0, qPrintable(r.output));
    }

    QString slurm(const QString& program, const QStringList& args) { return m_cluster.run(program, args); }

    int enginesLeft()
    {
        QProcess p;
        p.start(QStringLiteral("pgrep"), { QStringLiteral("-f"), m_dir.path() + QStringLiteral("/runs") });
        p.waitForFinished();
        return QString::fromUtf8(p.readAll()).split('\n', Qt::SkipEmptyParts).size();
    }

    bool queueEmptyWithin(int ms)
    {
        return waitFor([this] { return m_cluster.queueEmpty() && enginesLeft() == 0; }, ms);
    }

private slots:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        QString message;
        const SlurmTestCluster::Up up = m_cluster.up(m_dir.filePath(QStringLiteral("slurm")), 4, &message);
        if (up == SlurmTestCluster::Up::NotHere)
            QSKIP(qPrintable(QStringLiteral("no Slurm here: ") + message));
        QVERIFY2(up == SlurmTestCluster::Up::Started, qPrintable(message));
        m_conf = m_cluster.conf();
        importProfile(QStringLiteral("slurm-here"), {});
        // Two nodes asked of a one-node partition (sbatch's command line wins over the script's header).
        importProfile(QStringLiteral("slurm-too-big"), QStringLiteral(R"(, "sbatch_options": ["--nodes=2"])"));
    }

    void cleanupTestCase() { m_cluster.down(); }

    // A function that failed half-way may leave its job in the queue: remove it, so that the next functions
    // (which expect an empty queue) report their own result, not this one's leftovers.
    void cleanup()
    {
        if (!QTest::currentTestFailed() || m_cluster.queueEmpty())
            return;
        slurm(QStringLiteral("scancel"), { QStringLiteral("--partition=loomtest") });
        if (!queueEmptyWithin(30000))
            qWarning("the queue is still not empty: %s", qPrintable(slurm(QStringLiteral("squeue"), {})));
    }

    void runThroughSbatch()
    {
        const LoomResult r
            = loomtest::loom(db(), { QStringLiteral("run"), layout(), QStringLiteral("--steps"), QStringLiteral("3") },
                withoutJob(), slurmEnv());
        QVERIFY2(r.exitCode == 0 && r.output.contains("step 3/3"), qPrintable(r.output));
        const QJsonObject run = lastRun(db());
        QCOMPARE(run.value("state").toString(), QStringLiteral("finished"));
        QCOMPARE(run.value("steps").toInt(), 3);
        const LoomResult show = loomtest::loom(
            db(), { QStringLiteral("runs"), QStringLiteral("show"), QString::number(run.value("id").toInt()) });
        QVERIFY2(show.output.contains("command sbatch --parsable") && show.output.contains("(Slurm job "),
            qPrintable(show.output));
        // The job ran the generated script: Slurm kept it as the job's batch script.
        QVERIFY2(
            slurm(QStringLiteral("scontrol"), { QStringLiteral("show"), QStringLiteral("job"), QStringLiteral("-o") })
                .contains("JobState=COMPLETED"),
            "no completed job in Slurm");
        QVERIFY(!QFile::exists(m_dir.filePath(QStringLiteral("pwned"))));
        QVERIFY(queueEmptyWithin(10000));
    }

    // A cancelled job saves its last step (scancel --batch --signal=USR1: mpirun passes it to the ranks), the
    // job id is shown at submission and recorded, each rank's log is in the run folder, and --resume goes on
    // from the saved step while a run without it refuses the used folder.
    void cancelAJobSavesAndResumes()
    {
        const QString ckpt = m_dir.filePath(QStringLiteral("ckpt-sbatch"));
        QProcess p;
        QByteArray seen;
        startLoom(p,
            { layout(), QStringLiteral("--steps"), QStringLiteral("100000"), QStringLiteral("--checkpoint-dir"), ckpt },
            "step 2/", seen);
        QVERIFY2(seen.contains("step 2/"), seen.constData());
        QVERIFY2(seen.contains("submitted Slurm job "), seen.constData());
        ::kill(static_cast<pid_t>(p.processId()), SIGINT);
        QVERIFY(p.waitForFinished(60000));
        seen += p.readAll();
        QVERIFY2(p.exitCode() == 130, seen.constData());
        const QJsonObject run = lastRun(db());
        QCOMPARE(run.value("state").toString(), QStringLiteral("cancelled"));
        const int saved = run.value("steps").toInt();
        QVERIFY(saved >= 2);
        QFile latest(ckpt + QStringLiteral("/latest"));
        QVERIFY2(latest.open(QIODevice::ReadOnly), "cancel saved no checkpoint");
        QCOMPARE(latest.readAll().trimmed(), QStringLiteral("step-%1").arg(saved).toUtf8());
        const LoomResult show = loomtest::loom(
            db(), { QStringLiteral("runs"), QStringLiteral("show"), QString::number(run.value("id").toInt()) });
        QVERIFY2(show.output.contains(QStringLiteral("checkpoint at step %1").arg(saved))
                && show.output.contains("(Slurm job ") && show.output.contains("log of rank.1 (stderr): "),
            qPrintable(show.output));
        QVERIFY2(queueEmptyWithin(20000), qPrintable(slurm(QStringLiteral("squeue"), {})));

        const QStringList again { QStringLiteral("run"), layout(), QStringLiteral("--steps"),
            QString::number(saved + 2), QStringLiteral("--checkpoint-dir"), ckpt };
        const LoomResult refused = loomtest::loom(db(), again, withoutJob(), slurmEnv());
        QVERIFY2(refused.exitCode == 1 && refused.output.contains("already holds an earlier run's checkpoints"),
            qPrintable(refused.output));
        const LoomResult resumed
            = loomtest::loom(db(), again + QStringList { QStringLiteral("--resume") }, withoutJob(), slurmEnv());
        QVERIFY2(resumed.exitCode == 0
                && resumed.output.contains(QStringLiteral("continues run %1 from its checkpoint at step %2")
                                               .arg(run.value("id").toInt())
                                               .arg(saved)),
            qPrintable(resumed.output));
        QCOMPARE(lastRun(db()).value("steps").toInt(), saved + 2);
        QVERIFY(queueEmptyWithin(20000));
    }

    // A job that waits for resources is shown with its id, state and reason, and Ctrl-C removes it from the
    // queue at once (a plain scancel, in the background), not after a refused signal and retries.
    void pendingJobShownAndCancelled()
    {
        const QString blocker = slurm(QStringLiteral("sbatch"),
            { QStringLiteral("--parsable"), QStringLiteral("--output=/dev/null"), QStringLiteral("-n"),
                QStringLiteral("4"), QStringLiteral("--wrap"), QStringLiteral("sleep 300") })
                                    .trimmed();
        QProcess p;
        QByteArray seen;
        startLoom(p, { layout(), QStringLiteral("--steps"), QStringLiteral("3") }, "PENDING (", seen);
        QVERIFY2(seen.contains("PENDING (Resources)") || seen.contains("PENDING (Priority)"), seen.constData());
        QElapsedTimer t;
        t.start();
        ::kill(static_cast<pid_t>(p.processId()), SIGINT);
        QVERIFY(p.waitForFinished(30000));
        const qint64 ms = t.elapsed();
        seen += p.readAll();
        QVERIFY2(p.exitCode() == 130, seen.constData());
        // It took 106 s when scancel --signal was refused and retried; about 0.3 s now (busy machines: 10 s).
        qInfo("cancel of a pending job: %lld ms", static_cast<long long>(ms));
        QVERIFY2(ms < 10000, qPrintable(QStringLiteral("cancel of a pending job took %1 ms").arg(ms)));
        const QJsonObject run = lastRun(db());
        QCOMPARE(run.value("state").toString(), QStringLiteral("cancelled"));
        QVERIFY2(
            run.value("exit_cause").toString().contains("was pending"), qPrintable(run.value("exit_cause").toString()));
        const QString queue
            = slurm(QStringLiteral("squeue"), { QStringLiteral("-h"), QStringLiteral("-o"), QStringLiteral("%i") });
        QCOMPARE(queue.trimmed(), blocker);
        slurm(QStringLiteral("scancel"), { blocker });
        QVERIFY(queueEmptyWithin(20000));
    }

    // What the workbench asks of the controller: a submitted job is active (Run disabled, Cancel enabled) though
    // nothing of it runs here, its state comes as a signal, and cancel() ends it without blocking.
    void controllerActiveWhilePending()
    {
        const QString blocker = slurm(QStringLiteral("sbatch"),
            { QStringLiteral("--parsable"), QStringLiteral("--output=/dev/null"), QStringLiteral("-n"),
                QStringLiteral("4"), QStringLiteral("--wrap"), QStringLiteral("sleep 300") })
                                    .trimmed();
        qputenv("SLURM_CONF", m_conf.toUtf8());
        qunsetenv("SLURM_JOB_ID");
        loom::launcher::LaunchRequest r = loomtest::slurmRequest("pending", 2, QStringLiteral(LOOM_TRAIN_EXE));
        r.steps = 3;
        r.workDir = m_dir.filePath(QStringLiteral("runs/controller"));
        loom::launcher::RunController controller(nullptr);
        QSignalSpy states(&controller, &loom::launcher::RunController::jobStateChanged);
        QSignalSpy finished(&controller, &loom::launcher::RunController::finished);
        controller.start(r);
        // sbatch runs in the background: the run is active at once, the job's id follows when sbatch answers.
        QVERIFY(controller.isActive() && !controller.isRunning());
        QTRY_VERIFY_WITH_TIMEOUT(!controller.jobId().isEmpty(), 20000);
        QTRY_VERIFY_WITH_TIMEOUT(
            !states.isEmpty() && states.last().at(1).toString() == QLatin1String("PENDING"), 20000);
        QCOMPARE(states.last().at(0).toString(), controller.jobId());
        controller.cancel();
        QVERIFY(controller.isActive()); // until scancel has said yes
        QVERIFY(finished.wait(20000));
        QCOMPARE(toString(finished.first().at(0).value<loom::profiles::RunState>()),
            toString(loom::profiles::RunState::Cancelled));
        QVERIFY(!controller.isActive());
        QCOMPARE(slurm(QStringLiteral("squeue"), { QStringLiteral("-h"), QStringLiteral("-o"), QStringLiteral("%i") })
                     .trimmed(),
            blocker);
        slurm(QStringLiteral("scancel"), { blocker });
        QVERIFY(queueEmptyWithin(20000));
    }

    // More nodes than the partition has: Slurm keeps the job pending for ever; Loom says it can never start.
    void jobThatCanNeverStartIsReported()
    {
        QProcess p;
        QByteArray seen;
        startLoom(p, { layout(QStringLiteral("slurm-too-big")), QStringLiteral("--steps"), QStringLiteral("3") },
            "partition or time_limit", seen);
        QVERIFY2(seen.contains("can never start as submitted: its reason is Partition"), seen.constData());
        ::kill(static_cast<pid_t>(p.processId()), SIGINT);
        QVERIFY(p.waitForFinished(30000));
        QCOMPARE(p.exitCode(), 130);
        QVERIFY(queueEmptyWithin(20000));
    }

    // Every time form Loom lets through is one real sbatch takes (--test-only: parsed by slurmctld, nothing
    // runs), in the script Loom generates.
    void acceptedHeadersTakenBySbatch_data()
    {
        QTest::addColumn<QString>("timeLimit");
        for (const char* t : { "90", "90:30", "01:30:00", "2-12", "2-12:30", "2-12:30:05", "UNLIMITED", "infinite" })
            QTest::newRow(t) << QString::fromLatin1(t);
    }
    void acceptedHeadersTakenBySbatch()
    {
        QFETCH(QString, timeLimit);
        loom::launcher::LaunchRequest r = loomtest::slurmRequest("header", 1, QStringLiteral(LOOM_TRAIN_EXE));
        r.layout.cluster.launch.timeLimit = timeLimit.toStdString();
        QVERIFY(loom::launcher::launchRefusal(r).isEmpty());
        const QString script = m_dir.filePath(QStringLiteral("header.sbatch"));
        QVERIFY(writeFile(script, loom::launcher::sbatchScript(r, m_dir.filePath("layout.json")).toUtf8()));
        const QString out = slurm(QStringLiteral("sbatch"), { QStringLiteral("--test-only"), script });
        QVERIFY2(out.contains(QLatin1String("to start at")) && !out.contains(QLatin1String("error")), qPrintable(out));
    }

    // A partition or time limit that would add an sbatch option is refused before anything is submitted,
    // by validate and by run; the file an --error= option would truncate is untouched.
    void headerOptionsRefused_data()
    {
        QTest::addColumn<QString>("field");
        QTest::addColumn<QString>("value");
        QTest::newRow("partition --error") << "partition"
                                           << "loomtest --error=VICTIM";
        QTest::newRow("partition --export") << "partition"
                                            << "loomtest --export=ALL,PATH=/tmp";
        QTest::newRow("time_limit --error") << "time_limit"
                                            << "10 --error=VICTIM";
    }
    void headerOptionsRefused()
    {
        QFETCH(QString, field);
        QFETCH(QString, value);
        const QString victim = m_dir.filePath(QStringLiteral("victim.txt"));
        QVERIFY(writeFile(victim, "keep me\n"));
        value.replace(QLatin1String("VICTIM"), victim);
        QJsonObject launch { { "method", "slurm" }, { "partition", "loomtest" }, { "time_limit", "10" } };
        launch[field] = value;
        const QJsonObject cluster { { "name", "inline-slurm" }, { "nodes", 1 }, { "devices_per_node", 2 },
            { "device",
                QJsonObject { { "name", "CPU core" }, { "memory_gb", 2 }, { "memory_bandwidth_gbs", 10 },
                    { "peak_tflops", QJsonObject { { "fp32", 0.09 }, { "fp16", 0.09 }, { "bf16", 0.09 } } } } },
            { "intra_node", QJsonObject { { "link", "shm" }, { "bandwidth_gbs", 5 }, { "latency_us", 1 } } },
            { "launch", launch } };
        const QJsonObject l { { "loom_layout", 1 }, { "name", "header" }, { "model", "gpt-tiny" },
            { "cluster", cluster }, { "nodes", 1 },
            { "parallel",
                QJsonObject { { "tp", 1 }, { "pp", 1 }, { "dp", 2 }, { "micro_batch", 1 }, { "global_batch", 2 } } } };
        const QString file = m_dir.filePath(QStringLiteral("header.json"));
        QVERIFY(writeFile(file, QJsonDocument(l).toJson()));
        const LoomResult v = loomtest::loom(db(), { QStringLiteral("validate"), file }, {}, slurmEnv());
        QVERIFY2(v.exitCode == 2 && v.output.contains(QStringLiteral("cluster.launch.") + field), qPrintable(v.output));
        const LoomResult r = loomtest::loom(db(),
            { QStringLiteral("run"), file, QStringLiteral("--steps"), QStringLiteral("1") }, withoutJob(), slurmEnv());
        QVERIFY2(r.exitCode == 2 && r.output.contains(QStringLiteral("cluster.launch.") + field), qPrintable(r.output));
        QVERIFY(slurm(QStringLiteral("squeue"), { QStringLiteral("-h") }).trimmed().isEmpty());
        QFile f(victim);
        QVERIFY(f.open(QIODevice::ReadOnly));
        QCOMPARE(f.readAll(), QByteArray("keep me\n"));
    }

    // Ctrl-C under srun: SIGUSR1 to srun, which passes it to every task; each saves its step and stops.
    void cancelUnderSrunSaves()
    {
        const QString ckpt = m_dir.filePath(QStringLiteral("ckpt-srun"));
        QProcess p;
        QByteArray seen;
        startLoomUntil(p, db(),
            { layout(), QStringLiteral("--steps"), QStringLiteral("100000"), QStringLiteral("--checkpoint-dir"), ckpt },
            "step 2/", seen, { QStringLiteral("salloc"), QStringLiteral("--nodes=1"), QStringLiteral("--ntasks=2") },
            slurmEnv());
        QVERIFY2(seen.contains("step 2/"), seen.constData());
        qint64 loomPid = 0;
        for (const qint64 pid : descendants(p.processId()))
            if (commOf(pid) == QLatin1String("loom"))
                loomPid = pid;
        QVERIFY(loomPid > 0);
        ::kill(static_cast<pid_t>(loomPid), SIGINT);
        QVERIFY(p.waitForFinished(60000));
        seen += p.readAll();
        const QJsonObject run = lastRun(db());
        QVERIFY2(run.value("state").toString() == QLatin1String("cancelled"), seen.constData());
        QFile latest(ckpt + QStringLiteral("/latest"));
        QVERIFY2(latest.open(QIODevice::ReadOnly), seen.constData());
        QCOMPARE(latest.readAll().trimmed(), QStringLiteral("step-%1").arg(run.value("steps").toInt()).toUtf8());
        QVERIFY(queueEmptyWithin(20000));
    }

    void srunInsideAnAllocation()
    {
        const LoomResult r
            = loomtest::loom(db(), { QStringLiteral("run"), layout(), QStringLiteral("--steps"), QStringLiteral("3") },
                { QStringLiteral("salloc"), QStringLiteral("--nodes=1"), QStringLiteral("--ntasks=2") }, slurmEnv());
        QVERIFY2(r.exitCode == 0 && r.output.contains("step 3/3"), qPrintable(r.output));
        const QJsonObject run = lastRun(db());
        QCOMPARE(run.value("state").toString(), QStringLiteral("finished"));
        const LoomResult show = loomtest::loom(
            db(), { QStringLiteral("runs"), QStringLiteral("show"), QString::number(run.value("id").toInt()) });
        QVERIFY2(show.output.contains("command srun --mpi=pmix"), qPrintable(show.output));
        // Each rank's standard error in the run folder (srun --error with %t), listed by runs show.
        for (int rank : { 0, 1 })
            QVERIFY2(
                show.output.contains(QStringLiteral("log of rank.%1 (stderr): ").arg(rank)), qPrintable(show.output));
        QVERIFY(queueEmptyWithin(10000));
    }
};

QTEST_GUILESS_MAIN(TestLauncherSlurm)
#include "tst_launcher_slurm.moc"
