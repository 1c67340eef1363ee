#pragma once

#include "engine/trace/TraceEvent.h"

#include <QList>
#include <QString>
#include <QStringList>

#include <cstdint>

namespace loom::launcher {

// Empty when `e` can belong to a run of `world` ranks and `steps` steps; else what is wrong with it ("rank
// -5 is outside the run's 2 ranks"). The launcher drops a frame holding such an event instead of storing
// what `loom runs export` would write into a trace that `loom trace stats` refuses.
QString eventProblem(const trace::TraceEvent& e, std::int64_t world, std::int64_t steps);

// The processes whose parent is `parent`, from /proc (a gloo layout's ranks are Loom's own children).
QList<qint64> childProcesses(qint64 parent);

// "rank 1 (pid 4242)" for each of `pids` that is a stopped rank (SIGSTOP, a debugger), from /proc: its
// state and its rank's variable (LOOM_RANK, OMPI_COMM_WORLD_RANK or PMIX_RANK).
QStringList stoppedRanks(const QList<qint64>& pids);

} // namespace loom::launcher
