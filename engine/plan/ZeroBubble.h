#pragma once

#include "engine/plan/Schedule.h"

#include <cstdint>
#include <vector>

namespace loom::plan {

// The per-rank op lists of the schedules that split each backward into B (input gradients) and W
// (weight gradients); Schedule.h describes each. Preconditions: pp >= 1, microBatches >= 1; DualPipe also
// microBatches >= 2·pp.
std::vector<std::vector<PipelineOp>> zeroBubbleOps(ScheduleKind kind, std::int64_t pp, std::int64_t microBatches);
std::vector<std::vector<PipelineOp>> dualPipeOps(std::int64_t pp, std::int64_t microBatches);

} // namespace loom::plan
