#pragma once

#include "engine/plan/RankGrid.h"
#include "engine/trace/TraceEvent.h"

#include <string>

namespace loom::comm {

// The name every backend gives rank `rank`'s group of `kind`: "TP group of pp=0 dp=1", "PP group of tp=0
// dp=1", "DP group of tp=0 pp=1" (the trace and the run monitor read the kind from the first word); with
// cp > 1 "CP group of pp=0 dp=1" and, for the gradient group, "DP group over dp·cp of tp=0 pp=1".
std::string gridGroupName(const plan::RankGrid& grid, plan::GroupKind kind, std::int64_t rank);
// The node of each member of rank `rank`'s group of `kind` (from the layout's placement).
std::vector<int> gridGroupNodes(const plan::RankGrid& grid, plan::GroupKind kind, std::int64_t rank);
// The members of the communicator of `kind` that rank `rank` joins: the grid's group, except that Data is
// the gradient group (dp·cp ranks, RankGrid::gradientGroupOf).
std::vector<std::int64_t> gridCommMembers(const plan::RankGrid& grid, plan::GroupKind kind, std::int64_t rank);
std::vector<int> gridWorldNodes(const plan::RankGrid& grid);

} // namespace loom::comm
