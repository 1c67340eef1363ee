#include "launcher/RunController.h"

#include "launcher/RunChecks.h"
#include "launcher/RunShm.h"

#include "engine/plan/LayoutParser.h"
#include "engine/trace/TelemetryFrames.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QRegularExpression>
#include <QSysInfo>

#include <nlohmann/json.hpp>

#include <QThread>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <limits>
#include <map>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
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

void RunController::handleFrame(const trace::Frame& frame)
{
    m_sinceFrame.restart();
    trace::TelemetryFrame typed;
    try {
        typed = trace::decode(frame);
    } catch (const trace::FrameError& e) { // passed its CRC but cannot be read: skip it, say why once
        if (m_badFrames++ == 0)
            m_tail += QStringLiteral("loom: skipped a telemetry frame: %1\n").arg(QString::fromUtf8(e.what()));
        return;
    }
    switch (trace::typeOf(typed)) {
    case trace::FrameType::Run: // the launcher wrote the layout itself; only where the run starts is news
        runFrame(std::get<trace::RunFrame>(typed));
        break;
    case trace::FrameType::Groups:
        emit groupsReceived(std::get<trace::GroupsFrame>(typed).groups);
        break;
    case trace::FrameType::Events: {
        const auto& events = std::get<trace::EventsFrame>(typed).events;
        for (std::size_t i = 0; i < events.size(); ++i)
            if (const QString bad = eventProblem(events[i], m_request.layout.parallel.worldSize(), m_request.steps);
                !bad.isEmpty()) {
                if (m_badFrames++ == 0)
                    m_tail += QStringLiteral("loom: skipped a telemetry frame: its event %1: %2\n").arg(i).arg(bad);
                return;
            }
        if (m_store && m_run)
            m_store->addEvents(m_run, events);
        emit eventsArrived(static_cast<qint64>(events.size()));
        emit eventsReceived(events);
        break;
    }
    case trace::FrameType::Step: {
        const auto& f = std::get<trace::StepFrame>(typed);
        profiles::StepRecord s;
        s.step = f.step;
        s.loss = f.loss;
        s.tokensPerSecond = f.tokensPerSecond;
        s.stepTimeSeconds = f.stepTimeSeconds;
        s.gradNorm = f.gradNorm;
        s.lr = f.lr;
        s.flopsPerSecond = f.flopsPerSecond; // the whole frame: FLOP rates and each rank's memory too
        s.hardwareFlopsPerSecond = f.hardwareFlopsPerSecond;
        s.memoryHighWaterBytes.assign(f.memoryHighWaterBytes.begin(), f.memoryHighWaterBytes.end());
        m_steps = s.step;
        if (m_store && m_run)
            m_store->addStep(m_run, s);
        emit stepFinished(s, m_request.steps);
        break;
    }
    case trace::FrameType::Checkpoint: {
        const auto& f = std::get<trace::CheckpointFrame>(typed);
        const QString path = QString::fromStdString(f.path);
        if (m_store && m_run)
            m_store->addCheckpoint(m_run, f.step, path);
        emit checkpointSaved(f.step, path);
        break;
    }
    case trace::FrameType::End:
        m_sawEnd = true;
        break;
    case trace::FrameType::Error: { // the first rank to fail says why; the others fail because it did
        const auto& f = std::get<trace::ErrorFrame>(typed);
        if (!m_errorCause.isEmpty())
            break;
        // The frame's words are a rank's: its rank number is checked against the world, its text escaped.
        const QString message = causeText(QString::fromStdString(f.message));
        m_errorCause = world().knowsRank(f.rank)
            ? QStringLiteral("rank %1 failed: %2").arg(f.rank).arg(message)
            : QStringLiteral("a rank failed (its error frame names rank %1, outside the run's %2 ranks): %3")
                  .arg(f.rank)
                  .arg(m_request.layout.parallel.worldSize())
                  .arg(message);
        break;
    }
    }
}

QString RunController::failureCause() const
{
    // The error frame says it in words the engine chose; the log is read only for failures without one.
    return m_errorCause.isEmpty() ? launcher::causeFromLog(m_tail, world()) : m_errorCause;
}

void RunController::readOutput()
{
    // In pieces: a flood of output is parsed (and its frames stored) a megabyte at a time.
    while (m_process && m_process->bytesAvailable() > 0)
        feed(m_process->read(1 << 20));
}

void RunController::reportRefusedFrames()
{
    trace::RefusedFrame refused;
    while (m_reader.nextRefused(refused)) {
        // Every frame but an error frame comes from rank 0, which gathers the other ranks' events.
        const QString type
            = refused.type.empty() ? QStringLiteral("unknown type") : QString::fromStdString(refused.type);
        const QString from = type == QLatin1String("error") ? QStringLiteral("a rank") : QStringLiteral("rank 0");
        const QString size = refused.declaredBytes > 0
            ? QStringLiteral("%1 MiB").arg(static_cast<double>(refused.declaredBytes) / (1 << 20), 0, 'f', 1)
            : QStringLiteral("more than %1 MiB").arg(kMaxFrameBytes >> 20);
        m_tail += QStringLiteral("loom: refused a telemetry frame (%1, %2) from %3: a frame may hold at most %4 MiB; "
                                 "it is not stored\n")
                      .arg(type, size, from)
                      .arg(kMaxFrameBytes >> 20);
    }
}

void RunController::feed(const QByteArray& chunk)
{
    if (chunk.isEmpty())
        return;
    m_reader.feed(std::string_view(chunk.constData(), static_cast<std::size_t>(chunk.size())));
    addToTail(chunk);
    reportRefusedFrames();
    trace::Frame frame;
    while (m_reader.next(frame)) {
        try {
            handleFrame(frame);
        } catch (const std::exception& e) {
            storeFailed(QString::fromUtf8(e.what()));
        }
    }
}

void RunController::addToTail(const QByteArray& chunk)
{
    // Whole lines only: a frame that the pipe cut in two would otherwise leave its second half (JSON, CRC)
    // in the failure's tail as if it were a message. An over-long line is cut once: the rest of it, up to
    // its line break, is dropped as it arrives (a 60 MiB frame must not flood the tail with its body).
    QByteArray data = chunk;
    if (m_tailSkipToBreak) {
        const qsizetype br = data.indexOf('\n');
        if (br < 0)
            return;
        data.remove(0, br + 1);
        m_tailSkipToBreak = false;
    }
    m_tailLine += data;
    const qsizetype lastBreak = m_tailLine.lastIndexOf('\n');
    if (lastBreak >= 0) {
        for (const QByteArray& line : m_tailLine.left(lastBreak).split('\n'))
            if (!line.isEmpty() && !line.startsWith('\x1e'))
                m_tail += QString::fromUtf8(line.left(400)) + QLatin1Char('\n');
        m_tailLine.remove(0, lastBreak + 1);
    }
    if (m_tailLine.size() > 4096) {
        if (!m_tailLine.startsWith('\x1e')) // a long line without an end: keep its start
            m_tail += QString::fromUtf8(m_tailLine.left(400)) + QLatin1Char('\n');
        m_tailLine.clear(); // the rest of an over-long frame is not text either
        m_tailSkipToBreak = true;
    }
    if (m_tail.size() > 6000)
        m_tail = m_tail.right(4000);
}

void RunController::runFrame(const trace::RunFrame& frame)
{
    if (frame.firstStep <= 1 || !m_request.resume)
        return;
    // A continuation: name the run whose checkpoint it starts from (the newest run with a checkpoint of
    // that step in this folder), on record in the run's command.
    const qint64 after = frame.firstStep - 1;
    qint64 earlier = 0;
    try {
        if (m_store && m_run)
            for (const auto& r : m_store->runs())
                if (r.id != m_run)
                    for (const auto& c : m_store->checkpoints(r.id))
                        if (c.step == after && c.path.startsWith(m_request.checkpointDir))
                            earlier = r.id;
        const QString said = earlier > 0
            ? QStringLiteral("continues run %1 from its checkpoint at step %2").arg(earlier).arg(after)
            : QStringLiteral("continues from the checkpoint at step %1 in %2").arg(after).arg(m_request.checkpointDir);
        m_tail += QStringLiteral("loom: this run %1\n").arg(said);
        if (m_store && m_run)
            m_store->setCommand(m_run, m_command.join(QLatin1Char(' ')) + QStringLiteral("  (%1)").arg(said));
        emit notice(QStringLiteral("this run ") + said);
    } catch (const std::exception& e) {
        storeFailed(QString::fromUtf8(e.what()));
    }
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
