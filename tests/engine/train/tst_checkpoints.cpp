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

namespace {

QJsonObject layout(const QString& name, int tp, int pp, int dp, int zero = 0)
{
    return QJsonObject{{"loom_layout", 1}, {"name", name}, {"model", "gpt-tiny"}, {"cluster", "local"},
                       {"parallel", QJsonObject{{"tp", tp}, {"pp", pp}, {"dp", dp}, {"micro_batch", 2}, {"global_batch", 12}}},
                       {"memory", QJsonObject{{"zero", zero}, {"recompute", "none"}}}};
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

}  // namespace

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
        return QStringList{QStringLiteral("--allow-run-as-root"), QStringLiteral("--oversubscribe"), QStringLiteral("-np"),
                           QString::number(ranks), QStringLiteral(LOOM_TRAIN), QStringLiteral("--layout"), write(l)}
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

private slots:
    void resumesUnderAnotherLayout()
    {
        const QString dir = m_dir.filePath("reshard"), baseline = m_dir.filePath("baseline.m");
        QString log;
        QCOMPARE(run(layout("one", 1, 1, 1), {"--steps", "12", "--checkpoint-dir", dir, "--checkpoint-every", "6",
                                               "--metrics", baseline}, &log), 0);
        // Keep only step 6, then resume it on 8 ranks with ZeRO-1.
        QVERIFY(QDir(dir + "/step-12").removeRecursively());
        QFile latest(dir + "/latest");
        QVERIFY(latest.open(QIODevice::WriteOnly | QIODevice::Truncate));
        latest.write("step-6\n");
        latest.close();
        const QString resumed = m_dir.filePath("resumed.m");
        QCOMPARE(run(layout("eight", 2, 2, 2, 1), {"--steps", "12", "--checkpoint-dir", dir, "--resume", "--metrics", resumed},
                     &log), 0);
        QVERIFY2(log.contains("resumed from") && log.contains("after step 6"), qPrintable(log));
        const auto a = losses(baseline), b = losses(resumed);
        QCOMPARE(int(b.size()), 6);
        for (const auto& [step, loss] : b)
            QVERIFY2(std::fabs(loss - a.at(step)) <= 1e-5 * a.at(step),
                     qPrintable(QStringLiteral("step %1: %2 vs %3").arg(step).arg(loss).arg(a.at(step))));
    }

    void killedRankThenResume()
    {
        const QJsonObject l = layout("four", 1, 2, 2);
        const QString baseline = m_dir.filePath("four-baseline.m");
        QCOMPARE(run(l, {"--steps", "150", "--metrics", baseline}), 0);

        const QString dir = m_dir.filePath("killed"), metrics = m_dir.filePath("killed.m");
        QProcess job;
        job.setProcessChannelMode(QProcess::MergedChannels);
        job.start(QStringLiteral(MPIEXEC), command(l, {"--steps", "150", "--checkpoint-dir", dir, "--checkpoint-every", "20",
                                                       "--metrics", metrics}));
        QVERIFY(job.waitForStarted());
        // Wait until 50 steps are done, then kill one of the four ranks (not rank 0's process).
        QElapsedTimer wait;
        wait.start();
        while (losses(metrics).size() < 50 && wait.elapsed() < 120000 && job.state() == QProcess::Running)
            QThread::msleep(20);
        QProcess pgrep;
        pgrep.start(QStringLiteral("pgrep"), {QStringLiteral("-P"), QString::number(job.processId())});
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
        QCOMPARE(run(l, {"--steps", "150", "--checkpoint-dir", dir, "--resume", "--metrics", resumed}, &log), 0);
        const auto a = losses(baseline), b = losses(resumed);
        QVERIFY2(!b.empty() && b.begin()->first > 1, qPrintable(log));
        for (const auto& [step, loss] : b)
            QVERIFY2(std::fabs(loss - a.at(step)) <= 1e-6 * a.at(step),
                     qPrintable(QStringLiteral("step %1: %2 vs %3").arg(step).arg(loss).arg(a.at(step))));
    }
};

QTEST_GUILESS_MAIN(TestCheckpoints)
#include "tst_checkpoints.moc"
