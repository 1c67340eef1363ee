#pragma once

// The cost model's pieces shared by CostModel.cpp (predict, estimate), CostStage.cpp (per-stage compute and
// communication, the end-of-step DP work) and CostMemory.cpp (memory per pipeline rank). Internal to
// engine/plan: nothing outside it includes this.

#include "engine/plan/CostModel.h"
#include "engine/plan/Layout.h"
#include "engine/plan/Simulator.h"

#include <cstdint>
#include <vector>

namespace loom::plan::cost {

// The link a group uses: the inter-node link when it spans nodes, else the node's own.
const LinkSpec& linkOf(const Layout& l, std::int64_t nodesSpanned);

// Everything the replay and the estimate share: per-virtual-stage costs, links and sizes.
struct Costs {
    std::int64_t t, p, d, b, v, mb, virtualStages; // d: the ranks that reduce gradients together, dp·cp
    std::int64_t cp = 1;
    double actBytes, peak, T, h, s, V;
    std::vector<StageCost> stage;
    double p2p = 0;
    std::vector<StageRange> ranges;
    ScheduleKind kind = ScheduleKind::OneFOneB;
};

Costs computeCosts(const Layout& l, std::int64_t tpSpan, std::int64_t ppSpan, std::int64_t chunks,
    std::int64_t microBatches, std::int64_t dpSpan = 1, std::int64_t cpSpan = 1, std::int64_t epSpan = 1);

// Expert parameters of virtual stage vs on one device: its MoE blocks' experts / ep.
double expertParamsOfVirtualStage(const Layout& l, const std::vector<StageRange>& ranges, std::int64_t vs);

// Parameters of virtual stage vs (its layers over t; the embedding on the first, the head on the last).
double paramsOfVirtualStage(const Layout& l, const std::vector<StageRange>& ranges, std::int64_t vs);
// Of those, the embedding (first virtual stage) and the final norm and head (last): FSDP's root unit.
double rootParamsOfVirtualStage(const Layout& l, const std::vector<StageRange>& ranges, std::int64_t vs);
// ZeRO-2/3 inside the ops of virtual stage vs (sc.layers > 0): its gathers and reduce-scatters, the exposed
// part, and on GPU clusters FSDP2's edges and copies (CostSharded.cpp).
void shardedDataParallelCosts(const Layout& l, const Costs& c, std::int64_t vs, double computeF, double computeB,
    std::int64_t dpSpan, StageCost& sc);
// Parameters held by pipeline rank r (its layers over t; embeddings on the first, head on the last).
double paramsOfRank(const Layout& l, const Costs& c, std::int64_t r);
// Expert parameters held by pipeline rank r.
double expertParamsOfRank(const Layout& l, const Costs& c, std::int64_t r);
// The clipping norm reads the gradients; AdamW reads weights, gradients and both moments and writes three of
// them: ~32 bytes a parameter.
double optimizerBytesOf(const Layout& l, const Costs& c, std::int64_t r);
// Layer-micro-batches pipeline rank r holds at its schedule's first peak, in closed form (what
// Schedule::peakInFlight finds by replaying, without the replay): GPipe all m forwards, 1F1B min(p − r, m),
// interleaved its warm-up of (p − r − 1)·2 + (v − 1)·N forwards and one more, run through the chunks in
// groups of N micro-batches, each weighing its chunk's layers. Zero-bubble schedules: a replay of their
// first 4p micro-batches (Schedule::peakInFlight with W's copies, StageCost::deferred).
double heldLayersAtFirstPeak(const Layout& l, const Costs& c, std::int64_t r, std::int64_t m);
// The zero-bubble schedules' bubble as a fraction of the step, in closed form (CostStage.cpp).
double zeroBubbleTheory(ScheduleKind kind, std::int64_t p, std::int64_t m, const Costs& c, std::int64_t r);
// Memory of pipeline rank r holding `heldLayers` layer-micro-batches of activations at its peak (its in-flight
// chunk-micro-batches, each weighing its chunk's layers).
MemoryEstimate memoryOfRank(const Layout& l, const Costs& c, std::int64_t r, double heldLayers);
// The blocks pipeline rank r holds over its chunks.
double layersOfRank(const Costs& c, std::int64_t r);
// Bytes one held layer-micro-batch of activations weighs (the unit of heldLayers and StageCost::layers).
double heldLayerBytes(const Layout& l, const Costs& c);
// Zero-bubble schedules: what one micro-batch's deferred W of virtual stage vs keeps from its B to its W
// (loom-train's fp32 copies of every weight product's X and dY, deferredWeightFloatsPerToken, and the LM
// head's on the last stage), in held layers (StageCost::deferred); 0 for the other schedules.
double deferredLayersOfVirtualStage(const Layout& l, const Costs& c, std::int64_t vs);

// The data-parallel work at the end of a step on a pipeline rank holding `params` parameters: `reduce`, the
// gradients' all-reduce (ZeRO 0 and 1), which may start with the last backward, and `after`, ZeRO-2's
// all-gather of the updated 16-bit parameters after the optimizer. ZeRO-2 and 3 reduce-scatter gradients
// inside the backward ops instead, and ZeRO-3 gathers parameters when a layer needs them.
struct EndOfStep {
    double reduce = 0, after = 0;
    bool gatherOverlappable = false; // `after` may hide behind the next step's first forward
};

// With overlap_param_gather the parameter all-gather runs bucket by bucket ahead of the next step's first
// forward on the rank: only what outlasts that forward is exposed.
double exposedAfter(const EndOfStep& e, double firstForward);
EndOfStep endOfStep(
    const Layout& l, double params, const LinkSpec& link, std::int64_t nodesSpanned, double expertParams = 0);

} // namespace loom::plan::cost
