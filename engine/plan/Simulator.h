#pragma once

#include "engine/plan/Schedule.h"
#include "engine/trace/TraceEvent.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace loom::plan {

// Seconds one micro-batch spends in one virtual stage: its compute plus the communication that blocks the
// compute stream (tensor-parallel collectives).
struct StageCost {
    double forward = 0, backward = 0; // seconds per micro-batch, compute and TP communication
    double forwardTp = 0, backwardTp = 0; // of which TP collectives
    double forwardDp = 0, backwardDp = 0; // of which ZeRO-2/3 collectives the compute did not hide
    // For the timeline: the bytes of the op's TP collectives, and the ZeRO collectives' whole duration
    // (all-gather of the parameters; in backward also the gradients' reduce-scatter) and bytes.
    double forwardTpBytes = 0, backwardTpBytes = 0;
    double forwardGather = 0, backwardGather = 0, gatherBytes = 0;
    trace::Algorithm gatherAlgorithm = trace::Algorithm::Library; // what loom-train runs them with
    // Of forwardDp/backwardDp on GPU clusters (FSDP2): the op's first gathers and last reduce-scatters that
    // no compute hides, and the copies into and out of the collectives' flat buffers on the compute stream.
    double forwardShardEdge = 0, backwardShardEdge = 0, forwardShardCopy = 0, backwardShardCopy = 0;
    // Context parallelism: the ring exchange's part the attention did not hide (inside forward/backward),
    // and for the timeline the whole exchange's duration and bytes (it runs beside the compute).
    double forwardCp = 0, backwardCp = 0;
    double forwardCpComm = 0, backwardCpComm = 0, forwardCpBytes = 0, backwardCpBytes = 0;
    // Mixture of experts: the all-to-alls (dispatch and combine) of the op's MoE blocks, which block the
    // compute like the TP collectives (part of forward and backward), and their bytes.
    double forwardEp = 0, backwardEp = 0, forwardEpBytes = 0, backwardEpBytes = 0;
    // The stage's blocks: what one held micro-batch of its activations weighs (0 for an embedding-only chunk).
    double layers = 0;
    // Zero-bubble schedules: of `backward`, the seconds of W (the weight-gradient products), which the
    // replay runs as its own op; B takes the rest.
    double weight = 0;
    // Zero-bubble schedules: what one micro-batch's deferred W keeps from its B to its W (copies of the
    // weight products' inputs and output gradients), in the unit of `layers`.
    double deferred = 0;
};

// The op times the zero-bubble schedules' lists are built from (Schedule.h): per virtual stage F, B (the
// backward less W) and W, as replaySchedule runs them, and the hand-off between ranks.
ScheduleCosts scheduleCostsOf(const std::vector<StageCost>& cost, double transfer);

// What the replay measured on one pipeline rank.
struct RankTimes {
    double busy = 0, tp = 0, end = 0, lastBackwardStart = 0, lastBackwardEnd = 0;
    double dp = 0; // exposed ZeRO-2/3 collectives inside the ops
    double cp = 0; // exposed ring-attention exchange inside the ops
    double ep = 0; // MoE all-to-all inside the ops
};

// How the replay labels the events it records: the global rank of pipeline rank r's representative
// (tp = 0, dp = 0) and the bytes of one point-to-point activation transfer.
struct EventNaming {
    std::function<std::int32_t(std::int64_t pipelineRank)> rankOf;
    std::uint64_t sendBytes = 0;
    std::int32_t tpSize = 1, dpSize = 1;
    std::int32_t cpSize = 1; // ring attention: a send event per op to the next CP rank, tpSize ranks on
    bool sequenceParallel = false; // TP collectives are all-gather + reduce-scatter instead of all-reduce
    std::int32_t epSize = 1; // the expert-parallel group
};

// Replays `schedule` on one representative rank per pipeline stage: each op starts when its rank is free
// and its input has arrived (`transfer` seconds after the op that produced it on another rank; at once on
// the same rank, the V's turn), and lasts its stage's cost. A rank whose input has not arrived runs an
// earlier B's W first where the schedule fills idle time with W (EarlyWeights.h), as the engine does.
// Runs in time linear in the number of ops. When `events` is given, appends one compute event per op and
// one send event per transfer, source = simulated.
std::vector<RankTimes> replaySchedule(const Schedule& schedule, const std::vector<StageCost>& cost, double transfer,
    const EventNaming* naming = nullptr, std::vector<trace::TraceEvent>* events = nullptr);

// The pipeline part of one step, per pipeline rank.
struct PipelineTimes {
    std::vector<RankTimes> withTransfers, noTransfers; // replayed with and without point-to-point time
    std::vector<std::int64_t> peakInFlight; // chunk-micro-batches of activations held at most
    std::vector<double> peakLayersInFlight; // the same peak counted in layers (StageCost::layers)
    std::int64_t microBatches = 0; // m of the step
    // Long schedules are not replayed op by op: two replays of `sampled` and `sampledLonger` micro-batches
    // (both past the warm-up, so the steady state adds the same time per micro-batch; 2p and 4p, or whole
    // micro-batch groups of the interleaved schedule plus its last partial group) are extrapolated linearly
    // to m, which is exact once every rank runs in its steady state.
    bool extrapolated = false;
    std::int64_t sampled = 0, sampledLonger = 0;
    // The replay the events come from: all m micro-batches, or the first `eventMicroBatches` of them when the
    // step would make too many events for a timeline (a trace of millions of events helps nobody).
    std::int64_t eventMicroBatches = 0;
    std::vector<RankTimes> eventTimes;
};

// Replays of more ops than this are extrapolated (see PipelineTimes); a timeline keeps at most
// kMaxEventOps ops' events.
constexpr double kMaxReplayOps = 1e6;
constexpr double kMaxEventOps = 2.5e4;

// Pipeline operations of a full replay: 2·m·v·p.
double pipelineOps(std::int64_t pp, std::int64_t chunks, std::int64_t microBatches);
// Whether the pipeline can be timed within the limits: a full replay of at most kMaxReplayOps ops, or an
// extrapolation from replays of 2p and 4p micro-batches (8·v·p² ops at most kMaxReplayOps: p·√v ≤ 353).
// `group` is the interleaved schedule's micro-batch group (0: pp).
// Why a schedule is not simulatable, in words built from kMaxReplayOps (for validate, plan search and the
// workbench): "more pipeline operations than the planner replays (1,000,000 in one replay, or two shorter
// replays of 2p and 4p micro-batches to extrapolate from)".
std::string replayLimitText();

bool pipelineSimulatable(
    ScheduleKind kind, std::int64_t pp, std::int64_t chunks, std::int64_t microBatches, std::int64_t group = 0);

// Times the pipeline of one step (preconditions as Schedule's, and pipelineSimulatable). `fill`: the
// zero-bubble schedules' weight_fill (EarlyWeights.h).
PipelineTimes simulatePipeline(ScheduleKind kind, std::int64_t pp, std::int64_t chunks, std::int64_t microBatches,
    const std::vector<StageCost>& cost, double transfer, const EventNaming* naming = nullptr,
    std::vector<trace::TraceEvent>* events = nullptr, std::int64_t group = 0, WeightFill fill = kDefaultWeightFill);

} // namespace loom::plan
