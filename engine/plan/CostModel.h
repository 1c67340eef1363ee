#pragma once

#include "engine/plan/Flops.h"
#include "engine/plan/Formulas.h"
#include "engine/plan/Layout.h"
#include "engine/trace/TraceEvent.h"
#include "engine/trace/TraceStats.h"

#include <cstdint>
#include <string>
#include <vector>

namespace loom::plan {

// Memory per device, in GB (10^9 bytes).
struct MemoryEstimate {
    double params = 0, grads = 0, optimizer = 0, activations = 0, reserve = 0;
    double gathered = 0; // ZeRO-3: the parameters of the layers in use, gathered from the DP group
    // FP8 delayed scaling: Transformer Engine's amax history (and scales) of every FP8 tensor of the rank's
    // linear layers.
    double fp8State = 0;
    // A lossy dp codec with error feedback: what compression lost, kept per rank to add back next step.
    double residual = 0;
    double total() const { return params + grads + optimizer + activations + reserve + gathered + fp8State + residual; }
    double modelStates() const { return params + grads + optimizer; }
    // The one rule of fitting, for the prediction's `fits` and for each device on the map alike.
    bool fitsIn(double capacityGB) const { return total() <= capacityGB; }
};

// One collective of the step as the model prices it: which group, what it moves, and (on NCCL) the algorithm
// NCCL's tuner would pick (CollectiveCost.h).
struct CollectiveSummary {
    std::string group; // "tp" (one activation all-reduce), "dp" (the gradients of pipeline rank 0)
    std::string collective; // "all_reduce", "reduce_scatter"
    std::string algorithm; // "ring", "tree", "nvls"; on Loom's own engine "alpha_beta"
    double bytes = 0, seconds = 0, busBandwidthGBs = 0;
    std::int64_t ranks = 1, nodes = 1;
};

// What a layout will cost, predicted before anything runs.
struct Prediction {
    double stepTime = 0; // seconds per optimizer step
    double tokensPerSecond = 0;
    double tflopsPerGpu = 0; // model FLOPs (plan::stepFlops) / (step time · GPUs): moves with tokens/s
    double mfu = 0; // tflopsPerGpu / the device's peak at the layout's precision
    // The same with hardware FLOPs (recomputation counted: Narayanan et al.'s "achieved TFLOP/s"); equal to
    // the model figures when memory.recompute is none.
    double hardwareTflopsPerGpu = 0, hfu = 0;
    double bubbleFraction = 0; // pipeline idle time / step time, on the busiest stage
    double bubbleTheory = 0; // the closed form, as a fraction of the step: (p-1)/(m+p-1), or (p-1)/(v·m+p-1)
    // The bottleneck is the busiest pipeline rank (most compute and blocking communication a step). Its idle
    // time is the bubble the pipeline itself costs; the critical stage (whose step ends last, `bubble` above) may
    // idle longer only for lack of work. Load imbalance is that lack: 1 − mean busy ÷ the bottleneck's busy.
    std::int64_t bottleneckStage = 0;
    double bottleneckBubble = 0, bottleneckBubbleFraction = 0; // seconds, and ÷ step time
    double loadImbalance = 0;
    // The step split into parts on the critical stage (they add up to stepTime).
    double compute = 0, tpExposed = 0, ppExposed = 0, dpExposed = 0, bubble = 0, optimizer = 0;
    double cpExposed = 0; // ring attention's K/V exchange that the attention compute did not hide (cp > 1)
    double epExposed = 0; // mixture of experts: the all-to-all of dispatch and combine (part of the step too)
    // Of dpExposed, on GPU clusters with ZeRO-2/3 on one stage (FSDP2): the first gathers and last
    // reduce-scatters of each op that no compute hides, and the copies into and out of the flat buffers.
    double shardEdges = 0, shardCopies = 0;
    // Mixture of experts: parameters in all and those a token goes through (top_k of the experts).
    double totalParameters = 0, activeParameters = 0;
    MemoryEstimate memory; // the most loaded device
    std::vector<MemoryEstimate> memoryPerStage; // per pipeline rank (all its chunks), the same for every tp, dp
    double memoryCapacityGB = 0;
    bool fits = true;
    double modelFlops = 0; // per step, whole model (plan::stepFlops: no recomputation)
    double hardwareFlops = 0; // per step, whole model, with what memory.recompute computes again
    std::vector<std::string> notes;
    std::vector<CollectiveSummary> collectives; // the TP and DP collectives, one of each kind
    // The simulated timeline: compute and communication events of one representative rank per pipeline
    // stage (tp = 0, dp = 0), source = simulated.
    std::vector<trace::TraceEvent> events;
    // Long steps: the pipeline was extrapolated from shorter replays (Simulator.h), and the events cover the
    // first eventMicroBatches micro-batches only.
    bool extrapolated = false;
    std::int64_t eventMicroBatches = 0;
};

// What engine/trace's statistics need to know of the layout a trace ran: pp, vpp, micro-batches per
// pipeline, the schedule and the tokens of a step (the closed-form bubble and tokens/s).
trace::StatsContext statsContext(const Layout& layout);
// The fraction of peak a device reaches on the GEMMs of a layer whose thinnest matrix dimension is `width`
// (h/t) with `rows` = tokens per micro-batch: max · width/(width + half_width) · rows/(rows + half_rows).
double gemmEfficiency(const DeviceSpec& device, double width, double rows);

// The compute of one micro-batch through one virtual stage, split by what limits it: `flops` are the GEMM
// FLOPs divided by the efficiency curve's shape w/(w + half_width) · r/(r + half_rows), and `bytes` what the
// memory-bound work moves, so that seconds = flops / (peak · max) + bytes / memory bandwidth. Linear in
// 1/(peak · max) and 1/bandwidth: what `loom plan calibrate` fits.
struct ComputeWork {
    double flops = 0, bytes = 0;
    double seconds(const DeviceSpec& device, Precision precision) const;
};
struct StageWork {
    ComputeWork forward, backward; // without TP communication
};
// Per virtual stage (chunk · pp + pipeline rank), `chunks` virtual stages per pipeline rank.
std::vector<StageWork> stageWork(const Layout& layout, std::int64_t chunks);
// Bytes the optimizer step moves on pipeline rank r (clipping norm and AdamW: ~32 bytes a parameter, divided by dp with
// ZeRO-1).
double optimizerBytes(const Layout& layout, std::int64_t pipelineRank);

// Predicts a valid layout: compute from FLOPs and the efficiency curve, communication from the α-β model
// of the links each group crosses, the pipeline from a replay of the layout's Schedule, memory from the
// parameters, optimizer state and activations in flight. Deterministic and fast (no per-rank loops over
// large grids: one representative rank per pipeline stage).
Prediction predict(const Layout& layout);
// The same without the timeline (events stay empty): what search and validation need.
Prediction predict(const Layout& layout, bool withEvents);
// A quick estimate for ranking many layouts: the same per-stage costs and memory, with the pipeline from the
// closed form ((p-1)/v stage-times of bubble) instead of a replay, and no events. Microseconds per layout.
struct Estimate {
    double stepTime = 0, tokensPerSecond = 0, tflopsPerGpu = 0; // model FLOPs, as Prediction
    double hardwareTflopsPerGpu = 0;
    double compute = 0, tp = 0, pp = 0, bubble = 0, dp = 0;
    double cp = 0; // exposed ring-attention exchange
    double ep = 0; // MoE all-to-all
    double memoryGB = 0;
    bool fits = true;
};
Estimate estimate(const Layout& layout);

// Whether predict() can time the layout's pipeline quickly: a replay of at most a million pipeline operations,
// or an extrapolation from two shorter replays (pipelineSimulatable in Simulator.h).
bool simulatable(const Layout& layout);

} // namespace loom::plan
