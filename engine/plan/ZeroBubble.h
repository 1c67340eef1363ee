#pragma once

#include "engine/plan/Schedule.h"

#include <cstdint>
#include <vector>

namespace loom::plan {

// The largest pipeline whose lists are built from the op times: 3·m·(virtual stages)·pp, ops times ranks
// (ZB-V at pp 16 with 80 micro-batches, ZB-H1 at pp 32 with 80). Beyond it the unit-time lists.
inline constexpr double kTimedWork = 250000;
// Up to this size (3·m·2p·pp: pp 8 with 64 micro-batches, pp 4 with 250) ZB-V's lists are also built with
// the cap keeping room for the way back of fewer of the micro-batches in the V (ZeroBubble.cpp).
inline constexpr double kWideWork = 25000;

// The per-rank op lists of the schedules that split each backward into B (input gradients) and W
// (weight gradients); Schedule.h describes each. Preconditions: pp >= 1, microBatches >= 1; DualPipe also
// microBatches >= 2·pp. `costs`: the op times ZB-H1, ZB-H2 and ZB-V are built from (unit times when empty or
// not one per virtual stage, or not finite and non-negative with some positive, or beyond kTimedWork).
std::vector<std::vector<PipelineOp>> zeroBubbleOps(
    ScheduleKind kind, std::int64_t pp, std::int64_t microBatches, const ScheduleCosts& costs = {});
std::vector<std::vector<PipelineOp>> dualPipeOps(std::int64_t pp, std::int64_t microBatches);

} // namespace loom::plan
