#include "launcher/LocalRanks.h"

#include <QDeadlineTimer>
#include <QSysInfo>

#include <algorithm>

#include <csignal>
#include <sys/types.h>
#include <unistd.h>

namespace loom::launcher {

LocalRanks::LocalRanks(QObject* parent)
    : QObject(parent)
{
}

LocalRanks::~LocalRanks()
{
    if (isRunning()) {
        signalAll(SIGKILL);
        waitForAll(5000);
    }
}

bool LocalRanks::start(
    const std::vector<RankCommand>& ranks, const QString& workDir, QString* error, const std::function<bool()>& stop)
{
    const QProcessEnvironment base = QProcessEnvironment::systemEnvironment();
    for (const RankCommand& r : ranks) {
        if (stop && stop()) { // the started ranks would spin in the rendezvous waiting for the rest
            *error = QStringLiteral("cancelled while starting the ranks (%1 of %2 started, all stopped)")
                         .arg(m_ranks.size())
                         .arg(ranks.size());
            abandon();
            return false;
        }
        auto p = std::make_unique<QProcess>();
        QProcessEnvironment env = base;
        for (const QString& kv : r.environment)
            env.insert(kv.section(QLatin1Char('='), 0, 0), kv.section(QLatin1Char('='), 1));
        p->setProcessEnvironment(env);
        p->setWorkingDirectory(workDir);
        // The first rank leads a new process group; the others join it.
        const pid_t group = static_cast<pid_t>(m_pgid);
        p->setChildProcessModifier([group] { ::setpgid(0, group); });
        if (r.rank == 0) {
            connect(p.get(), &QProcess::readyReadStandardOutput, this,
                [this, q = p.get()] { emit streamOutput(q->readAllStandardOutput()); });
            connect(p.get(), &QProcess::readyReadStandardError, this,
                [this, q = p.get()] { emit messages(QString::fromUtf8(q->readAllStandardError())); });
        } else {
            p->setProcessChannelMode(QProcess::MergedChannels);
            connect(p.get(), &QProcess::readyReadStandardOutput, this,
                [this, q = p.get()] { emit messages(QString::fromUtf8(q->readAllStandardOutput())); });
        }
        connect(p.get(), &QProcess::finished, this,
            [this, rank = r.rank](int code, QProcess::ExitStatus status) { rankExited(rank, code, status); });
        p->start(r.command.program, r.command.args);
        if (!p->waitForStarted(10000)) {
            *error = QStringLiteral("%1 could not be started for rank %2 (%3)")
                         .arg(r.command.program)
                         .arg(r.rank)
                         .arg(p->errorString());
            m_ranks.push_back(std::move(p));
            abandon();
            return false;
        }
        if (m_pgid == 0)
            m_pgid = p->processId();
        m_ranks.push_back(std::move(p));
    }
    return true;
}

void LocalRanks::abandon()
{
    m_done = true; // no finished(): the caller reports the error
    signalAll(SIGKILL);
    // SIGKILL cannot be ignored, so this ends; the bound only guards against a process stuck in the kernel.
    waitForAll(30000);
}

bool LocalRanks::isRunning() const
{
    for (const auto& p : m_ranks)
        if (p->state() != QProcess::NotRunning)
            return true;
    return false;
}

void LocalRanks::signalAll(int signal)
{
    for (const auto& p : m_ranks)
        if (p->state() != QProcess::NotRunning && p->processId() > 0)
            ::kill(static_cast<pid_t>(p->processId()), signal);
}

void LocalRanks::waitForAll(int ms)
{
    const QDeadlineTimer deadline(ms);
    for (const auto& p : m_ranks)
        if (p->state() != QProcess::NotRunning)
            p->waitForFinished(static_cast<int>(std::max<qint64>(1, deadline.remainingTime())));
}

void LocalRanks::rankExited(int rank, int exitCode, QProcess::ExitStatus status)
{
    QProcess* p = m_ranks[static_cast<std::size_t>(rank)].get();
    if (rank == 0) {
        if (const QByteArray rest = p->readAllStandardOutput(); !rest.isEmpty())
            emit streamOutput(rest);
        if (const QByteArray err = p->readAllStandardError(); !err.isEmpty())
            emit messages(QString::fromUtf8(err));
    } else if (const QByteArray rest = p->readAllStandardOutput(); !rest.isEmpty()) {
        emit messages(QString::fromUtf8(rest));
    }
    const bool crashed = status == QProcess::CrashExit;
    if ((crashed || exitCode != 0) && m_failedRank < 0) {
        // A rank that exits with a code may only have seen another die (a reset connection): let a rank
        // already killed by a signal, whose exit the event loop has not yet delivered, be named first.
        if (!crashed && !m_reaping)
            reapTheDead();
        if (m_failedRank < 0 && (crashed || !m_reaping))
            blame(rank, exitCode, crashed);
        // The others would wait for it in their next collective: stop them, as mpirun does.
        if (!m_reaping)
            signalAll(SIGKILL);
    }
    if (!m_reaping && !m_done && !isRunning()) {
        m_done = true;
        emit finished(m_failedRank, m_cause);
    }
}

void LocalRanks::blame(int rank, int exitCode, bool crashed)
{
    m_failedRank = rank;
    // On a crash QProcess's exit code is the signal's number.
    m_cause = crashed
        ? QStringLiteral("rank %1 died (signal %2 on node %3)").arg(rank).arg(exitCode).arg(QSysInfo::machineHostName())
        : QStringLiteral("rank %1 exited with code %2").arg(rank).arg(exitCode);
}

void LocalRanks::reapTheDead()
{
    m_reaping = true;
    waitForAll(kReapMs);
    m_reaping = false;
}

} // namespace loom::launcher
