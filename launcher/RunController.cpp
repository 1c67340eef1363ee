// RunController: starting a run on its target, cancel, the progress watchdog and how a run ends. The
// processes here are in RunControllerProcesses.cpp, the telemetry stream in RunControllerStream.cpp, Slurm
// in RunControllerSlurm.cpp.
#include "launcher/RunController.h"

#include "launcher/RunChecks.h"
#include "launcher/RunShm.h"

#include "engine/plan/LayoutParser.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QSysInfo>

#include <csignal>
#include <unistd.h>
#include <utility>

namespace loom::launcher {

RunController::RunController(profiles::RunStore* store, QObject* parent)
    : QObject(parent)
    , m_store(store)
{
    m_watchdog.setInterval(500);
    connect(&m_watchdog, &QTimer::timeout, this, &RunController::checkProgress);
}

RunController::~RunController()
{
    if (m_sbatch) { // still submitting: stop sbatch here (not in ~QObject, where its answer has nowhere to go)
        disconnect(m_sbatch, nullptr, this, nullptr);
        m_sbatch->kill();
        m_sbatch->waitForFinished(5000);
        const QString id
            = QString::fromUtf8(m_sbatch->readAllStandardOutput()).trimmed().section(QLatin1Char(';'), 0, 0);
        bool numeric = false;
        id.toLongLong(&numeric);
        if (numeric) // sbatch had queued the job before it was killed
            QProcess::execute(QStringLiteral("scancel"), { id });
        delete std::exchange(m_sbatch, nullptr);
    }
    if (m_mode == Mode::Sbatch && !m_jobId.isEmpty() && !m_ended)
        QProcess::execute(QStringLiteral("scancel"), { m_jobId });
    if (isRunning()) {
        signalJob(SIGKILL);
        if (m_process)
            m_process->waitForFinished(5000);
        if (m_ranks)
            m_ranks->waitForAll(5000);
    }
    reapGroup();
}

bool RunController::isRunning() const
{
    return (m_process && m_process->state() != QProcess::NotRunning) || (m_ranks && m_ranks->isRunning());
}

qint64 RunController::start(const LaunchRequest& request)
{
    m_request = request;
    m_cancelling = m_ended = m_sawEnd = m_progressTimedOut = m_jobRunning = m_started = m_warnedNeverRuns = false;
    m_jobState.clear();
    m_jobReason.clear();
    m_tailLine.clear();
    m_tailSkipToBreak = false;
    m_steps = 0;
    m_badFrames = 0;
    m_errorCause.clear();
    m_seen.clear();
    m_jobOffset = 0;
    m_jobId.clear();
    m_tail.clear();
    m_reader = trace::StreamReader(kMaxFrameBytes);
    // The engine resolves only built-in profiles: write the layout with its model and cluster inline.
    plan::Layout inlined = request.layout;
    inlined.modelProfile.clear();
    inlined.clusterProfile.clear();
    const QString layoutJson = QString::fromStdString(plan::writeLayout(inlined));
    QDir().mkpath(request.workDir);
    const QString layoutFile = QDir(request.workDir).filePath(QStringLiteral("layout.json"));
    QFile f(layoutFile);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate) || f.write(layoutJson.toUtf8()) < 0) {
        emit finished(
            profiles::RunState::Failed, QStringLiteral("cannot write %1: %2").arg(layoutFile, f.errorString()), {});
        return 0;
    }
    f.close();
    // Every argument is its own argv entry: names, paths and hosts never pass through a shell (over ssh,
    // where the remote side is a shell, each word is quoted).
    const std::string& method = request.layout.cluster.launch.method;
    QString problem;
    Command command;
    if (method == "ssh") {
        m_mode = Mode::Ssh;
        command = sshCommand(request, layoutJson, QFileInfo(request.workDir).fileName(), &problem);
    } else if (method == "slurm" && !qEnvironmentVariable("SLURM_JOB_ID").isEmpty()) {
        m_mode = Mode::Srun;
        QDir().mkpath(rankLogDir(request.workDir)); // srun opens each rank's log there, it makes no folder
        command = srunCommand(request, layoutFile);
    } else if (method == "slurm") {
        m_mode = Mode::Sbatch;
        command = sbatchCommand(request, QDir(request.workDir).filePath(QStringLiteral("job.sbatch")),
            QDir(request.workDir).filePath(QStringLiteral("job.out")));
    } else if (startsRanksItself(request.layout)) {
        m_mode = Mode::Ranks;
        command = localRankCommands(request, layoutFile, QDir(request.workDir).filePath(QStringLiteral("rendezvous")))
                      .front()
                      .command;
    } else {
        m_mode = Mode::Local;
        m_request.shmDir = makeRunShmDir(); // removed in end()
        command = localCommand(m_request, layoutFile);
    }
    m_command = command.all();
    if (m_mode == Mode::Ranks) // what each rank runs, with the variables that tell it who it is
        m_command.prepend(QStringLiteral("LOOM_RANK=0..%1 LOOM_WORLD_SIZE=%2")
                              .arg(request.layout.parallel.worldSize() - 1)
                              .arg(request.layout.parallel.worldSize()));
    // Over ssh the last argument is the whole remote script: store a shorter form of it.
    QStringList shown = m_command;
    if (m_mode == Mode::Ssh && !shown.isEmpty())
        shown.last() = keepsRankLogs(request, QFileInfo(request.workDir).fileName())
            ? QStringLiteral("<head-node script running mpirun, each rank's output in %1>")
                  .arg(rankLogDir(remoteRunDir(request, QFileInfo(request.workDir).fileName())))
            : QStringLiteral("<head-node script running mpirun; no rank logs: run_dir holds characters a shell reads>");
    m_run = m_store ? m_store->startRun(QString::fromStdString(request.layout.name), layoutJson,
                QString::fromStdString(request.layout.cluster.name), shown.join(QLatin1Char(' ')))
                    : 0;
    if (problem.isEmpty())
        problem = launchRefusal(request); // the launch policy and the local-rank cap (LaunchCommands.h)
    if (!problem.isEmpty()) {
        end(profiles::RunState::Failed, problem);
        return m_run;
    }
    if ((m_mode == Mode::Local || m_mode == Mode::Ranks) && !QFile::exists(request.engine)) {
        end(profiles::RunState::Failed,
            QStringLiteral("the engine %1 does not exist; build it (cmake --build) or set LOOM_TRAIN")
                .arg(request.engine));
        return m_run;
    }
    m_sinceFrame.start();
    m_sinceHeartbeat.start();
    m_watchdog.start();
    m_started = true;
    if (m_mode == Mode::Sbatch)
        startSbatch(layoutFile);
    else if (m_mode == Mode::Ranks)
        startRanks(layoutFile);
    else
        startProcess(command);
    return m_run;
}

void RunController::startRanks(const QString& layoutFile)
{
    // Gloo's file store meets in an empty folder of this run.
    const QString rendezvous = QDir(m_request.workDir).filePath(QStringLiteral("rendezvous"));
    QDir().mkpath(rendezvous);
    m_ranks = std::make_unique<LocalRanks>();
    connect(m_ranks.get(), &LocalRanks::streamOutput, this, &RunController::feed);
    connect(m_ranks.get(), &LocalRanks::messages, this, [this](const QString& text) {
        for (const QString& line : text.split(QLatin1Char('\n'), Qt::SkipEmptyParts))
            m_tail += line.left(400) + QLatin1Char('\n');
        if (m_tail.size() > 6000)
            m_tail = m_tail.right(4000);
    });
    connect(m_ranks.get(), &LocalRanks::finished, this, &RunController::ranksFinished);
    QString problem;
    if (!m_ranks->start(localRankCommands(m_request, layoutFile, rendezvous), m_request.workDir, &problem,
            m_request.stopRequested)) {
        const bool stopped = m_request.stopRequested && m_request.stopRequested();
        end(stopped ? profiles::RunState::Cancelled : profiles::RunState::Failed, problem);
        return;
    }
    m_pgid = m_ranks->processGroup();
}

void RunController::ranksFinished(int failedRank, const QString& cause)
{
    if (endIfStopped()) {
    } else if (failedRank < 0 && m_sawEnd) {
        end(profiles::RunState::Finished, {});
    } else {
        // A rank's own message ("rank 1 failed: …") says more than its exit code; a signal is said as it is.
        const QString logged = failureCause();
        end(profiles::RunState::Failed,
            cause.contains(QLatin1String("died")) || logged.isEmpty()
                ? (cause.isEmpty() ? QStringLiteral("the ranks ended before finishing") : cause)
                : logged);
    }
}

void RunController::cancel()
{
    if (m_ended || m_cancelling || (m_mode != Mode::Sbatch && !isRunning()))
        return;
    m_cancelling = true;
    stopJob();
}

void RunController::stopJob()
{
    switch (m_mode) {
    case Mode::Local:
        signalRanks(SIGTERM);
        break;
    case Mode::Ranks: // each rank finishes its step and stops
        m_ranks->signalAll(SIGTERM);
        break;
    case Mode::Ssh: // the head node's script: SIGUSR1 to mpirun (passed to the ranks), SIGTERM, SIGKILL
        m_process->write("cancel\n");
        break;
    case Mode::Srun: // srun passes SIGUSR1 on to every task (on SIGTERM it would end the step at once)
        ::kill(static_cast<pid_t>(m_pgid), SIGUSR1);
        QTimer::singleShot(static_cast<int>(m_request.cancelGraceSeconds * 1000), this, [this] {
            if (isRunning())
                ::kill(static_cast<pid_t>(m_pgid), SIGTERM);
        });
        break;
    case Mode::Sbatch:
        cancelJob();
        return;
    }
    // Over ssh the head node has its own grace period (SIGUSR1, SIGTERM, SIGKILL): give it time to report
    // before ssh goes; srun gets SIGTERM first, above.
    const double grace = m_request.cancelGraceSeconds + (m_mode == Mode::Ssh ? 5 : m_mode == Mode::Srun ? 3 : 0);
    QTimer::singleShot(static_cast<int>(grace * 1000), this, [this] {
        if (isRunning())
            signalJob(SIGKILL);
    });
}

void RunController::heartbeat()
{
    // The head node's watchdog stops the job when these stop coming (LaunchCommands.h, sshCommand).
    if (m_mode != Mode::Ssh || !m_process || m_process->state() != QProcess::Running
        || m_sinceHeartbeat.elapsed() < sshHeartbeatSeconds(m_request) * 1000)
        return;
    m_sinceHeartbeat.restart();
    if (!m_cancelling)
        m_process->write("alive\n");
}

void RunController::checkProgress()
{
    heartbeat();
    if (m_ended || m_cancelling || (m_mode == Mode::Sbatch ? !m_jobRunning : !isRunning()))
        return;
    if (m_mode == Mode::Local)
        groupMembers(); // notes the ranks below mpirun
    if (m_sinceFrame.elapsed() > m_request.progressTimeoutSeconds * 1000) {
        m_tail
            += QStringLiteral("loom: no progress for %1 s; stopping the run\n").arg(m_request.progressTimeoutSeconds);
        if (m_mode == Mode::Local || m_mode == Mode::Ranks)
            if (const QStringList stopped
                = stoppedRanks(m_mode == Mode::Ranks ? childProcesses(::getpid()) : groupMembers());
                !stopped.isEmpty())
                m_stuck = stopped.join(QStringLiteral(", ")) + (stopped.size() == 1 ? " is" : " are");
        m_cancelling = true;
        m_progressTimedOut = true;
        stopJob();
    }
}

RunWorld RunController::world() const
{
    RunWorld w { m_request.layout.parallel.worldSize(), {} };
    for (const std::string& h : m_request.layout.cluster.hosts)
        w.hosts << QString::fromStdString(h);
    if (m_mode == Mode::Local || m_mode == Mode::Ranks) // mpirun names this machine as it calls itself
        w.hosts << QSysInfo::machineHostName() << QStringLiteral("localhost");
    return w;
}

void RunController::processFinished(int exitCode, QProcess::ExitStatus status)
{
    readOutput();
    if (endIfStopped())
        return;
    if (status == QProcess::NormalExit && exitCode == 0 && m_sawEnd) {
        end(profiles::RunState::Finished, {});
        return;
    }
    if (m_mode == Mode::Srun)
        addRankLogsToTail(); // the ranks' messages went to their files, not to srun's output
    QString cause = failureCause();
    const QString head = m_command.value(m_command.indexOf(QStringLiteral("--")) + 1);
    // What the log says about ssh to the head node itself is Loom's own ssh failing, not mpirun's.
    const bool aboutHead = cause.startsWith(QStringLiteral("host %1 ").arg(head))
        || cause.contains(QStringLiteral(" host %1 by ssh").arg(head.section(QLatin1Char('@'), -1)));
    if (m_mode == Mode::Ssh && status == QProcess::NormalExit && exitCode == 255 && (cause.isEmpty() || aboutHead)) {
        // ssh's own failure: its last message says why (connection refused, timed out, no route, key refused)
        QString why;
        for (const QString& line : m_tail.split(QLatin1Char('\n'), Qt::SkipEmptyParts))
            if (!line.startsWith(QLatin1String("loom:")))
                why = line.trimmed();
        cause = QStringLiteral("ssh to %1 failed: %2").arg(head, why.isEmpty() ? QStringLiteral("exit code 255") : why);
        if (m_steps > 0) // the link went down mid-run: the head node's watchdog ends the job
            cause += QStringLiteral(
                "; the job on the cluster stops itself within %1 s of Loom's last word (its watchdog)")
                         .arg(sshWatchdogSeconds(m_request));
    }
    if (cause.isEmpty())
        cause = status == QProcess::CrashExit
            ? QStringLiteral("mpirun crashed")
            : QStringLiteral("the job ended with exit code %1 before finishing").arg(exitCode);
    end(profiles::RunState::Failed, cause);
}

bool RunController::endIfStopped()
{
    if (!m_recordFailure.isEmpty())
        end(profiles::RunState::Failed, m_recordFailure);
    else if (m_progressTimedOut)
        end(profiles::RunState::Failed, hangCause());
    else if (m_cancelling)
        end(profiles::RunState::Cancelled, QStringLiteral("cancelled after step %1").arg(m_steps));
    else
        return false;
    return true;
}

QString RunController::hangCause() const
{
    QString cause = m_stuck.isEmpty()
        ? QStringLiteral("no progress for %1 s: no step finished in that time (a rank may be stuck)")
              .arg(m_request.progressTimeoutSeconds)
        : QStringLiteral("no progress for %1 s: %2 stopped (SIGSTOP or a debugger), so the other ranks "
                         "wait for it in their next collective")
              .arg(m_request.progressTimeoutSeconds)
              .arg(m_stuck);
    // The flight records of the ranks that could still speak: where each waits, newest collective first.
    if (const QStringList last = lastCollectives(m_tail, world()); !last.isEmpty())
        cause += QStringLiteral(". Last collectives: ") + last.join(QStringLiteral(" | "));
    return cause;
}

void RunController::storeFailed(const QString& why)
{
    // A run whose steps cannot be kept would end "finished" with most of them lost: stop it now, as a cancel
    // does (the ranks save a checkpoint when asked), and fail it with the store's own reason.
    if (!m_recordFailure.isEmpty())
        return;
    m_recordFailure = QStringLiteral("failed to record the run after step %1: %2").arg(m_steps).arg(why);
    m_tail += QStringLiteral("loom: %1; stopping the run\n").arg(why);
    emit recordFailed(m_recordFailure);
    if (!m_ended && !m_cancelling) {
        m_cancelling = true;
        stopJob();
    }
}

void RunController::end(profiles::RunState state, const QString& cause)
{
    if (m_ended)
        return;
    m_ended = true;
    m_watchdog.stop();
    m_jobPoll.stop();
    if (m_sbatch) // its answer, if it has one, still has its job scancelled (submitCancelled)
        m_sbatch->kill();
    if (isRunning()) {
        signalJob(SIGKILL);
        if (m_process)
            m_process->waitForFinished(5000);
        if (m_ranks)
            m_ranks->waitForAll(5000);
    }
    signalJob(SIGKILL); // anything of the group still alive
    reapGroup();
    if (!m_request.shmDir.isEmpty()) // what killed ranks left of Open MPI's shared memory
        removeRunShmDir(std::exchange(m_request.shmDir, QString()));
    QString said = cause;
    if (m_store && m_run) {
        try {
            m_store->finishRun(m_run, state, cause);
        } catch (const std::exception& e) { // the run's end is not on record: never say "finished" then
            m_tail += QStringLiteral("loom: %1\n").arg(QString::fromUtf8(e.what()));
            if (m_recordFailure.isEmpty()) {
                state = profiles::RunState::Failed;
                said = QStringLiteral("failed to record the run's end: %1").arg(QString::fromUtf8(e.what()));
            }
        }
    }
    emit finished(state, said, m_tail.right(2000));
}

} // namespace loom::launcher
