// RunController's processes on this machine: starting the job's leader (mpirun, ssh, srun) in a process
// group of its own, signalling it and its ranks, and collecting every process of the run (the subreaper).
#include "launcher/RunController.h"

#include <QDir>
#include <QFile>
#include <QThread>

#include <cerrno>
#include <csignal>
#include <map>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

namespace loom::launcher {

void RunController::startProcess(const Command& command)
{
    m_process = std::make_unique<QProcess>();
    m_process->setProcessChannelMode(QProcess::MergedChannels);
    m_process->setWorkingDirectory(m_request.workDir);
    m_process->setChildProcessModifier([] { ::setpgid(0, 0); }); // one process group: cancel reaches every rank
    // Ranks whose mpirun has gone are handed to this process rather than to PID 1, so that reapGroup() can
    // wait for them: nothing of a run outlives `loom run`, not even as <defunct>.
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    connect(m_process.get(), &QProcess::readyReadStandardOutput, this, &RunController::readOutput);
    connect(m_process.get(), &QProcess::finished, this, &RunController::processFinished);
    connect(
        m_process.get(), &QProcess::errorOccurred, this, [this, program = command.program](QProcess::ProcessError e) {
            if (e == QProcess::FailedToStart)
                end(profiles::RunState::Failed,
                    QStringLiteral("%1 could not be started (%2); install %3 (installer/bootstrap.sh)")
                        .arg(program, m_process->errorString(),
                            m_mode == Mode::Ssh        ? QStringLiteral("openssh-client")
                                : m_mode == Mode::Srun ? QStringLiteral("slurm-client")
                                                       : QStringLiteral("Open MPI")));
        });
    m_process->start(command.program, command.args);
    if (m_process->waitForStarted(10000))
        m_pgid = m_process->processId();
}

void RunController::signalJob(int signal)
{
    if (m_pgid > 0)
        ::kill(static_cast<pid_t>(-m_pgid), signal);
}

void RunController::signalRanks(int signal)
{
    // The ranks are mpirun's children; signalling them (not mpirun) lets each finish its step and stop,
    // while mpirun stays to collect them and report.
    for (const qint64 pid : groupMembers())
        ::kill(static_cast<pid_t>(pid), signal);
}

QList<qint64> RunController::groupMembers()
{
    QList<qint64> members;
    std::multimap<qint64, qint64> children;
    const QDir proc(QStringLiteral("/proc"));
    for (const QString& entry : proc.entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
        bool numeric = false;
        const qint64 pid = entry.toLongLong(&numeric);
        if (!numeric)
            continue;
        QFile stat(proc.filePath(entry + QStringLiteral("/stat")));
        if (!stat.open(QIODevice::ReadOnly))
            continue;
        const QString text = QString::fromUtf8(stat.readAll());
        const auto fields = text.mid(text.lastIndexOf(QLatin1Char(')')) + 2).split(QLatin1Char(' '));
        if (m_pgid > 0 && fields.size() > 1 && fields[1].toLongLong() == m_pgid)
            members.append(pid);
        if (fields.size() > 1)
            children.emplace(fields[1].toLongLong(), pid); // fields[1] is the parent
    }
    // mpirun may give its ranks process groups of their own: remember every descendant of the job's leader
    // while it lives, and keep counting those that still exist.
    for (QList<qint64> todo { m_pgid }; m_pgid > 0 && !todo.isEmpty();)
        for (auto [it, last] = children.equal_range(todo.takeFirst()); it != last; ++it) {
            m_seen.insert(it->second);
            todo << it->second;
        }
    for (const qint64 pid : std::as_const(m_seen))
        if (!members.contains(pid) && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH))
            members.append(pid);
    return members;
}

void RunController::reapGroup()
{
    // The group leader (mpirun, ssh, srun) has been collected by QProcess; its ranks may still be dying,
    // or be zombies handed to this process (the subreaper). Kill and collect until none is left.
    if (m_pgid <= 0 || isRunning())
        return;
    QElapsedTimer waited;
    waited.start();
    for (;;) {
        int status = 0;
        while (::waitpid(static_cast<pid_t>(-m_pgid), &status, WNOHANG) > 0) { }
        for (const qint64 pid : std::as_const(m_seen))
            ::waitpid(static_cast<pid_t>(pid), &status, WNOHANG); // handed to this process (the subreaper)
        const QList<qint64> left = groupMembers();
        if (left.isEmpty())
            return;
        signalJob(SIGKILL);
        for (const qint64 pid : left)
            ::kill(static_cast<pid_t>(pid), SIGKILL);
        if (waited.elapsed() > 10000) {
            QStringList pids;
            for (const qint64 pid : left)
                pids << QString::number(pid);
            m_tail += QStringLiteral("loom: processes %1 of the run did not exit within 10 s of SIGKILL\n")
                          .arg(pids.join(QLatin1Char(' ')));
            return;
        }
        QThread::msleep(20);
    }
}

} // namespace loom::launcher
