#pragma once

#include "engine/trace/TraceEvent.h"

#include <cstdint>
#include <vector>

namespace loom::trace {

// One training step on the timeline: from the first event of the step on any rank to the last one's end
// (the step row of the timeline, as an NVTX range).
struct StepRange {
    std::int32_t step = -1;
    std::int64_t startNs = 0, endNs = 0;
};

// The steps of the events (those with a step number), in step order.
std::vector<StepRange> stepRanges(const std::vector<TraceEvent>& events);
// The steps overlapping [t0, t1), in step order.
std::vector<StepRange> stepsIn(const std::vector<StepRange>& steps, std::int64_t t0, std::int64_t t1);

} // namespace loom::trace
