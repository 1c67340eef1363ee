// A live run is known by the lock it holds (RunLock), not by its pid: a run whose Loom is in another PID
// namespace stays "running", one whose Loom was killed with SIGKILL becomes "interrupted", and a pid that now
// names a living process (pid reuse) does not keep a dead run "running".
#include "profiles/RunLock.h"
#include "profiles/RunStore.h"

#include <QCoreApplication>
#include <QFile>
#include <QProcess>
#include <QSqlDatabase>
#include <QSqlQuery>
#include <QSysInfo>
#include <QTemporaryDir>
#include <QTest>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <unistd.h>

using namespace loom::profiles;

namespace {

// Sets a run's owner column as a Loom in another namespace (or an older one) would have left it.
void setOwner(Store& store, qint64 run, const QString& owner)
{
    QSqlQuery q(QSqlDatabase::database(store.connectionName(), false));
    q.prepare(QStringLiteral("UPDATE runs SET owner = ? WHERE id = ?"));
    q.addBindValue(owner);
    q.addBindValue(run);
    if (!q.exec())
        qFatal("cannot set the owner");
}

// "--hold-run STORE": records a run, prints its id and waits to be killed (the Loom that follows a run).
int holdRun(const char* storePath)
{
    Store store(QString::fromLocal8Bit(storePath));
    RunStore runs(store);
    std::printf("%lld\n",
        static_cast<long long>(runs.startRun(
            QStringLiteral("held"), QStringLiteral("{}"), QStringLiteral("local"), QStringLiteral("mpirun"))));
    std::fflush(stdout);
    for (;;)
        ::pause();
}

} // namespace

class TestRunLock : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

private slots:
    // The run's Loom holds its lock; its pid, as seen from here, names no process (another namespace).
    void liveRunInAnotherNamespaceStaysRunning()
    {
        const QString path = m_dir.filePath(QStringLiteral("namespace.db"));
        Store store(path);
        RunStore owner(store);
        const qint64 id = owner.startRun(
            QStringLiteral("container"), QStringLiteral("{}"), QStringLiteral("local"), QStringLiteral("mpirun"));
        setOwner(store, id, QSysInfo::machineHostName() + QStringLiteral(" 999999999 12345"));
        Store other(path);
        QCOMPARE(RunStore(other).markInterrupted(), 0);
        QCOMPARE(toString(RunStore(other).run(id)->state), toString(RunState::Running));
        owner.finishRun(id, RunState::Finished, {});
        QVERIFY(!QFile::exists(RunLock::path(path, id)));
    }

    // The Loom following the run is killed with SIGKILL: the kernel drops its lock and the run is marked.
    // Its owner column names this (living) test process, as if the pid had been reused: that changes nothing.
    void killedLoomIsInterrupted()
    {
        const QString path = m_dir.filePath(QStringLiteral("killed.db"));
        {
            Store create(path);
        }
        QProcess holder;
        holder.start(QCoreApplication::applicationFilePath(), { QStringLiteral("--hold-run"), path });
        QVERIFY(holder.waitForStarted());
        QByteArray line;
        while (!line.contains('\n') && holder.waitForReadyRead(30000))
            line += holder.readAllStandardOutput();
        const qint64 id = line.trimmed().toLongLong();
        QVERIFY2(id > 0, line.constData());
        Store store(path);
        RunStore runs(store);
        QCOMPARE(runs.markInterrupted(), 0); // alive: its lock is held
        QCOMPARE(toString(runs.run(id)->state), toString(RunState::Running));
        QFile stat(QStringLiteral("/proc/self/stat"));
        QVERIFY(stat.open(QIODevice::ReadOnly));
        const QString text = QString::fromLatin1(stat.readAll());
        const QString start = text.mid(text.lastIndexOf(QLatin1Char(')')) + 2).split(QLatin1Char(' ')).value(19);
        setOwner(store, id, QStringLiteral("%1 %2 %3").arg(QSysInfo::machineHostName()).arg(::getpid()).arg(start));
        ::kill(static_cast<pid_t>(holder.processId()), SIGKILL);
        QVERIFY(holder.waitForFinished(30000));
        QCOMPARE(runs.markInterrupted(), 1);
        QCOMPARE(toString(runs.run(id)->state), toString(RunState::Interrupted));
        QVERIFY(!QFile::exists(RunLock::path(path, id)));
    }

    // A run recorded by a Loom older than the lock (no lock file) is still judged by its pid.
    void runWithoutALockFileUsesItsPid()
    {
        const QString path = m_dir.filePath(QStringLiteral("older.db"));
        Store store(path);
        RunStore runs(store);
        const qint64 id = runs.startRun(
            QStringLiteral("older"), QStringLiteral("{}"), QStringLiteral("local"), QStringLiteral("mpirun"));
        QVERIFY(QFile::remove(RunLock::path(path, id)));
        setOwner(store, id, QSysInfo::machineHostName() + QStringLiteral(" 999999999 12345"));
        QCOMPARE(RunStore(store).markInterrupted(), 1);
    }
};

int main(int argc, char** argv)
{
    if (argc == 3 && std::strcmp(argv[1], "--hold-run") == 0) {
        QCoreApplication app(argc, argv);
        return holdRun(argv[2]);
    }
    QCoreApplication app(argc, argv);
    TestRunLock test;
    return QTest::qExec(&test, argc, argv);
}

#include "tst_runlock.moc"
