#pragma once

#include "engine/trace/TraceEvent.h"
#include "profiles/RunState.h"
#include "profiles/Store.h"

#include <QString>

#include <map>
#include <memory>
#include <optional>
#include <vector>

struct sqlite3_stmt;

namespace loom::profiles {

// The bulk insert of trace events (RunStore::addEvents, and the plain C-API reference in
// bench_runstore): the statement, and the binding of one event as one of its rows.
extern const char* const kInsertEventSql;
void bindEventRow(sqlite3_stmt* statement, qint64 run, const trace::TraceEvent& e);

struct RunRecord {
    qint64 id = 0;
    QString name;
    QString layoutJson;
    QString cluster;
    QString command;
    QString startedAt, endedAt;
    RunState state = RunState::Running;
    QString exitCause; // one sentence when not finished
    qint64 steps = 0;
};

struct CheckpointRecord {
    qint64 step = 0;
    QString path; // the checkpoint's folder, as the engine saw it (on the cluster for remote runs)
};

// One step as the stream's step frame carries it (trace::StepFrame).
struct StepRecord {
    qint64 step = 0;
    double loss = 0, tokensPerSecond = 0, stepTimeSeconds = 0, gradNorm = 0, lr = 0;
    double flopsPerSecond = 0, hardwareFlopsPerSecond = 0; // model and hardware FLOPs (plan::stepFlops) per second
    std::vector<qint64> memoryHighWaterBytes; // each rank's resident high-water mark; empty when not measured

    // The largest rank's high-water mark in bytes; 0 when not measured.
    qint64 peakMemoryBytes() const;
};

// A step's loss as people read it: "2.2500" (4 decimals), or "diverged (null)" when the engine reported no
// finite loss (NaN or infinity; the stream and the store keep it as null, never as 0).
QString lossText(double loss);

// Runs, their per-step metrics and trace events, in Loom's database (Store::kSchemaVersion). Each write is one
// transaction, so a Loom killed mid-run leaves every stored step readable; markInterrupted() turns runs
// left "running" into "interrupted" at the next start. Throws StoreError on database failures.
class RunStore {
public:
    explicit RunStore(Store& store)
        : m_store(store)
    {
    }

    qint64 startRun(const QString& name, const QString& layoutJson, const QString& cluster, const QString& command);
    void addStep(qint64 run, const StepRecord& step);
    // Bulk insert in one transaction (a million events take a few seconds).
    void addEvents(qint64 run, const std::vector<trace::TraceEvent>& events);
    void addCheckpoint(qint64 run, qint64 step, const QString& path);
    // The command as finally known (a Slurm job's id arrives after the run is recorded).
    void setCommand(qint64 run, const QString& command);
    void finishRun(qint64 run, RunState state, const QString& exitCause);
    // Runs still "running" whose owner is provably gone become "interrupted"; live runs of another Loom are
    // left alone. The owner is asked through the run's lock (RunLock: gone once no process holds it, in
    // whatever PID namespace); runs without a lock file (an older Loom) through their host, pid and its
    // start time. Returns how many.
    int markInterrupted();

    std::vector<RunRecord> runs() const;
    std::optional<RunRecord> run(qint64 id) const;
    std::vector<StepRecord> steps(qint64 run) const;
    // Each run's last stored step (step, loss and tokens/s only), by run id, in one query: the history's
    // columns, without reading every step of every run.
    std::map<qint64, StepRecord> lastSteps() const;
    std::vector<trace::TraceEvent> events(qint64 run) const;
    std::vector<CheckpointRecord> checkpoints(qint64 run) const;
    bool removeRun(qint64 id);

private:
    Store& m_store;
    // The lock each run this RunStore started holds until finishRun (RunLock.h): shared, so a copy of
    // this RunStore does not release it twice.
    std::map<qint64, std::shared_ptr<class RunLock>> m_locks;
};

} // namespace loom::profiles
