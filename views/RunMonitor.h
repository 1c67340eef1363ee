#pragma once

#include "engine/plan/CostModel.h"
#include "engine/plan/Layout.h"
#include "engine/trace/BandwidthSeries.h"
#include "engine/trace/TraceStats.h"
#include "profiles/RunStore.h"
#include "views/OpenedRun.h"
#include "views/TimelineModel.h"

#include <QObject>

#include <memory>
#include <optional>

namespace loom::launcher {
class RunController;
}

namespace loom::views {

// One run as the workbench sees it, live or from history: its layout and prediction, per-step metrics, the
// timeline of every rank's events, and the statistics computed from them (engine/trace, the same code as
// `loom trace stats`). Starting a run goes through the launcher's RunController (mpirun here, ssh or
// Slurm as the layout's cluster says); everything arrives by signals, so the window never waits. A stored
// run opened in the background is read and computed on a worker (openRun) and handed over finished.
class RunMonitor : public QObject {
    Q_OBJECT
public:
    // `store` holds the runs; it must outlive the monitor.
    explicit RunMonitor(profiles::Store* store, QObject* parent = nullptr);
    ~RunMonitor() override;

    // Launches `layout` for `steps` steps; returns the run's id, or 0 with the reason in `error`. A launch the
    // launcher refuses is still recorded (failed): started() and then finished() have been emitted by then.
    qint64 start(const plan::Layout& layout, qint64 steps, QString* error);
    void cancel();
    bool running() const;
    // Shows a stored run (finished or not); false with the reason when it cannot be read.
    bool open(qint64 runId, QString* error);
    // The same on a worker thread with its own database connection, for runs of millions of events: the
    // worker reads the run and also predicts its layout, builds the timeline's index and computes the
    // statistics (openRun), so the window keeps working while they load; reset() (or openFailed()) follows.
    void openInBackground(qint64 runId);
    bool loading() const { return m_loading; }
    // The thread that read and computed the shown stored run (the caller's for open()); null for a live run.
    const QThread* openedOn() const { return m_openedOn; }
    // The thread that computed the statistics shown (a worker, but for open()); null before any.
    const QThread* statsOn() const { return m_statsOn; }
    // Whether the statistics of a live run are being recomputed on a worker (statsChanged() follows).
    bool statsPending() const { return m_statsRunning; }

    qint64 runId() const { return m_run; }
    profiles::Store* store() const { return m_store; }
    qint64 totalSteps() const { return m_total; }
    const plan::Layout& layout() const { return m_layout; }
    const std::optional<plan::Prediction>& prediction() const { return m_prediction; }
    const std::vector<profiles::StepRecord>& steps() const { return m_steps; }
    TimelineModel* timeline() const { return m_timeline; }
    const trace::TraceStats& stats() const { return m_stats; }
    // Where the shown run is (meaningful once runId() > 0).
    profiles::RunState state() const { return m_state; }
    QString cause() const { return m_cause; }
    QString logTail() const { return m_log; }
    // The engine program used for runs (launcher::defaultEnginePath: $LOOM_TRAIN, beside loom, PATH).
    static QString enginePath();

    // Per step: bus bandwidth (GB/s) of each kind of collective ("TP all-reduce", "DP all-reduce", "PP
    // send", ...) and bytes per second over each link class ("intra-node", "inter-node"), computed by
    // engine/trace's BandwidthSeries as events arrive.
    using BandwidthPoint = trace::BandwidthPoint;
    const std::vector<BandwidthPoint>& bandwidth() const { return m_bandwidth.points(); }

signals:
    void started(qint64 runId);
    void stepAdded(const loom::profiles::StepRecord& step, qint64 totalSteps);
    void eventsAdded(qint64 count);
    void statsChanged();
    void finished(loom::profiles::RunState state, const QString& cause, const QString& logTail);
    // The monitor now shows another run (start or open): views reset.
    void reset();
    void openFailed(const QString& why);
    // While the run waits or runs elsewhere: "Slurm job 42 is PENDING (Resources)", a job that can never start.
    void remoteStatus(const QString& text);

private:
    // Why no run can be opened now, or nothing.
    QString whyNotOpen(qint64 runId) const;
    void show(qint64 runId, OpenedRun opened);
    void clear();
    void addEvents(const std::vector<trace::TraceEvent>& events);
    void updateStats();
    void computeStatsInBackground();
    void setLayout(const plan::Layout& layout);

    profiles::Store* m_store;
    std::unique_ptr<profiles::RunStore> m_runs;
    std::unique_ptr<launcher::RunController> m_controller;
    TimelineModel* m_timeline;
    plan::Layout m_layout;
    std::optional<plan::Prediction> m_prediction;
    std::vector<profiles::StepRecord> m_steps;
    trace::BandwidthSeries m_bandwidth;
    trace::TraceStats m_stats;
    std::size_t m_statsEvents = 0; // the events the statistics were last computed over
    qint64 m_run = 0, m_total = 0;
    bool m_loading = false;
    const QThread* m_openedOn = nullptr;
    const QThread* m_statsOn = nullptr;
    bool m_statsRunning = false, m_statsAgain = false; // a worker computes them; the events grew since
    quint64 m_generation = 0; // counts clear()s: statistics of a run no longer shown are dropped
    bool m_starting = false, m_endedWhileStarting = false; // inside start(); the run ended there
    profiles::RunState m_state = profiles::RunState::Running;
    QString m_cause, m_log;
};

} // namespace loom::views
