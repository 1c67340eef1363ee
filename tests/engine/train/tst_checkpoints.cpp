// Checkpoints: a checkpoint written under one layout resumes under another with the same losses; a rank
// killed mid-run ends the job with a message naming it within 30 s, and resuming reproduces the
// uninterrupted run.
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>

#include <csignal>
#include <cstring>

namespace {

QJsonObject layout(const QString& name, int tp, int pp, int dp, int zero = 0)
{
    return QJsonObject { { "loom_layout", 1 }, { "name", name }, { "model", "gpt-tiny" }, { "cluster", "local" },
        { "parallel",
            QJsonObject { { "tp", tp }, { "pp", pp }, { "dp", dp }, { "micro_batch", 2 }, { "global_batch", 12 } } },
        { "memory", QJsonObject { { "zero", zero }, { "recompute", "none" } } } };
}

std::map<int, double> losses(const QString& metrics)
{
    std::map<int, double> out;
    QFile f(metrics);
    f.open(QIODevice::ReadOnly);
    for (const QByteArray& line : f.readAll().split('\n'))
        if (!line.trimmed().isEmpty()) {
            const QJsonObject o = QJsonDocument::fromJson(line).object();
            out[o.value("step").toInt()] = o.value("loss").toDouble();
        }
    return out;
}

} // namespace

class TestCheckpoints : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

    QString write(const QJsonObject& l)
    {
        const QString file = m_dir.filePath(l.value("name").toString() + ".json");
        QFile f(file);
        f.open(QIODevice::WriteOnly);
        f.write(QJsonDocument(l).toJson());
        return file;
    }

    QStringList command(const QJsonObject& l, const QStringList& args)
    {
        const QJsonObject p = l.value("parallel").toObject();
        const int ranks = p.value("tp").toInt() * p.value("pp").toInt() * p.value("dp").toInt();
        return QStringList { QStringLiteral("--allow-run-as-root"), QStringLiteral("--oversubscribe"),
            QStringLiteral("-np"), QString::number(ranks), QStringLiteral(LOOM_TRAIN), QStringLiteral("--layout"),
            write(l) }
        + args;
    }

    int run(const QJsonObject& l, const QStringList& args, QString* log = nullptr)
    {
        QProcess p;
        p.setProcessChannelMode(QProcess::MergedChannels);
        p.start(QStringLiteral(MPIEXEC), command(l, args));
        p.waitForFinished(240000);
        if (log)
            *log = QString::fromUtf8(p.readAll());
        return p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    }

    // Trains `first` for 12 steps with a checkpoint every 6, keeps only step 6 and resumes it under `second`:
    // the 6 resumed steps give the first run's losses (within 1e-5 relative).
    void resumeStep6Under(const QString& tag, const QJsonObject& first, const QJsonObject& second)
    {
        const QString dir = m_dir.filePath(tag), baseline = m_dir.filePath(tag + ".m");
        QString log;
        QCOMPARE(
            run(first, { "--steps", "12", "--checkpoint-dir", dir, "--checkpoint-every", "6", "--metrics", baseline },
                &log),
            0);
        QVERIFY(QDir(dir + "/step-12").removeRecursively());
        QFile latest(dir + "/latest");
        QVERIFY(latest.open(QIODevice::WriteOnly | QIODevice::Truncate));
        latest.write("step-6\n");
        latest.close();
        const QString resumed = m_dir.filePath(tag + "-resumed.m");
        QCOMPARE(run(second, { "--steps", "12", "--checkpoint-dir", dir, "--resume", "--metrics", resumed }, &log), 0);
        QVERIFY2(log.contains("resumed from") && log.contains("after step 6"), qPrintable(log));
        const auto a = losses(baseline), b = losses(resumed);
        QCOMPARE(int(b.size()), 6);
        for (const auto& [step, loss] : b)
            QVERIFY2(std::fabs(loss - a.at(step)) <= 1e-5 * a.at(step),
                qPrintable(QStringLiteral("step %1: %2 vs %3").arg(step).arg(loss).arg(a.at(step))));
    }

private slots:
    // A checkpoint of one process resumes on 8 ranks with ZeRO-1.
    void resumesUnderAnotherLayout()
    {
        resumeStep6Under("reshard", layout("one", 1, 1, 1), layout("eight", 2, 2, 2, 1));
    }

    // ZeRO-1 at dp 2 keeps the moments of each rank's piece of every gradient bucket; its checkpoint holds
    // them all at their global positions, so one process resumes it with the same losses.
    void zeroOnePiecesResumeInOneProcess()
    {
        resumeStep6Under("zero1", layout("zero1-dp2", 1, 1, 2, 1), layout("zero1-one", 1, 1, 1));
    }

    void llmcModelFileRoundTrip()
    {
        // Export after 3 steps, import on 8 ranks (tp 2, pp 2, dp 2) and export again: the same bytes.
        const QString a = m_dir.filePath("a.bin"), b = m_dir.filePath("b.bin");
        QString log;
        QCOMPARE(run(layout("llmc-one", 1, 1, 1), { "--steps", "3", "--export-llmc", a }, &log), 0);
        QFile fa(a);
        QVERIFY(fa.open(QIODevice::ReadOnly));
        const QByteArray bytesA = fa.readAll();
        std::int32_t header[8];
        std::memcpy(header, bytesA.constData(), sizeof header);
        QCOMPARE(header[0], 20240326); // llm.c's magic
        QCOMPARE(header[1], 3); // fp32, padded vocabulary
        QCOMPARE(header[2], 32); // max_seq_len
        QCOMPARE(header[3], 256); // vocab
        QCOMPARE(header[4], 4); // layers
        QCOMPARE(header[5], 4); // heads
        QCOMPARE(header[6], 64); // channels
        QCOMPARE(header[7], 256); // padded vocab
        QCOMPARE(bytesA.size(), qsizetype(1024 + 4 * 218496)); // gpt-tiny's 218,496 parameters
        QCOMPARE(run(layout("llmc-eight", 2, 2, 2), { "--steps", "0", "--init-llmc", a, "--export-llmc", b }, &log), 0);
        QFile fb(b);
        QVERIFY(fb.open(QIODevice::ReadOnly));
        QVERIFY(fb.readAll() == bytesA);

        // A file of another model is refused with what differs.
        QJsonObject mini = layout("llmc-mini", 1, 1, 1);
        mini.insert("model", "gpt-mini");
        QCOMPARE(run(mini, { "--steps", "1", "--init-llmc", a }, &log), 2);
        QVERIFY2(log.contains("holds a GPT-2 with vocab 256, 4 layers, 4 heads, hidden 64"), qPrintable(log));
        // The conversions' checkpoint folders were temporary: nothing is left beside the files.
        const QStringList left
            = QDir(m_dir.path()).entryList({ QStringLiteral("*.loom-*") }, QDir::AllEntries | QDir::NoDotAndDotDot);
        QVERIFY2(left.isEmpty(), qPrintable(left.join(QLatin1Char(' '))));
    }

    void sigtermSavesAndStops()
    {
        // SIGTERM to every rank (what Slurm's scancel and Loom's launcher send): all finish the step they are
        // in, save a checkpoint and exit with 143.
        const QJsonObject l = layout("term", 1, 1, 2);
        const QString dir = m_dir.filePath("term"), metrics = m_dir.filePath("term.m");
        QProcess job;
        job.setProcessChannelMode(QProcess::MergedChannels);
        job.start(QStringLiteral(MPIEXEC),
            command(l, { "--steps", "100000", "--checkpoint-dir", dir, "--metrics", metrics }));
        QVERIFY(job.waitForStarted());
        QElapsedTimer wait;
        wait.start();
        while (losses(metrics).size() < 10 && wait.elapsed() < 60000 && job.state() == QProcess::Running)
            QThread::msleep(20);
        QProcess pgrep;
        pgrep.start(QStringLiteral("pgrep"), { QStringLiteral("-P"), QString::number(job.processId()) });
        pgrep.waitForFinished();
        for (const QString& pid : QString::fromUtf8(pgrep.readAll()).split('\n', Qt::SkipEmptyParts))
            ::kill(pid.toInt(), SIGTERM);
        QVERIFY(job.waitForFinished(30000));
        const QString out = QString::fromUtf8(job.readAll());
        QVERIFY2(out.contains("stopped by SIGTERM after step") && out.contains("checkpoint saved"), qPrintable(out));
        QFile latest(dir + "/latest");
        QVERIFY(latest.open(QIODevice::ReadOnly));
        const int saved = QString::fromUtf8(latest.readAll()).trimmed().mid(5).toInt();
        QVERIFY2(saved >= 10, qPrintable(QString::number(saved)));
    }

    void killedRankThenResume()
    {
        const QJsonObject l = layout("four", 1, 2, 2);
        const QString baseline = m_dir.filePath("four-baseline.m");
        QCOMPARE(run(l, { "--steps", "150", "--metrics", baseline }), 0);

        const QString dir = m_dir.filePath("killed"), metrics = m_dir.filePath("killed.m");
        QProcess job;
        job.setProcessChannelMode(QProcess::MergedChannels);
        job.start(QStringLiteral(MPIEXEC),
            command(
                l, { "--steps", "150", "--checkpoint-dir", dir, "--checkpoint-every", "20", "--metrics", metrics }));
        QVERIFY(job.waitForStarted());
        // Wait until 50 steps are done, then kill one of the four ranks (not rank 0's process).
        QElapsedTimer wait;
        wait.start();
        while (losses(metrics).size() < 50 && wait.elapsed() < 120000 && job.state() == QProcess::Running)
            QThread::msleep(20);
        QProcess pgrep;
        pgrep.start(QStringLiteral("pgrep"), { QStringLiteral("-P"), QString::number(job.processId()) });
        pgrep.waitForFinished();
        const QStringList children = QString::fromUtf8(pgrep.readAll()).split('\n', Qt::SkipEmptyParts);
        QVERIFY2(children.size() == 4, qPrintable(children.join(',')));
        QElapsedTimer sinceKill;
        sinceKill.start();
        ::kill(children[2].toInt(), SIGKILL);
        QVERIFY(job.waitForFinished(30000));
        QVERIFY2(sinceKill.elapsed() < 30000, "the other ranks must stop within 30 s");
        const QString out = QString::fromUtf8(job.readAll());
        QVERIFY(job.exitCode() != 0);
        QVERIFY2(out.contains("exited on signal 9"), qPrintable(out));

        const QString resumed = m_dir.filePath("killed-resumed.m");
        QString log;
        QCOMPARE(run(l, { "--steps", "150", "--checkpoint-dir", dir, "--resume", "--metrics", resumed }, &log), 0);
        const auto a = losses(baseline), b = losses(resumed);
        QVERIFY2(!b.empty() && b.begin()->first > 1, qPrintable(log));
        for (const auto& [step, loss] : b)
            QVERIFY2(std::fabs(loss - a.at(step)) <= 1e-6 * a.at(step),
                qPrintable(QStringLiteral("step %1: %2 vs %3").arg(step).arg(loss).arg(a.at(step))));
    }
};

QTEST_GUILESS_MAIN(TestCheckpoints)
#include "tst_checkpoints.moc"
