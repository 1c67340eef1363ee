// `loom run` as a user runs it: a run that finishes, one cancelled with Ctrl-C, one whose rank is killed,
// one whose Loom is killed, bad layouts and a missing engine; every outcome stored, no process left behind.
#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>

#include <cerrno>
#include <csignal>

class TestLauncher : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

    QProcessEnvironment env(const QString& engine = {})
    {
        QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
        e.insert(QStringLiteral("LOOM_DB"), m_dir.filePath(QStringLiteral("loom.db")));
        if (!engine.isEmpty())
            e.insert(QStringLiteral("LOOM_TRAIN"), engine);
        return e;
    }
    QString example() const { return QStringLiteral(LOOM_SOURCE_DIR "/resources/examples/tiny-local.json"); }

    int loom(const QStringList& args, QString* out = nullptr, const QString& engine = {})
    {
        QProcess p;
        p.setProcessEnvironment(env(engine));
        p.setProcessChannelMode(QProcess::MergedChannels);
        p.start(QStringLiteral(LOOM_EXE), args);
        p.waitForFinished(180000);
        if (out)
            *out = QString::fromUtf8(p.readAll());
        return p.exitCode();
    }

    QJsonObject lastRun()
    {
        QString out;
        loom({ QStringLiteral("runs"), QStringLiteral("list"), QStringLiteral("--json") }, &out);
        const QJsonArray runs = QJsonDocument::fromJson(out.toUtf8()).array();
        return runs.isEmpty() ? QJsonObject {} : runs.last().toObject();
    }

    // Engine processes of this test's runs (their layout files live under the test's folder).
    int enginesLeft()
    {
        QProcess p;
        p.start(QStringLiteral("pgrep"), { QStringLiteral("-f"), m_dir.path() + QStringLiteral("/runs") });
        p.waitForFinished();
        return QString::fromUtf8(p.readAll()).split('\n', Qt::SkipEmptyParts).size();
    }

    // Starts `loom run` in the background and waits until its first steps are stored.
    std::unique_ptr<QProcess> startLongRun()
    {
        auto p = std::make_unique<QProcess>();
        p->setProcessEnvironment(env());
        p->setProcessChannelMode(QProcess::MergedChannels);
        p->start(QStringLiteral(LOOM_EXE),
            { QStringLiteral("run"), example(), QStringLiteral("--steps"), QStringLiteral("100000") });
        QElapsedTimer t;
        t.start();
        while (t.elapsed() < 60000) {
            p->waitForReadyRead(100);
            if (p->readAll().contains("step 3/"))
                break;
        }
        return p;
    }

    // The folders Open MPI's shared memory of a `loom run` (process `pid`) lives in (launcher/RunShm.h).
    static QStringList shmDirsOf(qint64 pid)
    {
        const QDir shm(QStringLiteral("/dev/shm"));
        QStringList dirs;
        for (const QString& name :
            shm.entryList({ QStringLiteral("loom-mpi-%1-*").arg(pid) }, QDir::Dirs | QDir::NoDotAndDotDot))
            dirs << shm.filePath(name);
        return dirs;
    }

private slots:
    void finishedRun()
    {
        QString out;
        QCOMPARE(loom({ QStringLiteral("run"), example(), QStringLiteral("--steps"), QStringLiteral("4") }, &out), 0);
        QVERIFY2(out.contains("step 4/4") && out.contains("finished"), qPrintable(out));
        const QJsonObject run = lastRun();
        QCOMPARE(run.value("state").toString(), QStringLiteral("finished"));
        QCOMPARE(run.value("steps").toInt(), 4);
        const QString trace = m_dir.filePath(QStringLiteral("run.json"));
        QCOMPARE(loom({ QStringLiteral("runs"), QStringLiteral("export"), QString::number(run.value("id").toInt()),
                          QStringLiteral("--chrome"), trace },
                     &out),
            0);
        QVERIFY2(out.contains("wrote"), qPrintable(out));
        QFile f(trace);
        QVERIFY(f.open(QIODevice::ReadOnly));
        QVERIFY(QJsonDocument::fromJson(f.readAll()).object().value("traceEvents").toArray().size() > 100);
        QCOMPARE(enginesLeft(), 0);
    }

    void checkpointsAreRecorded()
    {
        QString out;
        const QString dir = m_dir.filePath(QStringLiteral("ckpt"));
        QCOMPARE(loom({ QStringLiteral("run"), example(), QStringLiteral("--steps"), QStringLiteral("4"),
                          QStringLiteral("--checkpoint-dir"), dir, QStringLiteral("--checkpoint-every"),
                          QStringLiteral("2") },
                     &out),
            0);
        const QJsonObject run = lastRun();
        QCOMPARE(run.value("state").toString(), QStringLiteral("finished"));
        QCOMPARE(
            loom({ QStringLiteral("runs"), QStringLiteral("show"), QString::number(run.value("id").toInt()) }, &out),
            0);
        for (int step : { 2, 4 }) {
            const QString folder = dir + QStringLiteral("/step-%1").arg(step);
            QVERIFY2(
                out.contains(QStringLiteral("checkpoint at step %1: %2\n").arg(step).arg(folder)), qPrintable(out));
            QVERIFY(QFile::exists(folder + QStringLiteral("/checkpoint.json")));
        }
        QCOMPARE(out.count(QStringLiteral("checkpoint at step")), 2);
    }

    void cancelWithCtrlC()
    {
        auto p = startLongRun();
        ::kill(static_cast<pid_t>(p->processId()), SIGINT);
        QVERIFY(p->waitForFinished(30000));
        QCOMPARE(p->exitCode(), 130);
        QCOMPARE(lastRun().value("state").toString(), QStringLiteral("cancelled"));
        QTRY_COMPARE_WITH_TIMEOUT(enginesLeft(), 0, 20000); // mpirun reaps its ranks: wait for it, not a fixed time
    }

    void killedRankFailsTheRun()
    {
        auto p = startLongRun();
        QProcess pgrep;
        pgrep.start(QStringLiteral("pgrep"), { QStringLiteral("-f"), m_dir.path() + QStringLiteral("/runs") });
        pgrep.waitForFinished();
        const QStringList pids = QString::fromUtf8(pgrep.readAll()).split('\n', Qt::SkipEmptyParts);
        QVERIFY(pids.size() >= 2);
        // The ranks' shared-memory files are in the run's own folder, not loose in /dev/shm.
        const QStringList shm = shmDirsOf(p->processId());
        QCOMPARE(int(shm.size()), 1);
        QVERIFY2(!QDir(shm.front()).entryList({ QStringLiteral("vader_segment.*") }, QDir::Files).isEmpty(),
            qPrintable(shm.front()));
        QElapsedTimer t;
        t.start();
        ::kill(pids.last().toInt(), SIGKILL);
        QVERIFY(p->waitForFinished(30000));
        QVERIFY(t.elapsed() < 10000);
        const QString out = QString::fromUtf8(p->readAll());
        QCOMPARE(p->exitCode(), 1);
        const QJsonObject run = lastRun();
        QCOMPARE(run.value("state").toString(), QStringLiteral("failed"));
        QVERIFY2(run.value("exit_cause").toString().contains(QRegularExpression("rank \\d+ died \\(signal 9")),
            qPrintable(out));
        // No wait: when `loom run` has returned, mpirun and every rank are gone, not even left <defunct>.
        QStringList left;
        for (const QString& pid : pids)
            if (::kill(pid.toInt(), 0) == 0 || errno != ESRCH)
                left << pid;
        QVERIFY2(left.isEmpty(), qPrintable(QStringLiteral("engine processes still there: ") + left.join(' ')));
        QCOMPARE(enginesLeft(), 0);
        // What the killed ranks left of their shared memory went with the folder.
        QVERIFY2(!QFileInfo::exists(shm.front()), qPrintable(shm.front()));
    }

    void killedLoomMarksTheRunInterrupted()
    {
        auto p = startLongRun();
        const QStringList shm = shmDirsOf(p->processId());
        QCOMPARE(int(shm.size()), 1);
        ::kill(static_cast<pid_t>(p->processId()), SIGKILL);
        p->waitForFinished(10000);
        QTRY_COMPARE_WITH_TIMEOUT(enginesLeft(), 0, 30000); // rank 0's stdout is gone: the job ends by itself
        const QJsonObject run = lastRun();
        QCOMPARE(run.value("state").toString(), QStringLiteral("interrupted"));
        QVERIFY(run.value("steps").toInt() >= 3); // what was stored before Loom died is still there
        // The dead Loom could not remove its shared-memory folder: the next run does.
        QVERIFY(QFileInfo::exists(shm.front()));
        QCOMPARE(loom({ QStringLiteral("run"), example(), QStringLiteral("--steps"), QStringLiteral("1") }), 0);
        QVERIFY2(!QFileInfo::exists(shm.front()), qPrintable(shm.front()));
    }

    void namesAreNeverRunByAShell()
    {
        const QString dir = m_dir.filePath(QStringLiteral("inject"));
        QDir().mkpath(dir);
        const QString file = dir + QStringLiteral("/$(touch pwned).json");
        QFile f(file);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(R"({"loom_layout": 1, "name": "$(touch pwned); `touch pwned2`", "model": "gpt-tiny", "cluster": "local",
                    "parallel": {"tp": 1, "pp": 1, "dp": 2, "micro_batch": 1, "global_batch": 2}})");
        f.close();
        QProcess p;
        p.setProcessEnvironment(env());
        p.setWorkingDirectory(dir);
        p.start(
            QStringLiteral(LOOM_EXE), { QStringLiteral("run"), file, QStringLiteral("--steps"), QStringLiteral("2") });
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitCode(), 0);
        QCOMPARE(lastRun().value("name").toString(), QStringLiteral("$(touch pwned); `touch pwned2`"));
        for (const QString& where : { dir, m_dir.path(), m_dir.filePath(QStringLiteral("runs")) })
            QVERIFY(
                !QFile::exists(where + QStringLiteral("/pwned")) && !QFile::exists(where + QStringLiteral("/pwned2")));
    }

    void badInputs()
    {
        QString out;
        const QString bad = m_dir.filePath(QStringLiteral("bad.json"));
        QFile f(bad);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(R"({"loom_layout": 1, "name": "bad", "model": "gpt-tiny", "cluster": "local",
                    "parallel": {"tp": 3, "pp": 1, "dp": 1, "micro_batch": 1, "global_batch": 1}})");
        f.close();
        QCOMPARE(loom({ QStringLiteral("run"), bad }, &out), 2);
        QVERIFY2(out.contains("parallel.tp=3 does not divide model.heads=4") && out.contains("nothing was started"),
            qPrintable(out));
        QCOMPARE(loom({ QStringLiteral("run"), example(), QStringLiteral("--steps"), QStringLiteral("2") }, &out,
                     QStringLiteral("/nonexistent/loom-train")),
            1);
        QVERIFY2(out.contains("the engine /nonexistent/loom-train does not exist"), qPrintable(out));
        QCOMPARE(lastRun().value("state").toString(), QStringLiteral("failed"));
    }
};

QTEST_GUILESS_MAIN(TestLauncher)
#include "tst_launcher.moc"
