// `loom run` on a two-node Slurm: two slurmd, each in its own network namespace with its own host name
// (loomnode1, loomnode2; slurm-cluster.sh up2), the filesystem shared as a cluster's is. A job through sbatch
// whose mpirun starts a rank on each node, a cancel of a two-node job that saves the last step, and srun in a
// two-node allocation keeping each rank's log. Skipped, with the reason, where that cannot be made here.
#include "LoomTestHelpers.h"
#include "SlurmTestCluster.h"

#include <QJsonObject>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

#include <csignal>

using namespace loomtest;

class TestLauncherSlurm2 : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    SlurmTestCluster m_cluster;

    QString db() const { return m_dir.filePath(QStringLiteral("loom.db")); }
    QString layout() const { return m_dir.filePath(QStringLiteral("two-nodes.json")); }
    // Loom runs beside slurmctld, in the first node's namespace, outside any allocation.
    LoomResult run(const QStringList& args, const QStringList& wrapper = {})
    {
        return loomtest::loom(db(), args, m_cluster.wrapper() + wrapper, m_cluster.env());
    }
    // The Slurm job of a stored run, from its command ("(Slurm job 42)").
    QString jobOf(const QString& shown)
    {
        static const QRegularExpression job(QStringLiteral("\\(Slurm job ([0-9]+)\\)"));
        return job.match(shown).captured(1);
    }

private slots:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        QString message;
        const SlurmTestCluster::Up up = m_cluster.up(m_dir.filePath(QStringLiteral("slurm")), 2, &message, 2);
        if (up == SlurmTestCluster::Up::NotHere)
            QSKIP(qPrintable(QStringLiteral("no two-node Slurm here: ") + message));
        QVERIFY2(up == SlurmTestCluster::Up::Started, qPrintable(message));
        const QString profile = m_dir.filePath(QStringLiteral("slurm-two.json"));
        QVERIFY(writeFile(profile,
            QStringLiteral(R"({"loom_profile": 1, "kind": "cluster", "name": "slurm-two", "nodes": 2,
            "devices_per_node": 1,
            "device": {"name": "CPU core", "memory_gb": 2, "memory_bandwidth_gbs": 10,
                       "peak_tflops": {"fp32": 0.09, "fp16": 0.09, "bf16": 0.09}},
            "intra_node": {"link": "shm", "bandwidth_gbs": 5, "latency_us": 1},
            "inter_node": {"link": "ethernet", "bandwidth_gbs": 1, "latency_us": 50},
            "launch": {"method": "slurm", "partition": "loomtest", "time_limit": "00:10:00", "engine": "%1",
                       "mpirun_options": ["--oversubscribe"]}})")
                .arg(QStringLiteral(LOOM_TRAIN_EXE))
                .toUtf8()));
        const LoomResult r = loomtest::loom(db(), { QStringLiteral("profiles"), QStringLiteral("import"), profile });
        QVERIFY2(r.exitCode == 0, qPrintable(r.output));
        QVERIFY(writeFile(layout(),
            R"({"loom_layout": 1, "name": "two nodes", "model": "gpt-tiny", "cluster": "slurm-two", "nodes": 2,
            "parallel": {"tp": 1, "pp": 1, "dp": 2, "micro_batch": 1, "global_batch": 2}})"));
    }

    void cleanupTestCase() { m_cluster.down(); }

    void twoNodeRunThroughSbatch()
    {
        const LoomResult r = run({ QStringLiteral("run"), layout(), QStringLiteral("--steps"), QStringLiteral("3") },
            { QStringLiteral("env"), QStringLiteral("-u"), QStringLiteral("SLURM_JOB_ID") });
        QVERIFY2(r.exitCode == 0 && r.output.contains("step 3/3"), qPrintable(r.output));
        const QJsonObject last = lastRun(db());
        QCOMPARE(last.value("state").toString(), QStringLiteral("finished"));
        const LoomResult show = loomtest::loom(
            db(), { QStringLiteral("runs"), QStringLiteral("show"), QString::number(last.value("id").toInt()) });
        const QString job = jobOf(show.output);
        QVERIFY2(!job.isEmpty(), qPrintable(show.output));
        // One rank on each node: the job had both.
        const QString info
            = m_cluster.run(QStringLiteral("scontrol"), { QStringLiteral("show"), QStringLiteral("job"), job });
        QVERIFY2(info.contains(QLatin1String(" NodeList=loomnode[1-2]")) && info.contains(QLatin1String("NumNodes=2 ")),
            qPrintable(info));
        for (int rank : { 0, 1 })
            QVERIFY2(
                show.output.contains(QStringLiteral("log of rank.%1 (stderr): ").arg(rank)), qPrintable(show.output));
        QVERIFY(waitFor([this] { return m_cluster.queueEmpty(); }, 20000));
    }

    // Ctrl-C: scancel --batch --signal=USR1 reaches mpirun, which passes it to the rank on each node; both
    // finish their step, rank 0 saves it, and the run ends cancelled with the job gone from the queue.
    void cancelOfATwoNodeJobSaves()
    {
        const QString ckpt = m_dir.filePath(QStringLiteral("ckpt-two"));
        QProcess p;
        QByteArray seen;
        startLoomUntil(p, db(),
            { layout(), QStringLiteral("--steps"), QStringLiteral("100000"), QStringLiteral("--checkpoint-dir"), ckpt },
            "step 2/", seen, m_cluster.wrapper(), m_cluster.env(), { QStringLiteral("SLURM_JOB_ID") });
        QVERIFY2(seen.contains("step 2/"), seen.constData());
        ::kill(static_cast<pid_t>(p.processId()), SIGINT); // nsenter execs loom: this is loom
        QVERIFY(p.waitForFinished(60000));
        seen += p.readAll();
        const QJsonObject last = lastRun(db());
        QVERIFY2(last.value("state").toString() == QLatin1String("cancelled"), seen.constData());
        QFile latest(ckpt + QStringLiteral("/latest"));
        QVERIFY2(latest.open(QIODevice::ReadOnly), seen.constData());
        QCOMPARE(latest.readAll().trimmed(), QStringLiteral("step-%1").arg(last.value("steps").toInt()).toUtf8());
        QVERIFY(waitFor([this] { return m_cluster.queueEmpty(); }, 20000));
    }

    // Inside a two-node allocation: srun starts a task on each node; each rank's messages are in its own file.
    void srunInATwoNodeAllocation()
    {
        const LoomResult r = run({ QStringLiteral("run"), layout(), QStringLiteral("--steps"), QStringLiteral("3") },
            { QStringLiteral("salloc"), QStringLiteral("--nodes=2"), QStringLiteral("--ntasks=2") });
        QVERIFY2(r.exitCode == 0 && r.output.contains("step 3/3"), qPrintable(r.output));
        const QJsonObject last = lastRun(db());
        QCOMPARE(last.value("state").toString(), QStringLiteral("finished"));
        const LoomResult show = loomtest::loom(
            db(), { QStringLiteral("runs"), QStringLiteral("show"), QString::number(last.value("id").toInt()) });
        QVERIFY2(
            show.output.contains("command srun --mpi=pmix --kill-on-bad-exit=1 --nodes=2 "), qPrintable(show.output));
        for (int rank : { 0, 1 })
            QVERIFY2(
                show.output.contains(QStringLiteral("log of rank.%1 (stderr): ").arg(rank)), qPrintable(show.output));
        QVERIFY(waitFor([this] { return m_cluster.queueEmpty(); }, 20000));
    }
};

QTEST_GUILESS_MAIN(TestLauncherSlurm2)
#include "tst_launcher_slurm2.moc"
