#pragma once

#include "engine/plan/Layout.h"
#include "engine/trace/TelemetryStream.h"
#include "profiles/RunStore.h"

#include <QElapsedTimer>
#include <QObject>
#include <QProcess>
#include <QTimer>

#include <memory>

namespace loom::launcher {

// What to launch on this machine (the "local" target; hosts over ssh and Slurm join later).
struct LaunchRequest {
    plan::Layout layout;        // validated
    std::int64_t steps = 20;
    QString engine;             // loom-train
    QString mpirun = QStringLiteral("mpirun");
    QString workDir;            // the run's folder: its layout file and output
    double progressTimeoutSeconds = 300;  // no frame for this long: the run is stuck
    double cancelGraceSeconds = 10;       // SIGTERM, then SIGKILL after this
};

// Starts the engine under mpirun, follows its telemetry stream, stores steps and events in the run store,
// and reports progress, failure (with its cause in one sentence and the log's tail) and cancellation.
// The job runs in its own process group, so cancel reaches every rank: SIGTERM first (ranks finish their
// step and stop), SIGKILL after the grace period; nothing is left behind.
class RunController : public QObject {
    Q_OBJECT
public:
    explicit RunController(profiles::RunStore* store, QObject* parent = nullptr);
    ~RunController() override;

    // Returns the run's id in the store; 0 when nothing could start (finished() has been emitted then).
    qint64 start(const LaunchRequest& request);
    void cancel();
    bool isRunning() const;
    QStringList command() const { return m_command; }

    // The sentence for a failed run's log: "rank 2 died (signal 9 on node vm)", or nothing recognised.
    static QString causeFromLog(const QString& log);

signals:
    void stepFinished(const loom::profiles::StepRecord& step, qint64 totalSteps);
    void eventsArrived(qint64 count);
    // state: finished, failed or cancelled.
    void finished(const QString& state, const QString& cause, const QString& logTail);

private:
    void readOutput();
    void processFinished(int exitCode, QProcess::ExitStatus status);
    void checkProgress();
    void signalJob(int signal);
    void signalRanks(int signal);
    void end(const QString& state, const QString& cause);
    void handleFrame(const trace::Frame& frame);

    profiles::RunStore* m_store;
    std::unique_ptr<QProcess> m_process;
    trace::StreamReader m_reader;
    QString m_tail;  // the last output, for failure reports
    QStringList m_command;
    qint64 m_run = 0;
    qint64 m_steps = 0;
    bool m_cancelling = false;
    bool m_ended = false;
    bool m_sawEnd = false;
    bool m_progressTimedOut = false;
    bool m_storeProblem = false;
    qint64 m_pgid = 0;
    LaunchRequest m_request;
    QElapsedTimer m_sinceFrame;
    QTimer m_watchdog;
};

}  // namespace loom::launcher
