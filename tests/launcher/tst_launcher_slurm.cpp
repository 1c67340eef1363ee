// `loom run` under Slurm for real: a one-node cluster (munged, slurmctld, slurmd from slurm-wlm, started by
// slurm-cluster.sh with a generated slurm.conf), a run through sbatch whose output is followed to the end,
// a cancel (scancel), and srun inside an allocation (salloc). Skipped, with the reason, where the daemons
// cannot start (not root, slurm-wlm missing).
#include "LoomTestHelpers.h"

#include <QDir>
#include <QElapsedTimer>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>

#include <csignal>

using namespace loomtest;

class TestLauncherSlurm : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    QString m_conf;
    bool m_up = false;

    QString db() const { return m_dir.filePath(QStringLiteral("loom.db")); }
    QProcessEnvironment slurmEnv() const
    {
        QProcessEnvironment e;
        e.insert(QStringLiteral("SLURM_CONF"), m_conf);
        return e;
    }
    // Outside an allocation: the launcher must use sbatch, whatever ctest was started from.
    static QStringList withoutJob()
    {
        return { QStringLiteral("env"), QStringLiteral("-u"), QStringLiteral("SLURM_JOB_ID") };
    }

    QString layout()
    {
        const QString file = m_dir.filePath(QStringLiteral("$(touch pwned).json"));
        writeFile(
            file, R"({"loom_layout": 1, "name": "$(touch pwned) slurm", "model": "gpt-tiny", "cluster": "slurm-here",
            "nodes": 1, "parallel": {"tp": 1, "pp": 1, "dp": 2, "micro_batch": 1, "global_batch": 2}})");
        return file;
    }

    QString slurm(const QString& program, const QStringList& args)
    {
        QProcess p;
        QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
        e.insert(slurmEnv());
        p.setProcessEnvironment(e);
        p.setProcessChannelMode(QProcess::MergedChannels);
        p.start(program, args);
        p.waitForFinished(30000);
        return QString::fromUtf8(p.readAll());
    }

    int enginesLeft()
    {
        QProcess p;
        p.start(QStringLiteral("pgrep"), { QStringLiteral("-f"), m_dir.path() + QStringLiteral("/runs") });
        p.waitForFinished();
        return QString::fromUtf8(p.readAll()).split('\n', Qt::SkipEmptyParts).size();
    }

    bool queueEmptyWithin(int ms)
    {
        QElapsedTimer t;
        t.start();
        while (t.elapsed() < ms) {
            if (slurm(QStringLiteral("squeue"), { QStringLiteral("-h") }).trimmed().isEmpty() && enginesLeft() == 0)
                return true;
            QThread::msleep(200);
        }
        return false;
    }

private slots:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        const QString cluster = m_dir.filePath(QStringLiteral("slurm"));
        QDir().mkpath(cluster);
        QProcess up;
        up.start(QStringLiteral(LOOM_SOURCE_DIR "/tests/launcher/slurm-cluster.sh"),
            { QStringLiteral("up"), cluster, QStringLiteral("4") });
        up.waitForFinished(60000);
        const QString out = QString::fromUtf8(up.readAllStandardOutput() + up.readAllStandardError());
        m_up = true;
        if (up.exitCode() == 3)
            QSKIP(qPrintable(QStringLiteral("no Slurm here: ") + out.trimmed()));
        QVERIFY2(up.exitCode() == 0, qPrintable(out));
        m_conf = out.trimmed().section(QLatin1Char('='), 1);
        QVERIFY(QFile::exists(m_conf));
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
        const LoomResult r = loom(db(), { QStringLiteral("profiles"), QStringLiteral("import"), profile });
        QVERIFY2(r.exitCode == 0, qPrintable(r.output));
    }

    void cleanupTestCase()
    {
        if (!m_up)
            return;
        if (!m_conf.isEmpty())
            slurm(QStringLiteral("scancel"), { QStringLiteral("--partition=loomtest") });
        QProcess down;
        down.start(QStringLiteral(LOOM_SOURCE_DIR "/tests/launcher/slurm-cluster.sh"),
            { QStringLiteral("down"), m_dir.filePath(QStringLiteral("slurm")) });
        down.waitForFinished(60000);
    }

    void runThroughSbatch()
    {
        const LoomResult r
            = loom(db(), { QStringLiteral("run"), layout(), QStringLiteral("--steps"), QStringLiteral("3") },
                withoutJob(), slurmEnv());
        QVERIFY2(r.exitCode == 0 && r.output.contains("step 3/3"), qPrintable(r.output));
        const QJsonObject run = lastRun(db());
        QCOMPARE(run.value("state").toString(), QStringLiteral("finished"));
        QCOMPARE(run.value("steps").toInt(), 3);
        const LoomResult show
            = loom(db(), { QStringLiteral("runs"), QStringLiteral("show"), QString::number(run.value("id").toInt()) });
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

    void cancelAJob()
    {
        QProcess p;
        QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
        e.insert(QStringLiteral("LOOM_DB"), db());
        e.insert(slurmEnv());
        e.remove(QStringLiteral("SLURM_JOB_ID"));
        p.setProcessEnvironment(e);
        p.setProcessChannelMode(QProcess::MergedChannels);
        p.start(QStringLiteral(LOOM_EXE),
            { QStringLiteral("run"), layout(), QStringLiteral("--steps"), QStringLiteral("100000") });
        QElapsedTimer t;
        t.start();
        QByteArray seen;
        while (t.elapsed() < 60000 && !seen.contains("step 2/") && p.state() != QProcess::NotRunning) {
            p.waitForReadyRead(100);
            seen += p.readAll();
        }
        QVERIFY2(seen.contains("step 2/"), seen.constData());
        ::kill(static_cast<pid_t>(p.processId()), SIGINT);
        QVERIFY(p.waitForFinished(60000));
        QVERIFY2(p.exitCode() == 130, (seen + p.readAll()).constData());
        QCOMPARE(lastRun(db()).value("state").toString(), QStringLiteral("cancelled"));
        QVERIFY2(queueEmptyWithin(20000), qPrintable(slurm(QStringLiteral("squeue"), {})));
    }

    void srunInsideAnAllocation()
    {
        const LoomResult r
            = loom(db(), { QStringLiteral("run"), layout(), QStringLiteral("--steps"), QStringLiteral("3") },
                { QStringLiteral("salloc"), QStringLiteral("--nodes=1"), QStringLiteral("--ntasks=2") }, slurmEnv());
        QVERIFY2(r.exitCode == 0 && r.output.contains("step 3/3"), qPrintable(r.output));
        const QJsonObject run = lastRun(db());
        QCOMPARE(run.value("state").toString(), QStringLiteral("finished"));
        const LoomResult show
            = loom(db(), { QStringLiteral("runs"), QStringLiteral("show"), QString::number(run.value("id").toInt()) });
        QVERIFY2(show.output.contains("command srun --mpi=pmix"), qPrintable(show.output));
        QVERIFY(queueEmptyWithin(10000));
    }
};

QTEST_GUILESS_MAIN(TestLauncherSlurm)
#include "tst_launcher_slurm.moc"
