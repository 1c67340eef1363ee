#pragma once

#include "engine/trace/TraceEvent.h"

#include <cstdint>
#include <string>
#include <vector>

namespace loom::trace {

// One ProfilerStep#N range of one rank's host, on the trace's clock (nanoseconds).
struct ProfilerStepRange {
    std::int32_t rank = -1;
    std::int32_t step = -1;
    std::int64_t startNs = 0, endNs = 0;
    bool operator==(const ProfilerStepRange&) const = default;
};

// One rank's GPU time as HTA's temporal breakdown and comm-comp overlap define it (hta/analyzers/
// breakdown_analysis.py, communication_analysis.py): over the device work in the window, kernel time is
// the last end less the first start; idle is the part of it no device work covers; compute the part that
// computation kernels cover; non-compute the rest (communication, memory, other device work alone);
// overlap is the time computation and communication kernels both run ÷ the time communication runs.
struct RankDeviceStats {
    std::int32_t rank = -1;
    std::int64_t kernelNs = 0, idleNs = 0, computeNs = 0, nonComputeNs = 0, commNs = 0, overlapNs = 0;
    double idlePct = 0, computePct = 0, nonComputePct = 0;
    double overlapPct = -1; // -1: no communication kernels (HTA: NaN)
    std::vector<std::int32_t> steps; // the steps in the window
};

// HTA's kernel-type breakdown (get_gpu_kernel_breakdown): time when only one type runs, or several
// ("COMPUTATION overlapping COMMUNICATION"), summed over ranks, and its share of the total.
struct KernelTypeTime {
    std::string type;
    std::int64_t ns = 0;
    double pct = 0;
};

struct DeviceStats {
    std::vector<RankDeviceStats> perRank; // ranks with device work only
    std::vector<KernelTypeTime> kernelTypes; // by time, longest first
    bool allSteps = false;
};

// The window is HTA's default: device work launched in the profiler steps but the last of each rank (its
// events' step is their launch's); with `allSteps`, every step. With fewer than two steps on a rank, all
// of its device work (as HTA, which then filters nothing). Device work: events with a stream.
DeviceStats computeDeviceStats(
    const std::vector<TraceEvent>& events, const std::vector<ProfilerStepRange>& steps, bool allSteps);

// The passes of an imported GPU trace as one event each: its forward and backward kernels (events with a
// stream) of one (rank, kind, step, micro-batch, stage, chunk) become one event that starts with the first
// and lasts as long as the kernels keep the device busy (their union), so that what counts a forward or a
// backward (plan calibrate) sees passes, timed by the GPU. Every other event is kept as it is.
std::vector<TraceEvent> foldDevicePasses(const std::vector<TraceEvent>& events);

// Mean length of the ProfilerStep ranges (over ranks and steps, the first step left out when there are
// several, as computeStats does); 0 when none.
double profilerStepSeconds(const std::vector<ProfilerStepRange>& steps);

} // namespace loom::trace
