// `loom run` of a gloo layout on the local cluster: Loom starts the ranks itself (no mpirun anywhere in its
// process tree, each rank told who it is by LOOM_RANK), a run finishes, Ctrl-C cancels it, and a SIGKILLed
// rank fails the run within 10 s naming the rank; when `loom run` returns, no process of the run is left,
// not even as a zombie.
#include "LoomTestHelpers.h"
#include "ProcessTree.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

#include <cerrno>
#include <csignal>
#include <map>

class TestLauncherGloo : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    QString m_layout;

    QString db() const { return m_dir.filePath(QStringLiteral("loom.db")); }

    // Starts `loom run` of the test layout in the background on the store `store` (with `extra` arguments) and
    // waits until its first steps are reported; what it printed by then goes to `seen` when one is given.
    std::unique_ptr<QProcess> startLongRun(
        const QString& store, QByteArray* seen = nullptr, const QStringList& extra = {})
    {
        auto p = std::make_unique<QProcess>();
        QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
        e.insert(QStringLiteral("LOOM_DB"), store);
        p->setProcessEnvironment(e);
        p->setProcessChannelMode(QProcess::MergedChannels);
        p->start(QStringLiteral(LOOM_EXE),
            QStringList { QStringLiteral("run"), m_layout, QStringLiteral("--steps"), QStringLiteral("100000") }
                + extra);
        QElapsedTimer t;
        t.start();
        QByteArray out;
        while (t.elapsed() < 90000 && !out.contains("step 3/") && p->state() != QProcess::NotRunning) {
            p->waitForReadyRead(100);
            out += p->readAll();
        }
        if (!out.contains("step 3/"))
            qWarning("loom run did not reach step 3: %s", out.right(2000).constData());
        if (seen)
            *seen = out;
        return p;
    }
    std::unique_ptr<QProcess> startLongRun() { return startLongRun(db()); }

    // The engine processes below `loom`: rank number -> pid.
    std::map<int, qint64> ranksBelow(qint64 loom, QList<qint64>* all)
    {
        std::map<int, qint64> ranks;
        *all = loomtest::descendants(loom);
        for (const qint64 pid : *all)
            if (loomtest::commOf(pid) == QLatin1String("loom-train"))
                ranks[loomtest::environmentOf(pid, "LOOM_RANK").toInt()] = pid;
        return ranks;
    }

    // Every process of this machine whose LOOM_RENDEZVOUS lies in this test's folder: ranks of its runs.
    QStringList ranksOfThisTest()
    {
        QStringList found;
        for (const QString& entry : QDir(QStringLiteral("/proc")).entryList(QDir::Dirs | QDir::NoDotAndDotDot))
            if (entry.toLongLong() > 0
                && loomtest::environmentOf(entry.toLongLong(), "LOOM_RENDEZVOUS").startsWith(m_dir.path()))
                found << entry + QStringLiteral(" (") + loomtest::commOf(entry.toLongLong()) + QLatin1Char(')');
        return found;
    }

private slots:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        m_layout = m_dir.filePath(QStringLiteral("gloo-dp2.json"));
        QVERIFY(loomtest::writeFile(
            m_layout, R"({"loom_layout": 1, "name": "gloo-dp2", "model": "gpt-tiny", "cluster": "local",
 "parallel": {"tp": 1, "pp": 1, "dp": 2, "micro_batch": 2, "global_batch": 8}, "comm": {"backend": "gloo"}})"));
    }

    void finishedRunWithoutMpirun()
    {
        const auto r
            = loomtest::loom(db(), { QStringLiteral("run"), m_layout, QStringLiteral("--steps"), QStringLiteral("4") });
        QVERIFY2(r.exitCode == 0 && r.output.contains("step 4/4"), qPrintable(r.output));
        const QJsonObject run = loomtest::lastRun(db());
        QCOMPARE(run.value("state").toString(), QStringLiteral("finished"));
        QCOMPARE(run.value("steps").toInt(), 4);
        const auto shown = loomtest::loom(
            db(), { QStringLiteral("runs"), QStringLiteral("show"), QString::number(run.value("id").toInt()) });
        QVERIFY2(shown.output.contains("command LOOM_RANK=0..1 LOOM_WORLD_SIZE=2 ") && !shown.output.contains("mpirun"),
            qPrintable(shown.output));
    }

    void ranksAreLoomsOwnAndCancelLeavesNothing()
    {
        auto p = startLongRun();
        QList<qint64> all;
        const auto ranks = ranksBelow(p->processId(), &all);
        QCOMPARE(int(ranks.size()), 2);
        QVERIFY(ranks.count(0) && ranks.count(1));
        for (const qint64 pid : all) {
            const QString name = loomtest::commOf(pid);
            QVERIFY2(!name.contains("mpirun") && !name.contains("orted") && !name.contains("prte"), qPrintable(name));
        }
        QCOMPARE(loomtest::environmentOf(ranks.at(1), "LOOM_WORLD_SIZE"), QStringLiteral("2"));
        QVERIFY(loomtest::environmentOf(ranks.at(1), "LOOM_RENDEZVOUS").endsWith(QStringLiteral("/rendezvous")));
        ::kill(static_cast<pid_t>(p->processId()), SIGINT);
        QVERIFY(p->waitForFinished(30000));
        QCOMPARE(p->exitCode(), 130);
        QCOMPARE(loomtest::lastRun(db()).value("state").toString(), QStringLiteral("cancelled"));
        const QStringList left = loomtest::stillThere(all);
        QVERIFY2(left.isEmpty(), qPrintable(QStringLiteral("still there after loom run returned: ") + left.join(", ")));
    }

    // A signal while Loom is still starting 256 ranks stops the start-up and reaps every rank started: none
    // is left spinning in the rendezvous (SIGTERM used to end Loom at once, SIGINT waited for every start).
    void signalDuringStartReapsEveryRank_data()
    {
        QTest::addColumn<int>("signal");
        QTest::newRow("SIGTERM") << int(SIGTERM);
        QTest::newRow("SIGINT") << int(SIGINT);
    }
    void signalDuringStartReapsEveryRank()
    {
        QFETCH(int, signal);
        const QString file = m_dir.filePath(QStringLiteral("gloo-dp256.json"));
        QVERIFY(loomtest::writeFile(
            file, R"({"loom_layout": 1, "name": "gloo-dp256", "model": "gpt-tiny", "cluster": "local",
 "parallel": {"tp": 1, "pp": 1, "dp": 256, "micro_batch": 1, "global_batch": 256}, "comm": {"backend": "gloo"}})"));
        QProcess p;
        QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
        e.insert(QStringLiteral("LOOM_DB"), db());
        p.setProcessEnvironment(e);
        p.setProcessChannelMode(QProcess::MergedChannels);
        p.start(QStringLiteral(LOOM_EXE),
            { QStringLiteral("run"), file, QStringLiteral("--steps"), QStringLiteral("2"),
                QStringLiteral("--max-local-ranks"), QStringLiteral("256") });
        QVERIFY(p.waitForStarted());
        QElapsedTimer t;
        t.start();
        QList<qint64> all;
        while (t.elapsed() < 60000 && ranksBelow(p.processId(), &all).size() < 8)
            QTest::qWait(5);
        QVERIFY2(ranksBelow(p.processId(), &all).size() < 256, "every rank started before the signal");
        ::kill(static_cast<pid_t>(p.processId()), signal);
        QVERIFY(p.waitForFinished(60000));
        const QString out = QString::fromUtf8(p.readAll());
        QVERIFY2(p.exitCode() == 130, qPrintable(out));
        const QJsonObject run = loomtest::lastRun(db());
        QCOMPARE(run.value("state").toString(), QStringLiteral("cancelled"));
        QVERIFY2(run.value("exit_cause").toString().startsWith("cancelled while starting the ranks"), qPrintable(out));
        const QStringList left = ranksOfThisTest();
        QVERIFY2(left.isEmpty(), qPrintable(QStringLiteral("ranks left after loom run returned: ") + left.join(", ")));
    }

    // The store's disk fills up under a live run (a small tmpfs): the run stops at once and fails with the
    // store's reason, exit 1, instead of "finished" with most steps lost; with the disk still full, runs list
    // and runs show read it without needing a write. Skipped where a tmpfs cannot be mounted.
    void storeFullFailsTheRun()
    {
        const QString mount = m_dir.filePath(QStringLiteral("small"));
        QDir().mkpath(mount);
        if (QProcess::execute(QStringLiteral("mount"),
                { QStringLiteral("-t"), QStringLiteral("tmpfs"), QStringLiteral("-o"), QStringLiteral("size=16m"),
                    QStringLiteral("tmpfs"), mount })
            != 0)
            QSKIP("cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN)");
        struct Unmount {
            QString path;
            ~Unmount() { QProcess::execute(QStringLiteral("umount"), { QStringLiteral("-l"), path }); }
        } unmount { mount };
        const QString db = mount + QStringLiteral("/loom.db");
        QCOMPARE(loomtest::loom(db, { QStringLiteral("runs"), QStringLiteral("list") }).exitCode, 0);
        QByteArray seen;
        const auto process = startLongRun(db, &seen);
        QProcess& p = *process;
        QVERIFY2(seen.contains("step 3/"), seen.constData());
        // Fill what is left of the disk.
        QFile filler(mount + QStringLiteral("/filler"));
        QVERIFY(filler.open(QIODevice::WriteOnly));
        const QByteArray block(64 << 10, 'x');
        while (filler.write(block) == block.size() && filler.flush()) { }
        filler.close();
        QVERIFY2(p.waitForFinished(60000), "the run went on with a full store");
        const QString out = QString::fromUtf8(seen + p.readAll());
        QVERIFY2(p.exitCode() == 1 && out.contains(QLatin1String("failed to record the run"))
                && out.contains(QLatin1String("full")),
            qPrintable(out.right(3000)));
        const loomtest::LoomResult list = loomtest::loom(db, { QStringLiteral("runs"), QStringLiteral("list") });
        QVERIFY2(list.exitCode == 0 && list.output.contains(QLatin1String("failed")), qPrintable(list.output));
        const QJsonObject run = loomtest::lastRun(db);
        QCOMPARE(run.value("state").toString(), QStringLiteral("failed"));
        QVERIFY2(run.value("exit_cause").toString().startsWith("failed to record the run"),
            qPrintable(run.value("exit_cause").toString()));
        const loomtest::LoomResult show = loomtest::loom(
            db, { QStringLiteral("runs"), QStringLiteral("show"), QString::number(run.value("id").toInt()) });
        QVERIFY2(show.exitCode == 0 && show.output.contains(QLatin1String("step 1:")), qPrintable(show.output));
    }

    // A rank stopped with SIGSTOP: at the progress timeout the run fails naming it (it used to say only "a
    // rank may be stuck") and quoting the other rank's last collectives.
    void stoppedRankNamed()
    {
        QByteArray seen;
        const auto process = startLongRun(db(), &seen, { QStringLiteral("--progress-timeout"), QStringLiteral("3") });
        QProcess& p = *process;
        QVERIFY2(seen.contains("step 3/"), seen.constData());
        QList<qint64> all;
        const auto ranks = ranksBelow(p.processId(), &all);
        QVERIFY(ranks.count(1));
        ::kill(static_cast<pid_t>(ranks.at(1)), SIGSTOP);
        QVERIFY(p.waitForFinished(90000));
        const QString out = QString::fromUtf8(seen + p.readAll());
        QCOMPARE(p.exitCode(), 1);
        const QString cause = loomtest::lastRun(db()).value("exit_cause").toString();
        QVERIFY2(cause.contains(QStringLiteral("rank 1 (pid %1) is stopped").arg(ranks.at(1))),
            qPrintable(cause + "\n" + out.right(2000)));
        // The rank that could still speak says where it waits (its flight record: c10d's idea).
        QVERIFY2(cause.contains(QRegularExpression(QStringLiteral("Last collectives: rank 0: [a-z-]+ #\\d+ on .*, "
                                                                  "\\d+ bytes, running for"))),
            qPrintable(cause + "\n" + out.right(2000)));
        const QStringList left = loomtest::stillThere(all);
        QVERIFY2(left.isEmpty(), qPrintable(QStringLiteral("still there after loom run returned: ") + left.join(", ")));
    }

    void killedRankFailsTheRunNamingIt()
    {
        auto p = startLongRun();
        QList<qint64> all;
        const auto ranks = ranksBelow(p->processId(), &all);
        QVERIFY(ranks.count(1));
        QElapsedTimer t;
        t.start();
        ::kill(static_cast<pid_t>(ranks.at(1)), SIGKILL);
        QVERIFY(p->waitForFinished(30000));
        const qint64 took = t.elapsed();
        const QString out = QString::fromUtf8(p->readAll());
        QCOMPARE(p->exitCode(), 1);
        QVERIFY2(took < 10000, qPrintable(QStringLiteral("took %1 ms").arg(took)));
        const QJsonObject run = loomtest::lastRun(db());
        QCOMPARE(run.value("state").toString(), QStringLiteral("failed"));
        QVERIFY2(run.value("exit_cause").toString().contains(QRegularExpression("^rank 1 died \\(signal 9")),
            qPrintable(out));
        const QStringList left = loomtest::stillThere(all);
        QVERIFY2(left.isEmpty(), qPrintable(QStringLiteral("still there after loom run returned: ") + left.join(", ")));
    }
};

QTEST_GUILESS_MAIN(TestLauncherGloo)
#include "tst_launcher_gloo.moc"
