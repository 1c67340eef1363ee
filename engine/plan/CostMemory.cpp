// Memory per pipeline rank: parameters, gradients and optimizer state under ZeRO, activations at the
// schedule's peak, and what loom-train holds on CPU ranks.
#include "engine/plan/CostModelDetail.h"

#include "engine/plan/ExpertGroups.h"
#include "engine/plan/Formulas.h"
#include "engine/plan/MemoryTraffic.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

namespace loom::plan::cost {

// The clipping norm reads the gradients; AdamW reads weights, gradients and both moments and writes three of
// them: ~32 bytes a parameter.
double optimizerBytesOf(const Layout& l, const Costs& c, std::int64_t r)
{
    return paramsOfRank(l, c, r) * 32.0 / (l.memory.zero >= 1 ? double(c.d) : 1.0);
}

namespace {

// What loom-train holds on CPU ranks (processes sharing a node's memory) beyond the textbook terms,
// calibrated against getrusage's ru_maxrss (docs/planner.md, "Memory on CPU ranks"): its weight-decay mask
// (one byte per parameter) and, with dp > 1, the all-reduce's staging of the largest bucket (a whole copy
// for the library's all-reduce, one ring segment of 1/dp for Loom's algorithms). A bucket is at least
// bucket_mb and at least the largest tensor (the token embedding for GPT-2).
double cpuEngineBytes(const Layout& l, const Costs& c, double params)
{
    double bytes = params;
    if (c.d > 1) {
        const ModelSpec& m = l.model;
        const double largest
            = 4.0 * std::max(double(m.vocab) * double(m.hidden), double(m.ffnHidden) * double(m.hidden)) / double(c.t);
        const double bucket = std::max(l.comm.bucketMb * double(1 << 20), largest);
        bytes += l.comm.allreduce == AllreduceAlgorithm::Library ? bucket : bucket / double(c.d);
    }
    return bytes;
}

// Error feedback's residuals (engine/comm ErrorFeedback): one of the rank's whole gradient (what encoding its
// input lost) and, for the two-phase scheme, one of the 1/dp segment it reduces; top-k's sparse all-gather has
// no second phase. Each is kept in the width the gradients are reduced in (loom-train: fp32).
double residualBytes(const Layout& l, const Costs& c, double params)
{
    if (c.d <= 1 || !l.comm.dpCodec.lossy() || !l.comm.errorFeedback)
        return 0;
    const double width = gradientBytesPerValue(l.precision, l.optimizer);
    const bool twoPhase = l.comm.dpCodec.kind != Codec::Kind::TopK;
    return params * width * (1.0 + (twoPhase ? 1.0 / double(c.d) : 0.0));
}

// The op lists of a zero-bubble schedule with the layout's op times (the planner's replay builds the same),
// built once per (kind, p, v, m, times) on this thread: `plan search` estimates thousands of layouts, many
// of which share them, and building one runs a list scheduler.
const Schedule& cachedSchedule(
    ScheduleKind kind, std::int64_t p, std::int64_t v, std::int64_t m, const ScheduleCosts& costs)
{
    using Key = std::tuple<ScheduleKind, std::int64_t, std::int64_t, std::int64_t, std::vector<double>>;
    thread_local std::map<Key, Schedule> cache;
    if (cache.size() > 256)
        cache.clear();
    std::vector<double> times { costs.transfer };
    for (const OpTimes& t : costs.stage)
        times.insert(times.end(), { t.forward, t.backward, t.weight });
    Key key { kind, p, v, m, std::move(times) };
    auto it = cache.find(key);
    if (it == cache.end())
        it = cache.emplace(std::move(key), Schedule(kind, p, v, m, 0, costs)).first;
    return it->second;
}

} // namespace

double layersOfRank(const Costs& c, std::int64_t r)
{
    double layers = 0;
    for (std::int64_t ch = 0; ch < c.v; ++ch)
        layers += double(c.ranges[static_cast<std::size_t>(stageOfChunk(c.kind, c.p, r, ch))].size());
    return layers;
}

// Layer-micro-batches pipeline rank r holds at its schedule's first peak, in closed form (what
// Schedule::peakInFlight finds by replaying, without the replay): GPipe all m forwards, 1F1B min(p − r, m),
// interleaved its warm-up of (p − r − 1)·2 + (v − 1)·N forwards and one more, run through the chunks in
// groups of N micro-batches, each weighing its chunk's layers.
double heldLayersAtFirstPeak(const Layout& l, const Costs& c, std::int64_t r, std::int64_t m)
{
    const auto& par = l.parallel;
    const std::int64_t p = c.p, v = c.v;
    if (splitsBackward(par.schedule)) {
        // The forwards' activations from F to B and W's copies from B to W, replayed over the schedule's first
        // 4p micro-batches (its warm-up and steady state hold the peak; the ops are few).
        const std::int64_t sample = std::min(m, 4 * p);
        if (par.schedule == ScheduleKind::DualPipe && sample < 2 * p) // not a valid layout: 1F1B's count
            return double(std::min(p, m)) * layersOfRank(c, r);
        std::vector<double> held, deferred;
        for (std::int64_t ch = 0; ch < v; ++ch) {
            const StageCost& sc = c.stage[static_cast<std::size_t>(stageOfChunk(par.schedule, p, r, ch))];
            held.push_back(sc.layers);
            deferred.push_back(sc.deferred);
        }
        return cachedSchedule(par.schedule, p, v, sample, scheduleCostsOf(c.stage, c.p2p))
            .peakInFlight(r, held, deferred);
    }
    if (par.schedule != ScheduleKind::Interleaved) {
        const std::int64_t held = par.schedule == ScheduleKind::GPipe ? m : std::min(p - r, m);
        return double(held) * layersOfRank(c, r);
    }
    const std::int64_t n = std::min(par.group(), m);
    const std::int64_t inFlight = m == p ? m * v : std::min(m * v, (p - r - 1) * 2 + (v - 1) * n + 1);
    const std::int64_t groups = inFlight / n, rest = inFlight % n;
    double layers = 0;
    for (std::int64_t j = 0; j < v; ++j) {
        const std::int64_t count = (groups / v + (j < groups % v ? 1 : 0)) * n + (j == groups % v ? rest : 0);
        layers += double(std::min(count, m)) * double(c.ranges[static_cast<std::size_t>(j * p + r)].size());
    }
    return layers;
}

// Memory of pipeline rank r holding `heldLayers` layer-micro-batches of activations at its peak (its in-flight
// chunk-micro-batches, each weighing its chunk's layers).
double heldLayerBytes(const Layout& l, const Costs& c)
{
    const double width = l.precision != Precision::Fp32 ? 1.0 : 2.0;
    // Context parallelism keeps s/cp of each sequence's activations (and s/cp rows of any scores) per rank.
    return layerActivationBytes(
               l.model, c.b, c.t, l.parallel.sp, l.memory.attention, l.memory.recompute, l.memory.efficientNorm)
        * width / double(c.cp)
        - fp8ActivationSavingBytes(l, c.b);
}

double deferredLayersOfVirtualStage(const Layout& l, const Costs& c, std::int64_t vs)
{
    const double perLayer = heldLayerBytes(l, c);
    if (!splitsBackward(l.parallel.schedule) || perLayer <= 0)
        return 0;
    const ModelSpec& m = l.model;
    const StageRange& range = c.ranges[static_cast<std::size_t>(vs)];
    double floatsPerToken = 0;
    for (std::int64_t layer = range.first; layer <= range.last; ++layer)
        floatsPerToken += deferredWeightFloatsPerToken(m, layer, c.t);
    // The LM head's product: dLogits (the padded vocabulary over t) and the final norm's output (h).
    if (vs == c.virtualStages - 1)
        floatsPerToken += double(m.paddedVocab()) / double(c.t) + double(m.hidden);
    // The products' rows: the micro-batch's tokens of this CP rank (sequence parallelism gathers them whole).
    const double tokens = double(c.b) * c.s / double(c.cp);
    return 4.0 * floatsPerToken * tokens / perLayer; // loom-train's copies are fp32
}

MemoryEstimate memoryOfRank(const Layout& l, const Costs& c, std::int64_t r, double heldLayers)
{
    const ModelSpec& m = l.model;
    const bool mixed = l.precision != Precision::Fp32, full = l.memory.recompute == Recompute::Full;
    const bool sp = l.parallel.sp;
    const Attention attention = l.memory.attention;
    const double width = mixed ? 1.0 : 2.0;
    const double cp = double(c.cp);
    const bool efficientNorm = l.memory.efficientNorm;
    const double perLayerAct = heldLayerBytes(l, c);
    const double fullLayerAct
        = layerActivationBytes(m, c.b, c.t, sp, attention, Recompute::None, efficientNorm) * width / cp;
    const double params = paramsOfRank(l, c, r);
    const ModelStateBytes state = modelStateBytesPerParameter(l.precision, l.optimizer, l.memory.zero, c.d);
    // Experts are replicated over the expert-data-parallel group only (dp/ep ranks): ZeRO shards them there.
    const double experts = m.isMoe() ? expertParamsOfRank(l, c, r) : 0.0;
    const ModelStateBytes expertState
        = modelStateBytesPerParameter(l.precision, l.optimizer, l.memory.zero, expertGrid(l).edp);
    MemoryEstimate mem;
    mem.params = ((params - experts) * state.params + experts * expertState.params) / 1e9;
    mem.grads = ((params - experts) * state.grads + experts * expertState.grads) / 1e9;
    mem.optimizer = ((params - experts) * state.optimizer + experts * expertState.optimizer) / 1e9;
    if (l.memory.zero >= 3 && c.d > 1) // two layers' parameters gathered (one in use, one prefetched) and
                                       // one layer's full gradients before their reduce-scatter
        mem.gathered = 3.0 * double(m.blockParameters()) / double(c.t) * c.actBytes / 1e9;
    if (l.fp8 == Fp8Recipe::Delayed)
        mem.fp8State = layersOfRank(c, r) * fp8ScalingStateBytesPerLayer() / 1e9;
    mem.activations = (heldLayers * perLayerAct + (full ? fullLayerAct : 0.0)) / 1e9;
    if (r == c.p - 1)
        mem.activations += c.T * c.V / double(c.t) * 4.0 / 1e9; // fp32 logits of one micro-batch
    mem.residual = residualBytes(l, c, params) / 1e9;
    mem.reserve = 0.05 * l.cluster.device.memoryGB;
    if (l.cluster.intraNode.kind == LinkKind::Shm)
        mem.reserve += cpuEngineBytes(l, c, params) / 1e9;
    return mem;
}

} // namespace loom::plan::cost

namespace loom::plan {

double optimizerBytes(const Layout& l, std::int64_t r)
{
    const std::int64_t chunks = scheduleChunks(l.parallel.schedule, l.parallel.vpp);
    const cost::Costs c = cost::computeCosts(l, 1, 1, chunks, l.parallel.microBatches());
    return cost::optimizerBytesOf(l, c, r);
}

} // namespace loom::plan
