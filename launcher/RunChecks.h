#pragma once

#include "engine/trace/TraceEvent.h"

#include <QList>
#include <QString>
#include <QStringList>

#include <cstdint>
#include <vector>

namespace loom::launcher {

// Empty when `e` can belong to a run of `world` ranks and `steps` steps; else what is wrong with it ("rank
// -5 is outside the run's 2 ranks"). The launcher drops a frame holding such an event instead of storing
// what `loom runs export` would write into a trace that `loom trace stats` refuses.
QString eventProblem(const trace::TraceEvent& e, std::int64_t world, std::int64_t steps);

// The events of a stored run that can belong to it (eventProblem), for `loom runs export`: events stored
// by an older Loom, or written into the store by hand, never reach a trace that `loom trace stats` refuses.
// `skipped` counts the others and `firstProblem` says what was wrong with the first of them.
std::vector<trace::TraceEvent> eventsOfTheRun(std::vector<trace::TraceEvent> events, std::int64_t world,
    std::int64_t steps, std::int64_t* skipped, QString* firstProblem);

// A rank's text made fit for a run's cause (one line in the store, the views and the terminal): control
// characters (newlines and tabs too), DEL, the C1 controls and the bidirectional controls become \uXXXX,
// and it is cut to `maxChars` characters ("…" marks the cut).
QString causeText(const QString& text, qsizetype maxChars = 400);

// Who may be named in a run's cause: its ranks 0..ranks-1 and the hosts it runs on (empty: any name that
// is a host name, for Slurm, which chooses the nodes itself).
struct RunWorld {
    std::int64_t ranks = 0;
    QStringList hosts;
    bool knowsRank(std::int64_t rank) const { return rank >= 0 && rank < ranks; }
    bool knowsHost(const QString& host) const;
};

// The sentence for a failed run's log ("rank 2 died (signal 9 on node vm)") from the first line that names
// one of `world`'s ranks (and hosts): a rank's own output claiming to be mpirun ("process rank 7 ... on node
// evil" on a one-rank run) is passed over. Empty when nothing is recognised.
QString causeFromLog(const QString& log, const RunWorld& world);

// What the ranks of a hung run said of their last collectives (loom-train's flight record, printed when a
// rank asked to stop does not), one entry per rank of `world`, at most `maxRanks`: "rank 0: all-reduce #12
// on DP group of tp=0 pp=0, 4096 bytes, running for 301.2 s; ...". Empty when no rank said anything.
QStringList lastCollectives(const QString& log, const RunWorld& world, int maxRanks = 8);

// The processes whose parent is `parent`, from /proc (a gloo layout's ranks are Loom's own children).
QList<qint64> childProcesses(qint64 parent);

// "rank 1 (pid 4242)" for each of `pids` that is a stopped rank (SIGSTOP, a debugger), from /proc: its
// state and its rank's variable (LOOM_RANK, OMPI_COMM_WORLD_RANK or PMIX_RANK).
QStringList stoppedRanks(const QList<qint64>& pids);

} // namespace loom::launcher
