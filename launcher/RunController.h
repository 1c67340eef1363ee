#pragma once

#include "engine/trace/TelemetryFrames.h"
#include "engine/trace/TelemetryStream.h"
#include "launcher/LaunchCommands.h"
#include "launcher/LocalRanks.h"
#include "launcher/RunChecks.h"
#include "profiles/RunStore.h"

#include <QElapsedTimer>
#include <QFile>
#include <QObject>
#include <QProcess>
#include <QSet>
#include <QTimer>

#include <memory>

namespace loom::launcher {

// Starts the engine the way the layout's cluster says (launch.method): mpirun here, mpirun on a head node
// over ssh, or a Slurm job (sbatch, or srun inside an allocation). Follows its telemetry stream, stores
// steps, events and checkpoints in the run store, and reports progress, failure (with its cause in one
// sentence and the log's tail) and cancellation. A gloo layout on this machine needs no mpirun: its ranks are
// started here, one process each (LocalRanks), with the same cancel, failure and clean-up. Local jobs run in their own
// process group, so cancel reaches every rank: SIGTERM first (ranks finish their step, save and stop), SIGKILL after
// the grace period. Remote launchers kill their ranks on SIGTERM, so there the first signal is SIGUSR1, which mpirun
// and srun pass on to every rank: over ssh a line on ssh's input makes the head node send it to mpirun, under
// srun Loom sends it to srun, under sbatch it is `scancel --batch --signal=USR1` (a job still pending is simply
// scancelled).
class RunController : public QObject {
    Q_OBJECT
public:
    explicit RunController(profiles::RunStore* store, QObject* parent = nullptr);
    ~RunController() override;

    // Returns the run's id in the store; 0 when nothing could start (finished() has been emitted then).
    qint64 start(const LaunchRequest& request);
    void cancel();
    // Whether processes of the run are running on this machine (mpirun, ssh, srun or the ranks).
    bool isRunning() const;
    // Whether the run has started and not ended: also while a Slurm job waits in the queue or runs under
    // sbatch, where nothing of it runs here.
    bool isActive() const { return m_started && !m_ended; }
    // The Slurm job's id once sbatch accepted it; empty otherwise.
    QString jobId() const { return m_jobId; }
    // Whether sbatch is still submitting the job (it runs in the background; the job has no id yet).
    bool isSubmitting() const { return m_sbatch != nullptr; }
    QStringList command() const { return m_command; }

    // The largest telemetry frame the launcher reads (the engine splits its events into frames far below
    // this); a longer one is refused as it arrives, so a run never buffers more than about this per line.
    static constexpr std::size_t kMaxFrameBytes = 8u << 20;

    // The sentence for a failed run's log: "rank 2 died (signal 9 on node vm)", or nothing recognised.
    static QString causeFromLog(const QString& log);
    // Why the run failed: the first error frame's rank and message, else what causeFromLog finds.
    QString failureCause() const;
    // The ranks and hosts a cause may name (RunChecks.h).
    RunWorld world() const;

signals:
    void stepFinished(const loom::profiles::StepRecord& step, qint64 totalSteps);
    void eventsArrived(qint64 count);
    // The events of one frame (one step of every rank), as they arrive, for live views.
    void eventsReceived(const std::vector<loom::trace::TraceEvent>& events);
    // The communication groups the events refer to (sent once, before the first events).
    void groupsReceived(const std::vector<loom::trace::GroupInfo>& groups);
    void checkpointSaved(qint64 step, const QString& path);
    // The store could not record a step, events or a checkpoint: the run is being stopped and will fail.
    void recordFailed(const QString& cause);
    // Slurm (sbatch): "SUBMITTING" with no id while sbatch runs, the job's id at submission ("SUBMITTED"), then
    // each change of its state and reason ("PENDING", "Resources"; "RUNNING", "None").
    void jobStateChanged(const QString& jobId, const QString& state, const QString& reason);
    // A line for the user while the run goes on: a job Slurm says can never start, a resumed run.
    void notice(const QString& text);
    // state: Finished, Failed or Cancelled.
    void finished(loom::profiles::RunState state, const QString& cause, const QString& logTail);

private:
    enum class Mode { Local, Ssh, Srun, Sbatch, Ranks }; // Ranks: started here without mpirun (LocalRanks)
    void startProcess(const Command& command);
    void startRanks(const QString& layoutFile);
    void ranksFinished(int failedRank, const QString& cause);
    void startSbatch(const QString& layoutFile);
    // What sbatch said once it ended (in the background): the job's id, or why it was not accepted.
    void sbatchAnswered(QProcess* sbatch, int exitCode, QProcess::ExitStatus status);
    // sbatch was killed by a cancel (or the run ended) before it answered: scancel a job it still reported.
    void submitCancelled(const QString& jobId);
    void jobStarted(); // the job runs: scontrol said so, or its output file grew
    void pollJob();
    void jobStateSeen(const QString& state, const QString& reason);
    void jobStateAnswered(const QString& scontrolText); // what `scontrol show job` said: follow or end
    void cancelJob(); // sbatch: scancel, without waiting for it
    // Runs `scancel ARGS JOB` in the background; `done` gets its exit code (-1 when it could not run).
    void scancel(const QStringList& args, std::function<void(int)> done = {});
    void runFrame(const trace::RunFrame& frame);
    void heartbeat();
    void addToTail(const QByteArray& chunk);
    // srun: the end of each rank's log (its standard error, RankLogs.h), a few KiB of each, into the tail.
    void addRankLogsToTail();
    // Slurm: feeds what the job's output file gained since the last read; at most `budget` bytes a turn of the
    // event loop (the rest follows on the next turns), everything when budget < 0.
    void followJobOutput(qint64 budget);
    void feed(const QByteArray& chunk);
    void readOutput();
    void processFinished(int exitCode, QProcess::ExitStatus status);
    void checkProgress();
    void signalJob(int signal);
    void signalRanks(int signal);
    // The processes of the job's process group and those ever seen below its leader that still exist
    // (zombies included), from /proc; notes the leader's descendants.
    QList<qint64> groupMembers();
    // Waits (SIGKILL, waitpid) until no process of the group is left, at most 10 s.
    void reapGroup();
    void stopJob();
    void end(profiles::RunState state, const QString& cause);
    // Ends the run when Loom itself stopped it (the store failed, no progress, a cancel); false otherwise.
    bool endIfStopped();
    void storeFailed(const QString& why);
    // The cause of a run stopped for lack of progress: the stopped ranks and the others' last collectives.
    QString hangCause() const;
    void handleFrame(const trace::Frame& frame);
    void reportRefusedFrames();

    profiles::RunStore* m_store;
    std::unique_ptr<QProcess> m_process;
    std::unique_ptr<LocalRanks> m_ranks;
    trace::StreamReader m_reader { kMaxFrameBytes };
    QString m_tail; // the last output, for failure reports
    QStringList m_command;
    Mode m_mode = Mode::Local;
    QString m_jobId; // Slurm
    QString m_jobOutput; // Slurm: the job's output file, followed
    qint64 m_jobOffset = 0;
    bool m_jobRunning = false;
    QString m_jobState, m_jobReason; // as scontrol said last
    bool m_warnedNeverRuns = false;
    bool m_started = false;
    QByteArray m_tailLine; // the last output's unfinished line (a frame cut by the pipe is not text)
    bool m_tailSkipToBreak = false; // inside an over-long line already cut: drop up to its line break
    QElapsedTimer m_sinceHeartbeat; // ssh: since the last "alive" to the head node
    QTimer m_jobPoll;
    QProcess* m_sbatch = nullptr; // Slurm: the submission in flight
    bool m_sbatchTimedOut = false;
    static constexpr int kSbatchLimitMs = 60000; // sbatch is killed when it has not answered by then
    QProcess* m_scontrol = nullptr; // Slurm: the queue-state question in flight
    QElapsedTimer m_scontrolSince;
    bool m_followQueued = false;
    static constexpr qint64 kFollowBytes = 1 << 20;
    qint64 m_run = 0;
    qint64 m_steps = 0;
    bool m_cancelling = false;
    bool m_ended = false;
    bool m_sawEnd = false;
    bool m_progressTimedOut = false;
    QString m_stuck; // at a progress timeout: the ranks found stopped
    QString m_recordFailure; // the store could not record the run: why (the run is stopped and fails)
    QString m_errorCause; // from the first error frame
    qint64 m_badFrames = 0; // frames that could not be read (the first reason goes to the log)
    qint64 m_pgid = 0;
    QSet<qint64> m_seen; // processes seen below the job's leader
    LaunchRequest m_request;
    QElapsedTimer m_sinceFrame;
    QTimer m_watchdog;
};

} // namespace loom::launcher
