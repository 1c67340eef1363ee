// RunController under sbatch: submitting the job, following its queue state and output, and cancelling it
// without waiting on Slurm (scancel runs in the background).
#include "launcher/RunController.h"

#include <QDir>
#include <QFile>
#include <QRegularExpression>

namespace loom::launcher {

namespace {

// Reasons for which Slurm keeps a job pending although it can never start as submitted: a limit of the
// partition, account or QOS that the job exceeds (squeue(1), "JOB REASON CODES").
bool neverStarts(const QString& reason)
{
    static const QRegularExpression re(QStringLiteral(
        "^(PartitionNodeLimit|PartitionTimeLimit|PartitionConfig|BadConstraints|InvalidAccount|InvalidQOS|"
        "AssocMaxNodesPerJobLimit|AssocMaxCpuPerJobLimit|AssocMaxWallDurationPerJobLimit|QOSMaxNodePerJobLimit|"
        "QOSMaxCpuPerJobLimit|QOSMaxWallDurationPerJobLimit|QOSMinCpuNotSatisfied|DependencyNeverSatisfied)$"));
    return re.match(reason).hasMatch();
}

bool stillQueuedOrRunning(const QString& state)
{
    for (const char* s : { "PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING" })
        if (state == QLatin1String(s))
            return true;
    return false;
}

} // namespace

void RunController::startSbatch(const QString& layoutFile)
{
    const QString script = QDir(m_request.workDir).filePath(QStringLiteral("job.sbatch"));
    m_jobOutput = QDir(m_request.workDir).filePath(QStringLiteral("job.out"));
    QFile f(script);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate)
        || f.write(sbatchScript(m_request, layoutFile).toUtf8()) < 0) {
        end(profiles::RunState::Failed, QStringLiteral("cannot write %1: %2").arg(script, f.errorString()));
        return;
    }
    f.close();
    // In the background, as scontrol and scancel are: a slow controller never holds up the window.
    auto* sbatch = new QProcess(this);
    m_sbatch = sbatch;
    m_sbatchTimedOut = false;
    connect(sbatch, &QProcess::finished, this,
        [this, sbatch](int code, QProcess::ExitStatus status) { sbatchAnswered(sbatch, code, status); });
    connect(sbatch, &QProcess::errorOccurred, this, [this, sbatch](QProcess::ProcessError e) {
        if (e != QProcess::FailedToStart || m_sbatch != sbatch)
            return;
        m_sbatch = nullptr;
        sbatch->deleteLater();
        if (m_cancelling)
            submitCancelled({});
        else
            end(profiles::RunState::Failed,
                QStringLiteral("sbatch could not be started (%1); install slurm-client (installer/bootstrap.sh)")
                    .arg(sbatch->errorString()));
    });
    QTimer::singleShot(kSbatchLimitMs, sbatch, [this, sbatch] {
        if (m_sbatch == sbatch && sbatch->state() != QProcess::NotRunning) {
            m_sbatchTimedOut = true;
            sbatch->kill();
        }
    });
    emit jobStateChanged({}, QStringLiteral("SUBMITTING"), {});
    sbatch->start(m_command.first(), m_command.mid(1));
}

void RunController::sbatchAnswered(QProcess* sbatch, int exitCode, QProcess::ExitStatus status)
{
    if (m_sbatch != sbatch)
        return;
    m_sbatch = nullptr;
    sbatch->deleteLater();
    const QString out = QString::fromUtf8(sbatch->readAllStandardOutput()).trimmed();
    const QString err = QString::fromUtf8(sbatch->readAllStandardError()).trimmed();
    const QString id = out.section(QLatin1Char(';'), 0, 0);
    bool numeric = false;
    id.toLongLong(&numeric);
    if (m_cancelling || m_ended) {
        submitCancelled(numeric ? id : QString());
        return;
    }
    if (status != QProcess::NormalExit || exitCode != 0 || !numeric) {
        m_tail += err + QLatin1Char('\n');
        const QString why = m_sbatchTimedOut ? QStringLiteral("no answer within %1 s").arg(kSbatchLimitMs / 1000)
            : err.isEmpty()                  ? QStringLiteral("exit code %1").arg(exitCode)
                                             : err.section(QLatin1Char('\n'), -1);
        end(profiles::RunState::Failed, QStringLiteral("sbatch refused the job: %1").arg(why));
        return;
    }
    m_jobId = id;
    m_tail += QStringLiteral("loom: submitted Slurm job %1\n").arg(m_jobId);
    // On record before anything else: if Loom dies now, `loom runs show` still names the job to scancel.
    try {
        if (m_store && m_run)
            m_store->setCommand(
                m_run, m_command.join(QLatin1Char(' ')) + QStringLiteral("  (Slurm job %1)").arg(m_jobId));
    } catch (const std::exception& e) {
        storeFailed(QString::fromUtf8(e.what()));
    }
    emit jobStateChanged(m_jobId, QStringLiteral("SUBMITTED"), {});
    if (m_ended)
        return; // the store failed before the job could be followed (storeFailed cancelled it)
    m_jobPoll.setInterval(1000);
    connect(&m_jobPoll, &QTimer::timeout, this, &RunController::pollJob, Qt::UniqueConnection);
    m_jobPoll.start();
    QTimer::singleShot(0, this, &RunController::pollJob); // the queue state at once, not a second later
}

void RunController::submitCancelled(const QString& jobId)
{
    const QString cause = QStringLiteral("cancelled while sbatch was submitting the job");
    if (jobId.isEmpty()) {
        end(profiles::RunState::Cancelled, cause + QStringLiteral("; nothing was queued"));
        return;
    }
    // sbatch had its answer before it was killed: the job is queued, remove it before saying the run ended.
    m_jobId = jobId;
    m_tail += QStringLiteral("loom: cancelling Slurm job %1, submitted as the run was cancelled\n").arg(jobId);
    scancel({}, [this, cause, jobId](int) {
        end(profiles::RunState::Cancelled, cause + QStringLiteral(" (Slurm job %1 removed)").arg(jobId));
    });
}

void RunController::pollJob()
{
    if (m_ended)
        return;
    followJobOutput(kFollowBytes);
    if (m_scontrol) {
        if (m_scontrolSince.elapsed() < 10000)
            return; // the last question is still out
        m_scontrol->kill(); // the controller is busy: ask again next time
        return;
    }
    // Asked in the background: a busy controller never holds up the window.
    auto* scontrol = new QProcess(this);
    m_scontrol = scontrol;
    m_scontrolSince.start();
    auto done = [this, scontrol] {
        scontrol->deleteLater();
        if (m_scontrol == scontrol)
            m_scontrol = nullptr;
    };
    connect(scontrol, &QProcess::finished, this, [this, scontrol, done](int, QProcess::ExitStatus status) {
        const QString text = QString::fromUtf8(scontrol->readAllStandardOutput() + scontrol->readAllStandardError());
        done();
        if (status == QProcess::NormalExit)
            jobStateAnswered(text);
    });
    connect(scontrol, &QProcess::errorOccurred, this, [done](QProcess::ProcessError e) {
        if (e == QProcess::FailedToStart)
            done();
    });
    scontrol->start(
        QStringLiteral("scontrol"), { QStringLiteral("show"), QStringLiteral("job"), QStringLiteral("-o"), m_jobId });
}

void RunController::jobStateAnswered(const QString& text)
{
    static const QRegularExpression stateRe(QStringLiteral("JobState=(\\S+)"));
    static const QRegularExpression exitRe(QStringLiteral("\\bExitCode=(\\d+):(\\d+)"));
    static const QRegularExpression reasonRe(QStringLiteral("\\bReason=(\\S+)"));
    const QString state = stateRe.match(text).captured(1);
    if (state.isEmpty() && !text.contains(QLatin1String("Invalid job id")))
        return;
    if (m_ended) // a cancel of the pending job ended the run while scontrol answered
        return;
    jobStateSeen(state, reasonRe.match(text).captured(1));
    if (stillQueuedOrRunning(state))
        return;
    // The job is over: read what is left of its output, then decide.
    followJobOutput(-1);
    m_jobPoll.stop();
    const auto exit = exitRe.match(text);
    if (endIfStopped()) {
    } else if ((state == QLatin1String("COMPLETED") || state.isEmpty()) && m_sawEnd) {
        end(profiles::RunState::Finished, {});
    } else {
        QString cause = failureCause();
        if (cause.isEmpty())
            cause = QStringLiteral("Slurm job %1 ended %2 (exit code %3, reason %4)")
                        .arg(m_jobId, state.isEmpty() ? QStringLiteral("without a trace") : state,
                            exit.hasMatch() ? exit.captured(1) : QStringLiteral("?"), reasonRe.match(text).captured(1));
        end(profiles::RunState::Failed, cause);
    }
}

void RunController::jobStarted()
{
    if (m_jobRunning)
        return;
    m_jobRunning = true;
    m_sinceFrame.restart(); // waiting in the queue is not a lack of progress
}

void RunController::jobStateSeen(const QString& state, const QString& reason)
{
    if (state == QLatin1String("RUNNING"))
        jobStarted();
    if (state == m_jobState && reason == m_jobReason)
        return;
    m_jobState = state;
    m_jobReason = reason;
    if (state == QLatin1String("PENDING"))
        m_tail += QStringLiteral("loom: Slurm job %1 is pending (%2)\n").arg(m_jobId, reason);
    emit jobStateChanged(m_jobId, state, reason);
    if (state == QLatin1String("PENDING") && neverStarts(reason) && !m_warnedNeverRuns) {
        m_warnedNeverRuns = true;
        const QString warning = QStringLiteral(
            "Slurm job %1 can never start as submitted: its reason is %2 (it asks for more than the partition, "
            "account or QOS allows); cancel it and change the layout's nodes or the profile's partition or "
            "time_limit")
                                    .arg(m_jobId, reason);
        m_tail += QStringLiteral("loom: %1\n").arg(warning);
        emit notice(warning);
    }
}

void RunController::scancel(const QStringList& args, std::function<void(int)> done)
{
    auto* p = new QProcess(this);
    connect(p, &QProcess::finished, this, [p, done](int code, QProcess::ExitStatus status) {
        if (done)
            done(status == QProcess::NormalExit ? code : -1);
        p->deleteLater();
    });
    connect(p, &QProcess::errorOccurred, this, [p, done](QProcess::ProcessError e) {
        if (e != QProcess::FailedToStart)
            return;
        if (done)
            done(-1);
        p->deleteLater();
    });
    p->setProcessChannelMode(QProcess::MergedChannels);
    p->start(QStringLiteral("scancel"), args + QStringList { m_jobId });
}

void RunController::cancelJob()
{
    if (m_sbatch) { // still submitting: no job to signal yet; the run ends once sbatch is gone
        m_tail += QStringLiteral("loom: cancelling while sbatch submits the job\n");
        m_sbatch->kill();
        return;
    }
    if (m_jobId.isEmpty())
        return;
    if (!m_jobRunning) {
        // A pending job has no ranks to save anything, and Slurm refuses to signal it: remove it from the
        // queue. The run ends once scancel has said yes (a second at most), not at the next poll.
        m_tail += QStringLiteral("loom: cancelling Slurm job %1 while it is %2\n")
                      .arg(m_jobId, m_jobState.isEmpty() ? QStringLiteral("queued") : m_jobState.toLower());
        scancel({}, [this](int code) {
            if (code == 0 && !m_ended && !m_jobRunning) {
                end(profiles::RunState::Cancelled,
                    QStringLiteral("cancelled while Slurm job %1 was pending; it never started").arg(m_jobId));
            }
        });
        return;
    }
    // The batch step is mpirun (the script execs it), which passes SIGUSR1 to every rank: each finishes its
    // step, saves a checkpoint and stops. Whatever is left after the grace period is scancelled.
    scancel({ QStringLiteral("--batch"), QStringLiteral("--signal=USR1") });
    QTimer::singleShot(static_cast<int>(m_request.cancelGraceSeconds * 1000), this, [this] {
        if (!m_ended)
            scancel({});
    });
}

void RunController::followJobOutput(qint64 budget)
{
    // A megabyte at a time, as readOutput() reads a local job: a flood is never held whole. With a budget, a
    // job that writes faster than the window reads is followed a budget per turn of the event loop, so the
    // window stays responsive and catches up once the job slows or ends.
    QFile out(m_jobOutput);
    if (!out.open(QIODevice::ReadOnly) || out.size() <= m_jobOffset || !out.seek(m_jobOffset))
        return;
    // Slurm opens the output file when the batch step starts: whatever is in it says the job runs, even
    // when scontrol (asked in the background) has not said RUNNING yet; a cancel then signals the ranks.
    jobStarted();
    qint64 read = 0;
    for (QByteArray chunk = out.read(1 << 20); !chunk.isEmpty() && !m_ended; chunk = out.read(1 << 20)) {
        m_jobOffset += chunk.size();
        read += chunk.size();
        feed(chunk);
        if (budget >= 0 && read >= budget)
            break;
    }
    if (budget < 0 || read < budget || m_ended || m_followQueued)
        return;
    m_followQueued = true;
    QTimer::singleShot(0, this, [this, budget] {
        m_followQueued = false;
        if (!m_ended)
            followJobOutput(budget);
    });
}

} // namespace loom::launcher
