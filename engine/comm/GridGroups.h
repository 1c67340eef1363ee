#pragma once

#include "engine/plan/RankGrid.h"
#include "engine/trace/TraceEvent.h"

#include <string>

namespace loom::comm {

// The trace's kind of a grid group.
trace::GroupKind traceGroupKind(plan::GroupKind kind);
// The name every backend gives rank `rank`'s group of `kind`: "TP group of pp=0 dp=1", "PP group of tp=0
// dp=1", "DP group of tp=0 pp=1" (the trace and the run monitor read the kind from the first word).
std::string gridGroupName(const plan::RankGrid& grid, plan::GroupKind kind, std::int64_t rank);
// The node of each member of rank `rank`'s group of `kind` (from the layout's placement).
std::vector<int> gridGroupNodes(const plan::RankGrid& grid, plan::GroupKind kind, std::int64_t rank);
std::vector<int> gridWorldNodes(const plan::RankGrid& grid);

} // namespace loom::comm
