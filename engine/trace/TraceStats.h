#pragma once

#include "engine/trace/TraceEvent.h"

#include <cstdint>
#include <string>
#include <vector>

namespace loom::trace {

// What the timeline shows as numbers, computed from events alone: the same code for measured and simulated
// runs. No MPI, no Qt.
struct StatsContext {
    std::int64_t pp = 1, vpp = 1, microBatches = 1;
    bool interleaved = false;
    // The schedule's bubble in closed form when set (≥ 0; the zero-bubble schedules, from plan::predict);
    // else (p-1)/(v·m+p-1).
    double bubbleTheory = -1;
    std::int64_t tokensPerStep = 0;
    // What each event's `group` is (from the trace's group names or the stream's groups frame). With it,
    // tensor- and pipeline-parallel collectives count as blocking: the compute thread waits in them, so the
    // compute event around them is not overlapping them. Without it only send / recv count as blocking.
    std::vector<GroupInfo> groups;
    // FLOPs of one step (plan::stepFlops: model and hardware), the devices that ran it and one device's
    // peak TFLOP/s at the run's precision; 0 when unknown (the figures below stay 0).
    double modelFlopsPerStep = 0, hardwareFlopsPerStep = 0;
    std::int64_t devices = 0;
    double peakTflops = 0;
};

// Throughput per device from the FLOPs of a step and its time: TFLOP/s of model FLOPs and MFU (which move
// with tokens/s), TFLOP/s of hardware FLOPs and HFU (which count recomputation too). One computation for
// the planner's predictions, the measured runs' statistics and the run view.
struct Throughput {
    double tflopsPerDevice = 0, mfu = 0; // model FLOPs
    double hardwareTflopsPerDevice = 0, hfu = 0; // hardware FLOPs
};
Throughput throughput(
    double modelFlopsPerStep, double hardwareFlopsPerStep, double stepSeconds, std::int64_t devices, double peakTflops);

struct StageStats {
    std::int32_t stage = 0; // pipeline rank
    double bubbleFraction = 0; // idle ÷ the pipeline phase of the step, mean over the stage's ranks and steps
    double bubbleTheory = 0; // (p-1)/(m+p-1) for GPipe and 1F1B, (p-1)/(v·m+p-1) interleaved
    double busySeconds = 0; // compute time a step, mean over the stage's ranks and steps
};

struct CollectiveStats {
    std::string kind, algorithm;
    std::int64_t count = 0;
    std::uint64_t bytes = 0;
    double seconds = 0;
    double algbwGBs = 0; // bytes / time (nccl-tests)
    double busbwGBs = 0; // algbw × 2(n-1)/n (all-reduce), (n-1)/n (gather, scatter), 1 (others)
};

struct TraceStats {
    std::int32_t ranks = 0;
    std::int32_t steps = 0;
    double stepSeconds = 0; // mean, first step left out when there are several
    double tokensPerSecond = 0;
    double overlap = 0; // compute time during communication ÷ communication time
    Throughput flops; // from the context's FLOPs and the mean step; zero without them
    std::vector<StageStats> stages;
    // The bottleneck is the busiest stage (most compute a step): its idle share is the pipeline bubble the
    // step pays; the other stages idle longer only because they have less work. Load imbalance is that lack,
    // 1 − mean busy ÷ the bottleneck's busy (0 when the stages carry equal work). -1 / 0 without stages.
    std::int32_t bottleneckStage = -1;
    double bottleneckBubble = 0;
    double loadImbalance = 0;
    std::vector<CollectiveStats> collectives;
};

TraceStats computeStats(const std::vector<TraceEvent>& events, const StatsContext& context);

// Reads a Chrome trace written by writeChromeTrace (or one like it). Events keep their args; `otherData`
// gets the trace's "otherData" object as JSON text. Throws std::runtime_error with a message for text that
// is not such a trace.
// `groups`, when given, receives the groups named by the events' `group_name` args (kind from the name's
// first word: TP, PP, DP).
// Events with a ts or dur beyond 9e15 µs, a negative dur, a pid outside 0..2^31-1, mistyped args or JSON
// nested deeper than kMaxJsonDepth are refused with a message naming the event and field.
std::vector<TraceEvent> readChromeTrace(
    const std::string& text, std::string* otherData = nullptr, std::vector<GroupInfo>* groups = nullptr);
// The same, streamed from a file: a trace of any size needs memory for its events only, not its text.
std::vector<TraceEvent> readChromeTraceFile(
    const std::string& path, std::string* otherData = nullptr, std::vector<GroupInfo>* groups = nullptr);

} // namespace loom::trace
