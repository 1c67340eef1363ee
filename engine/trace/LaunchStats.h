#pragma once

#include "engine/trace/TraceEvent.h"

#include <cstdint>
#include <vector>

namespace loom::trace {

// One rank's kernel launches in an imported GPU trace, as HTA's kernel launch statistics define them
// (hta/analyzers/cuda_kernel_analysis.py, cuda_kernel_launch_stats): every launch → device-work pair (launchFlows),
// the launch call's duration on the host (HTA's cpu_duration), the device work's (gpu_duration), and the launch
// delay: the device work's start less the launch call's end, as HTA's documentation defines it ("the difference
// between GPU kernel starting and CPU operator ending"). HTA restricts the pairs to cudaLaunchKernel,
// cudaMemcpyAsync and cudaMemsetAsync; Loom keeps no call names and takes every runtime call that launched work.
struct RankLaunchStats {
    std::int32_t rank = -1;
    std::int64_t pairs = 0;
    double meanLaunchNs = 0, meanDeviceNs = 0;
    double meanDelayNs = 0, medianDelayNs = 0;
    std::int64_t maxDelayNs = 0;
};

// One device stream's launch queue, as HTA's queue length (hta/analyzers/trace_counters.py,
// get_queue_length_summary): the work launched on the stream and not yet started, +1 at each launch's start and
// -1 at its device work's start (a launch first where both fall on one nanosecond), summarised like HTA's
// describe(): over the values after each change, their mean and maximum.
struct StreamQueueLength {
    std::int32_t rank = -1, stream = -1;
    std::int64_t changes = 0; // the samples of the series: two per pair
    double meanLength = 0;
    std::int64_t maxLength = 0;
};

struct LaunchStats {
    std::vector<RankLaunchStats> perRank; // ranks with launches only, by rank
    std::vector<StreamQueueLength> queues; // by rank, then stream
};

LaunchStats computeLaunchStats(const std::vector<TraceEvent>& events);

} // namespace loom::trace
