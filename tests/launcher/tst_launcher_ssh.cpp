// `loom run` over ssh for real: two hosts on this machine (network namespaces, each with its own sshd and
// host name, made by ssh-hosts.sh), a 2-host run through the head node, a cancel, and hosts that do not
// answer. Skipped, with the reason, where namespaces or sshd are not available (not root, no openssh-server).
#include "LoomTestHelpers.h"
#include "ProcessTree.h"

#include <QDir>
#include <QElapsedTimer>
#include <QJsonObject>
#include <QMap>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>

#include <csignal>

using namespace loomtest;

class TestLauncherSsh : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    QString m_ns, m_key, m_net, m_skip;
    bool m_up = false;

    QString db() const { return m_dir.filePath(QStringLiteral("loom.db")); }
    QStringList inNamespace() const
    {
        return { QStringLiteral("ip"), QStringLiteral("netns"), QStringLiteral("exec"), m_ns };
    }
    QString runDir() const { return m_dir.filePath(QStringLiteral("cluster/$(touch pwned) 'x'")); }

    QStringList sshOptions() const
    {
        return { QStringLiteral("-i"), m_key, QStringLiteral("-o"), QStringLiteral("StrictHostKeyChecking=no"),
            QStringLiteral("-o"), QStringLiteral("UserKnownHostsFile=/dev/null"), QStringLiteral("-o"),
            QStringLiteral("LogLevel=ERROR") };
    }

    // A cluster profile "NAME" of two nodes with 2 ranks each, launched over ssh through hosta.
    void importCluster(const QString& name, const QStringList& hosts, const QStringList& extraSsh = {},
        const QString& engine = QStringLiteral(LOOM_TRAIN_EXE), const QString& runDirectory = {})
    {
        QJsonArray hostList, ssh, mpirun;
        for (const QString& h : hosts)
            hostList.append(h);
        for (const QString& o : sshOptions() + extraSsh)
            ssh.append(o);
        const QString agent
            = QStringLiteral("ssh -o BatchMode=yes -o ConnectTimeout=3 ") + sshOptions().join(QLatin1Char(' '));
        for (const QString& o :
            { QStringLiteral("--allow-run-as-root"), QStringLiteral("--mca"), QStringLiteral("plm_rsh_agent"), agent,
                QStringLiteral("--mca"), QStringLiteral("btl"), QStringLiteral("tcp,vader,self"),
                QStringLiteral("--mca"), QStringLiteral("btl_tcp_if_include"), m_net + QStringLiteral(".0/24"),
                QStringLiteral("--mca"), QStringLiteral("oob_tcp_if_include"), m_net + QStringLiteral(".0/24") })
            mpirun.append(o);
        const QJsonObject profile { { "loom_profile", 1 }, { "kind", "cluster" }, { "name", name }, { "nodes", 2 },
            { "devices_per_node", 2 },
            { "device",
                QJsonObject { { "name", "CPU core" }, { "memory_gb", 2 }, { "memory_bandwidth_gbs", 10 },
                    { "peak_tflops", QJsonObject { { "fp32", 0.09 }, { "fp16", 0.09 }, { "bf16", 0.09 } } } } },
            { "intra_node", QJsonObject { { "link", "shm" }, { "bandwidth_gbs", 5 }, { "latency_us", 1 } } },
            { "inter_node", QJsonObject { { "link", "ethernet" }, { "bandwidth_gbs", 1.25 }, { "latency_us", 30 } } },
            { "hosts", hostList },
            { "launch",
                QJsonObject { { "method", "ssh" }, { "head_node", "hosta" }, { "ssh_options", ssh },
                    { "engine", engine }, { "mpirun_options", mpirun },
                    { "run_dir", runDirectory.isEmpty() ? runDir() : runDirectory } } } };
        const QString file = m_dir.filePath(name + QStringLiteral(".json"));
        QVERIFY(writeFile(file, QJsonDocument(profile).toJson()));
        const LoomResult r = loom(db(), { QStringLiteral("profiles"), QStringLiteral("import"), file });
        QVERIFY2(r.exitCode == 0, qPrintable(r.output));
    }

    QString layout(const QString& cluster)
    {
        const QString file = m_dir.filePath(QStringLiteral("$(touch pwned)-%1.json").arg(cluster));
        writeFile(file,
            QStringLiteral(R"({"loom_layout": 1, "name": "$(touch pwned); `touch pwned2`", "model": "gpt-tiny",
            "cluster": "%1", "nodes": 2, "parallel": {"tp": 1, "pp": 1, "dp": 4, "micro_batch": 1, "global_batch": 4}})")
                .arg(cluster)
                .toUtf8());
        return file;
    }

    // Processes in the namespaces other than the two sshd daemons: sessions, mpirun, orted, ranks.
    QStringList leftovers()
    {
        QStringList daemons;
        for (const QString& h : { QStringLiteral("a"), QStringLiteral("b") }) {
            QFile f(m_dir.filePath(QStringLiteral("sshd-%1.pid").arg(h)));
            if (f.open(QIODevice::ReadOnly))
                daemons << QString::fromUtf8(f.readAll()).trimmed();
        }
        QStringList left;
        for (const QString& ns : { m_ns, QString(m_ns).replace(QStringLiteral("lhosta"), QStringLiteral("lhostb")) }) {
            QProcess p;
            p.start(QStringLiteral("ip"), { QStringLiteral("netns"), QStringLiteral("pids"), ns });
            p.waitForFinished();
            for (const QString& pid : QString::fromUtf8(p.readAll()).split(QLatin1Char('\n'), Qt::SkipEmptyParts)) {
                if (daemons.contains(pid))
                    continue;
                QFile cmd(QStringLiteral("/proc/%1/cmdline").arg(pid));
                left << pid + QLatin1Char(' ')
                        + (cmd.open(QIODevice::ReadOnly) ? QString::fromUtf8(cmd.readAll().replace('\0', ' '))
                                                         : QString());
            }
        }
        return left;
    }

    bool noneLeftWithin(int ms)
    {
        return waitFor([this] { return leftovers().isEmpty(); }, ms);
    }

    void checkNothingInjected()
    {
        for (const QString& where :
            { m_dir.path(), runDir(), QDir::homePath(), m_dir.filePath(QStringLiteral("cluster")) })
            QVERIFY2(
                !QFile::exists(where + QStringLiteral("/pwned")) && !QFile::exists(where + QStringLiteral("/pwned2")),
                qPrintable(where));
    }

private slots:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        QVERIFY2(
            !QFile::exists(QDir::homePath() + QStringLiteral("/pwned")), "a file ~/pwned exists already; remove it");
        QProcess up;
        up.start(
            QStringLiteral(LOOM_SOURCE_DIR "/tests/launcher/ssh-hosts.sh"), { QStringLiteral("up"), m_dir.path() });
        up.waitForFinished(60000);
        const QString out = QString::fromUtf8(up.readAllStandardOutput() + up.readAllStandardError());
        m_up = true; // whatever happened, cleanupTestCase takes it down
        if (up.exitCode() == 3) {
            m_skip = out.trimmed();
            QSKIP(qPrintable(QStringLiteral("no ssh hosts here: ") + m_skip));
        }
        QVERIFY2(up.exitCode() == 0, qPrintable(out));
        for (const QString& line : out.split(QLatin1Char('\n'), Qt::SkipEmptyParts)) {
            if (line.startsWith(QLatin1String("NS_A=")))
                m_ns = line.mid(5);
            else if (line.startsWith(QLatin1String("KEY=")))
                m_key = line.mid(4);
            else if (line.startsWith(QLatin1String("NET=")))
                m_net = line.mid(4);
        }
        QVERIFY(!m_ns.isEmpty() && !m_key.isEmpty() && !m_net.isEmpty());
        importCluster(QStringLiteral("lab-ssh"), { QStringLiteral("hosta"), QStringLiteral("hostb") });
        importCluster(QStringLiteral("lab-closed-port"), { QStringLiteral("hosta"), QStringLiteral("hostb") },
            { QStringLiteral("-p"), QStringLiteral("2999") });
        importCluster(QStringLiteral("lab-silent-host"), { QStringLiteral("hosta"), m_net + QStringLiteral(".9") });
        importCluster(QStringLiteral("lab-no-engine"), { QStringLiteral("hosta"), QStringLiteral("hostb") }, {},
            m_dir.filePath(QStringLiteral("not-installed/loom-train")));
        importCluster(QStringLiteral("lab-plain-dir"), { QStringLiteral("hosta"), QStringLiteral("hostb") }, {},
            QStringLiteral(LOOM_TRAIN_EXE), m_dir.filePath(QStringLiteral("plain-runs")));
    }

    void cleanupTestCase()
    {
        if (!m_up)
            return;
        QProcess down;
        down.start(
            QStringLiteral(LOOM_SOURCE_DIR "/tests/launcher/ssh-hosts.sh"), { QStringLiteral("down"), m_dir.path() });
        down.waitForFinished(60000);
    }

    void twoHostRun()
    {
        const LoomResult r = loom(db(),
            { QStringLiteral("run"), layout(QStringLiteral("lab-ssh")), QStringLiteral("--steps"),
                QStringLiteral("3") },
            inNamespace());
        QVERIFY2(r.exitCode == 0 && r.output.contains("step 3/3"), qPrintable(r.output));
        const QJsonObject run = lastRun(db());
        QCOMPARE(run.value("state").toString(), QStringLiteral("finished"));
        QCOMPARE(run.value("steps").toInt(), 3);
        QCOMPARE(run.value("name").toString(), QStringLiteral("$(touch pwned); `touch pwned2`"));
        // The ranks ran on both hosts: hostb's sshd let the head node's mpirun in.
        QFile log(m_dir.filePath(QStringLiteral("sshd-b.log")));
        QVERIFY(log.open(QIODevice::ReadOnly));
        QVERIFY2(log.readAll().contains("Accepted publickey"), "hostb was never reached");
        // The run folder (its name holds a shell expansion and a quote) was made as named, on the head node.
        QVERIFY(QDir(runDir()).entryList(QDir::Dirs | QDir::NoDotAndDotDot).size() == 1);
        checkNothingInjected();
        QVERIFY2(noneLeftWithin(5000), qPrintable(leftovers().join(QLatin1Char('\n'))));
    }

    // `loom run` in hosta's namespace, in the background, until its output shows `until`.
    void startLoom(QProcess& p, const QStringList& args, const QByteArray& until, QByteArray& seen)
    {
        startLoomUntil(p, db(), args, until, seen, inNamespace());
    }

    // The losses `loom runs show` lists for run `id`, by step.
    QMap<int, double> losses(int id)
    {
        QMap<int, double> out;
        static const QRegularExpression line(QStringLiteral("  step (\\d+): loss ([0-9.e+-]+)"));
        const LoomResult show = loom(db(), { QStringLiteral("runs"), QStringLiteral("show"), QString::number(id) });
        for (auto it = line.globalMatch(show.output); it.hasNext();) {
            const auto m = it.next();
            out[m.captured(1).toInt()] = m.captured(2).toDouble();
        }
        return out;
    }

    // Processes of a job (mpirun, orted, the ranks) left in the namespaces; ssh sessions do not count.
    QStringList ranksLeft()
    {
        QStringList left;
        for (const QString& l : leftovers()) {
            const QString comm = commOf(l.section(QLatin1Char(' '), 0, 0).toLongLong());
            if (comm == QLatin1String("loom-train") || comm == QLatin1String("orted")
                || comm == QLatin1String("mpirun"))
                left << l;
        }
        return left;
    }

    // Cancel over ssh: every rank on both hosts finishes its step and saves it (SIGUSR1 through mpirun), a
    // second run refuses the used folder, and --resume continues with the losses of an uninterrupted run.
    void cancelOverSshSavesAndResumes()
    {
        const QString ckpt = m_dir.filePath(QStringLiteral("ckpt-ssh"));
        QProcess p;
        QByteArray seen;
        // The learning rate's schedule follows --steps: the three runs below all have the same.
        const QString steps = QStringLiteral("400");
        startLoom(p,
            { layout(QStringLiteral("lab-ssh")), QStringLiteral("--steps"), steps, QStringLiteral("--checkpoint-dir"),
                ckpt },
            "step 2/", seen);
        QVERIFY2(seen.contains("step 2/"), seen.constData());
        // `ip netns exec` execs loom, so the pid is loom's own
        ::kill(static_cast<pid_t>(p.processId()), SIGINT);
        QVERIFY(p.waitForFinished(30000));
        QCOMPARE(p.exitCode(), 130);
        const QJsonObject run = lastRun(db());
        QCOMPARE(run.value("state").toString(), QStringLiteral("cancelled"));
        const int saved = run.value("steps").toInt();
        QFile latest(ckpt + QStringLiteral("/latest"));
        QVERIFY2(latest.open(QIODevice::ReadOnly), "cancel over ssh saved no checkpoint");
        QCOMPARE(latest.readAll().trimmed(), QStringLiteral("step-%1").arg(saved).toUtf8());
        QVERIFY2(noneLeftWithin(10000), qPrintable(leftovers().join(QLatin1Char('\n'))));

        QVERIFY2(saved < steps.toInt(), "the run ended before the cancel reached it");
        const QStringList again { QStringLiteral("run"), layout(QStringLiteral("lab-ssh")), QStringLiteral("--steps"),
            steps, QStringLiteral("--checkpoint-dir"), ckpt };
        const LoomResult refused = loom(db(), again, inNamespace());
        QVERIFY2(refused.exitCode == 1 && refused.output.contains("already holds an earlier run's checkpoints"),
            qPrintable(refused.output));
        const LoomResult resumed = loom(db(), again + QStringList { QStringLiteral("--resume") }, inNamespace());
        QVERIFY2(resumed.exitCode == 0 && resumed.output.contains("continues run "), qPrintable(resumed.output));
        const QMap<int, double> continued = losses(lastRun(db()).value("id").toInt());
        QCOMPARE(continued.firstKey(), saved + 1);
        // The same steps in one uninterrupted run.
        const LoomResult whole
            = loom(db(), { QStringLiteral("run"), layout(QStringLiteral("lab-ssh")), QStringLiteral("--steps"), steps },
                inNamespace());
        QVERIFY2(whole.exitCode == 0, qPrintable(whole.output));
        const QMap<int, double> reference = losses(lastRun(db()).value("id").toInt());
        QCOMPARE(continued.lastKey(), steps.toInt());
        for (int step = saved + 1; step <= steps.toInt(); ++step)
            QVERIFY2(qAbs(continued.value(step) - reference.value(step)) <= 1e-5 * qAbs(reference.value(step)),
                qPrintable(QStringLiteral("step %1: %2 resumed, %3 uninterrupted")
                               .arg(step)
                               .arg(continued.value(step))
                               .arg(reference.value(step))));
        QVERIFY2(noneLeftWithin(10000), qPrintable(leftovers().join(QLatin1Char('\n'))));
    }

    // The link to the head node lost (Loom's ssh stopped: nothing reaches the head node, and its sshd sees no
    // end of input): the head node's watchdog ends the job, saving its step, within the progress timeout.
    void lostLinkEndsTheJob()
    {
        const QString ckpt = m_dir.filePath(QStringLiteral("ckpt-lost"));
        QProcess p;
        QByteArray seen;
        startLoom(p,
            { layout(QStringLiteral("lab-ssh")), QStringLiteral("--steps"), QStringLiteral("100000"),
                QStringLiteral("--progress-timeout"), QStringLiteral("20"), QStringLiteral("--checkpoint-dir"), ckpt },
            "step 2/", seen);
        QVERIFY2(seen.contains("step 2/"), seen.constData());
        QList<qint64> ssh;
        for (const qint64 pid : descendants(p.processId()))
            if (commOf(pid) == QLatin1String("ssh"))
                ssh << pid;
        QCOMPARE(ssh.size(), 1);
        ::kill(static_cast<pid_t>(ssh.first()), SIGSTOP);
        QElapsedTimer t;
        t.start();
        waitFor([this] { return ranksLeft().isEmpty(); }, 20000);
        const qint64 ms = t.elapsed();
        const QStringList left = ranksLeft();
        ::kill(static_cast<pid_t>(ssh.first()), SIGCONT);
        QVERIFY2(left.isEmpty(), qPrintable(left.join(QLatin1Char('\n'))));
        qInfo("the job ended %lld ms after the link was lost (watchdog 10 s)", static_cast<long long>(ms));
        QVERIFY2(QFile::exists(ckpt + QStringLiteral("/latest")), "the watchdog's stop saved no checkpoint");
        QVERIFY(p.waitForFinished(60000));
        QVERIFY2(noneLeftWithin(10000), qPrintable(leftovers().join(QLatin1Char('\n'))));
    }

    // Each rank's output in the run folder on the head node (mpirun --output-filename), named by runs show.
    void rankLogsOverSsh()
    {
        const LoomResult r = loom(db(),
            { QStringLiteral("run"), layout(QStringLiteral("lab-plain-dir")), QStringLiteral("--steps"),
                QStringLiteral("2") },
            inNamespace());
        QVERIFY2(r.exitCode == 0, qPrintable(r.output));
        const int id = lastRun(db()).value("id").toInt();
        const LoomResult show = loom(db(), { QStringLiteral("runs"), QStringLiteral("show"), QString::number(id) });
        const QString base = m_dir.filePath(QStringLiteral("plain-runs"));
        QVERIFY2(show.output.contains(QStringLiteral("each rank's output in %1/").arg(base)), qPrintable(show.output));
        const QStringList runs = QDir(base).entryList(QDir::Dirs | QDir::NoDotAndDotDot);
        QCOMPARE(runs.size(), 1);
        for (int rank = 0; rank < 4; ++rank)
            QVERIFY2(QFile::exists(QStringLiteral("%1/%2/logs/1/rank.%3/stdout").arg(base, runs.first()).arg(rank)),
                qPrintable(QString::number(rank)));
        QVERIFY2(show.output.contains(QStringLiteral("log of rank.3 (stdout): ")), qPrintable(show.output));
        QVERIFY2(noneLeftWithin(5000), qPrintable(leftovers().join(QLatin1Char('\n'))));
    }

    // An engine missing on the hosts: named with the host within 15 s, in one sentence.
    void missingEngineNamesTheHost()
    {
        QElapsedTimer t;
        t.start();
        const LoomResult r = loom(db(),
            { QStringLiteral("run"), layout(QStringLiteral("lab-no-engine")), QStringLiteral("--steps"),
                QStringLiteral("3") },
            inNamespace());
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(t.elapsed() < 15000, qPrintable(QString::number(t.elapsed())));
        const QString cause = lastRun(db()).value("exit_cause").toString();
        QVERIFY2(cause.startsWith("mpirun could not start the engine ") && cause.contains(" on host host")
                && !cause.contains('\n'),
            qPrintable(cause + "\n" + r.output));
        QVERIFY2(noneLeftWithin(10000), qPrintable(leftovers().join(QLatin1Char('\n'))));
    }

    void headNodeDoesNotAnswer()
    {
        QElapsedTimer t;
        t.start();
        const LoomResult r = loom(db(),
            { QStringLiteral("run"), layout(QStringLiteral("lab-closed-port")), QStringLiteral("--steps"),
                QStringLiteral("3") },
            inNamespace());
        QCOMPARE(r.exitCode, 1);
        QVERIFY(t.elapsed() < 30000);
        const QJsonObject run = lastRun(db());
        QCOMPARE(run.value("state").toString(), QStringLiteral("failed"));
        const QString cause = run.value("exit_cause").toString();
        QVERIFY2(
            cause.startsWith("ssh to hosta failed: ") && cause.contains("Connection refused") && !cause.contains('\n'),
            qPrintable(cause));
        QVERIFY2(noneLeftWithin(5000), qPrintable(leftovers().join(QLatin1Char('\n'))));
    }

    void secondHostDoesNotAnswer()
    {
        QElapsedTimer t;
        t.start();
        const LoomResult r = loom(db(),
            { QStringLiteral("run"), layout(QStringLiteral("lab-silent-host")), QStringLiteral("--steps"),
                QStringLiteral("3") },
            inNamespace());
        QCOMPARE(r.exitCode, 1);
        const QJsonObject run = lastRun(db());
        QCOMPARE(run.value("state").toString(), QStringLiteral("failed"));
        const QString cause = run.value("exit_cause").toString();
        // Named, within 15 s (ConnectTimeout for mpirun's ssh too), in one sentence.
        QVERIFY2(cause.contains(QStringLiteral("host %1.9 ").arg(m_net)) && !cause.contains('\n'),
            qPrintable(cause + "\n" + r.output));
        QVERIFY2(t.elapsed() < 15000, qPrintable(QString::number(t.elapsed())));
        QVERIFY2(noneLeftWithin(10000), qPrintable(leftovers().join(QLatin1Char('\n'))));
        checkNothingInjected();
    }
};

QTEST_GUILESS_MAIN(TestLauncherSsh)
#include "tst_launcher_ssh.moc"
