// Each rank's log, found from a run's stored command and read with a size limit (launcher/RankLogs): Open MPI's
// layout (logs/1/rank.N/stdout and stderr), srun's (logs/rank.N.stderr), a head node's folder over ssh.
#include "launcher/LaunchCommands.h"
#include "launcher/RankLogs.h"

#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include <sys/stat.h>

using namespace loom::launcher;

namespace {
bool write(const QString& path, const QByteArray& data)
{
    QDir().mkpath(QFileInfo(path).absolutePath());
    QFile f(path);
    return f.open(QIODevice::WriteOnly) && f.write(data) == data.size();
}
} // namespace

class TestRankLogs : public QObject {
    Q_OBJECT
private slots:
    void folderFromCommand_data()
    {
        QTest::addColumn<QString>("command");
        QTest::addColumn<QString>("dir");
        QTest::addColumn<bool>("onCluster");
        QTest::newRow("mpirun") << "mpirun --oversubscribe -np 2 --output-filename /r/runs/1/logs loom-train --layout x"
                                << "/r/runs/1/logs" << false;
        QTest::newRow("srun") << "srun --mpi=pmix --export=ALL --error=/r/runs/2/logs/rank.%t.stderr loom-train"
                              << "/r/runs/2/logs" << false;
        QTest::newRow("srun with %") << "srun --error=/r/100%%/logs/rank.%t.stderr loom-train"
                                     << "/r/100%/logs" << false;
        QTest::newRow("ssh") << "ssh -o BatchMode=yes -- hosta <head-node script running mpirun, each rank's output "
                                "in loom-runs/20260101/logs>"
                             << "loom-runs/20260101/logs" << true;
        QTest::newRow("sbatch") << "sbatch --parsable --job-name loom-x --output /r/runs/3/job.out --chdir /r/runs/3 "
                                   "job.sbatch"
                                << "/r/runs/3/logs" << false;
        QTest::newRow("no logs") << "ssh -- hosta <head-node script running mpirun; no rank logs: run_dir holds "
                                    "characters a shell reads>"
                                 << "" << false;
    }
    void folderFromCommand()
    {
        QFETCH(QString, command);
        QFETCH(QString, dir);
        QFETCH(bool, onCluster);
        const RankLogs logs = rankLogsOf(command);
        QCOMPARE(logs.dir, dir);
        QCOMPARE(logs.onCluster, onCluster);
    }

    // The pattern srun gets round-trips through rankLogsOf; % is srun's and is doubled, a backslash turns
    // srun's patterns off, so no pattern then.
    void srunPattern()
    {
        QCOMPARE(srunRankLogPattern(QStringLiteral("/r/100%")), QStringLiteral("/r/100%%/logs/rank.%t.stderr"));
        QVERIFY(srunRankLogPattern(QStringLiteral("/r/a\\b")).isEmpty());
        LaunchRequest r;
        r.layout.cluster.launch.method = "slurm";
        r.workDir = QStringLiteral("/r/100%");
        r.engine = QStringLiteral("/opt/loom-train");
        const QString command = srunCommand(r, QStringLiteral("/r/100%/layout.json")).all().join(QLatin1Char(' '));
        QCOMPARE(rankLogsOf(command).dir, QStringLiteral("/r/100%/logs"));
    }

    void filesByRank()
    {
        QTemporaryDir dir;
        const QString logs = dir.filePath(QStringLiteral("logs"));
        QVERIFY(write(logs + "/1/rank.10/stderr", "ten\n"));
        QVERIFY(write(logs + "/1/rank.2/stdout", "two out\n"));
        QVERIFY(write(logs + "/1/rank.2/stderr", "two err\n"));
        QVERIFY(write(logs + "/rank.3.stderr", "three\n"));
        QVERIFY(write(logs + "/notes.txt", "not a log\n"));
        QVERIFY(write(logs + "/1/rank.x/stderr", "not a rank\n"));
        const auto files = rankLogFiles(logs);
        QStringList seen;
        for (const RankLogFile& f : files)
            seen << QStringLiteral("%1 %2").arg(f.rank).arg(f.stream);
        QCOMPARE(seen, (QStringList { "2 stderr", "2 stdout", "3 stderr", "10 stderr" }));
        QCOMPARE(int(rankLogFiles(logs, 2).size()), 2);
    }

    void tailIsCutAtALineAndLeavesFramesOut()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("stdout"));
        QByteArray data;
        for (int i = 0; i < 1000; ++i)
            data += "line " + QByteArray::number(i) + "\n";
        data += "\x1e{\"type\":\"step\",\"step\":1} 1234abcd\n";
        data += "last line\n";
        QVERIFY(write(path, data));
        QString error;
        const QString text = readLogTail(path, 100, &error);
        QVERIFY2(error.isEmpty(), qPrintable(error));
        QVERIFY2(text.contains(QLatin1String("the first")) && text.contains(QLatin1String("are left out")),
            qPrintable(text));
        QVERIFY2(text.contains(QLatin1String("1 telemetry frames left out")), qPrintable(text));
        QVERIFY(text.endsWith(QLatin1String("last line\n")));
        QVERIFY(!text.contains(QChar(0x1e)));
        QVERIFY(text.size() < 300);
        const QString whole = readLogTail(path, 1 << 20, &error);
        QVERIFY(whole.startsWith(QLatin1String("[1 telemetry frames")));
        QVERIFY(whole.contains(QLatin1String("\nline 0\n")));
    }

    void notARegularFile()
    {
        QTemporaryDir dir;
        const QString fifo = dir.filePath(QStringLiteral("stderr"));
        QCOMPARE(::mkfifo(fifo.toLocal8Bit().constData(), 0600), 0);
        QString error;
        QVERIFY(readLogTail(fifo, 100, &error).isEmpty()); // would block on open if it were read
        QVERIFY2(error.contains(QLatin1String("not a regular file")), qPrintable(error));
        QVERIFY(readLogTail(dir.filePath(QStringLiteral("missing")), 100, &error).isEmpty());
        QVERIFY(!error.isEmpty());
    }
};

QTEST_GUILESS_MAIN(TestRankLogs)
#include "tst_ranklogs.moc"
