// `loom run` over ssh for real: two hosts on this machine (network namespaces, each with its own sshd and
// host name, made by ssh-hosts.sh), a 2-host run through the head node, a cancel, and hosts that do not
// answer. Skipped, with the reason, where namespaces or sshd are not available (not root, no openssh-server).
#include "LoomTestHelpers.h"

#include <QDir>
#include <QElapsedTimer>
#include <QJsonObject>
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
    void importCluster(const QString& name, const QStringList& hosts, const QStringList& extraSsh = {})
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
                    { "engine", QStringLiteral(LOOM_TRAIN_EXE) }, { "mpirun_options", mpirun },
                    { "run_dir", runDir() } } } };
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
        QElapsedTimer t;
        t.start();
        while (!leftovers().isEmpty() && t.elapsed() < ms)
            QThread::msleep(200);
        return leftovers().isEmpty();
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

    void cancelOverSsh()
    {
        QProcess p;
        QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
        e.insert(QStringLiteral("LOOM_DB"), db());
        p.setProcessEnvironment(e);
        p.setProcessChannelMode(QProcess::MergedChannels);
        p.start(QStringLiteral("ip"),
            inNamespace().mid(1)
                + QStringList { QStringLiteral(LOOM_EXE), QStringLiteral("run"), layout(QStringLiteral("lab-ssh")),
                    QStringLiteral("--steps"), QStringLiteral("100000") });
        QElapsedTimer t;
        t.start();
        QByteArray seen;
        while (t.elapsed() < 60000 && !seen.contains("step 2/") && p.state() != QProcess::NotRunning) {
            p.waitForReadyRead(100);
            seen += p.readAll();
        }
        QVERIFY2(seen.contains("step 2/"), seen.constData());
        // `ip netns exec` execs loom, so the pid is loom's own
        ::kill(static_cast<pid_t>(p.processId()), SIGINT);
        QVERIFY(p.waitForFinished(30000));
        QCOMPARE(p.exitCode(), 130);
        QCOMPARE(lastRun(db()).value("state").toString(), QStringLiteral("cancelled"));
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
        const LoomResult r = loom(db(),
            { QStringLiteral("run"), layout(QStringLiteral("lab-silent-host")), QStringLiteral("--steps"),
                QStringLiteral("3") },
            inNamespace());
        QCOMPARE(r.exitCode, 1);
        const QJsonObject run = lastRun(db());
        QCOMPARE(run.value("state").toString(), QStringLiteral("failed"));
        const QString cause = run.value("exit_cause").toString();
        QVERIFY2(cause.startsWith("mpirun could not start its daemon on every host") && !cause.contains('\n'),
            qPrintable(cause + "\n" + r.output));
        QVERIFY2(noneLeftWithin(10000), qPrintable(leftovers().join(QLatin1Char('\n'))));
        checkNothingInjected();
    }
};

QTEST_GUILESS_MAIN(TestLauncherSsh)
#include "tst_launcher_ssh.moc"
