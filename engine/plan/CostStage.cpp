// Per-virtual-stage compute and communication (TP, ZeRO gathers, ring attention, MoE all-to-all) and the
// data-parallel work at the end of a step: the costs predict() replays and estimate() sums.
#include "engine/plan/CostModelDetail.h"

#include "engine/plan/AllreduceChoice.h"
#include "engine/plan/CollectiveCost.h"
#include "engine/plan/ExpertGroups.h"
#include "engine/plan/MemoryTraffic.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace loom::plan::cost {

// The link a group uses: the inter-node link when it spans nodes, else the node's own.
const LinkSpec& linkOf(const Layout& l, std::int64_t nodesSpanned)
{
    return nodesSpanned > 1 && l.cluster.interNode ? *l.cluster.interNode : l.cluster.intraNode;
}

namespace {

double dpAllReduceSeconds(const Layout& l, double gradBytes, std::int64_t dp, const LinkSpec& link,
    std::int64_t nodesSpanned, trace::Algorithm algorithm)
{
    if (dp <= 1)
        return 0;
    const auto& codec = l.comm.dpCodec;
    const double count = gradBytes / 4.0; // values, whatever their width on the device
    const double beta = link.bandwidthGBs * 1e9, alpha = link.latencyUs * 1e-6;
    const double memBw = l.cluster.device.memoryBandwidthGBs * 1e9;
    using K = Codec::Kind;
    if (codec.kind == K::TopK) { // sparse all-gather: (n-1)·8k bytes in and out per rank
        const double k = std::ceil(codec.topkFraction * count);
        return double(dp - 1) * alpha + double(dp - 1) * 8.0 * k / beta + 3.0 * gradBytes / memBw;
    }
    double ratio = 1.0;
    const double wire = gradBytes / count; // bytes per value as reduced
    switch (codec.kind) {
    case K::Fp16:
    case K::Bf16:
        ratio = std::min(1.0, 2.0 / wire);
        break;
    case K::Int8:
        ratio = (1.0 + 4.0 / double(256)) / wire;
        break;
    case K::Int4:
        ratio = (0.5 + 4.0 / double(256)) / wire;
        break;
    default:
        break;
    }
    const double codecCost = codec.kind == K::None ? 0 : 4.0 * gradBytes / memBw; // encode + decode, twice
    // GPU clusters on NCCL: one ring (or tree) per NIC, as NCCL's tuner picks (CollectiveCost.h); the
    // two-level algorithm and Loom's CPU engine's choices are priced as loom-train runs them (AllreduceChoice.h).
    if (usesNcclModel(l) && algorithm != trace::Algorithm::Hierarchical)
        return collectiveSeconds(l, Collective::AllReduce, gradBytes * ratio, { dp, nodesSpanned }) + codecCost;
    return allreduceSeconds(l, algorithm, gradBytes * ratio, dp, nodesSpanned, link) + codecCost;
}

} // namespace

// Expert parameters of virtual stage vs on one device: its MoE blocks' experts / ep.
double expertParamsOfVirtualStage(const Layout& l, const std::vector<StageRange>& ranges, std::int64_t vs)
{
    const ModelSpec& m = l.model;
    if (!m.isMoe())
        return 0;
    const StageRange& range = ranges[static_cast<std::size_t>(vs)];
    const ExpertGrid g = expertGrid(l); // E/ep experts, each split over expert_tp (1 without the Megatron grid)
    return double(m.moeLayersIn(range.first, range.last)) * double(m.experts * m.expertParameters())
        / double(g.ep * g.etp);
}

// Parameters of virtual stage vs (its layers over t; the embedding on the first, the head on the last).
double paramsOfVirtualStage(const Layout& l, const std::vector<StageRange>& ranges, std::int64_t vs)
{
    const ModelSpec& m = l.model;
    const double t = double(l.parallel.tp);
    const StageRange& range = ranges[static_cast<std::size_t>(vs)];
    double n = double(range.size()) * double(m.blockParameters()) / t;
    if (m.isMoe()) { // everything but the experts split over t; E/ep experts, split over expert_tp (else whole)
        const double moeBlocks = double(m.moeLayersIn(range.first, range.last));
        n += moeBlocks * double(m.moeBlockParameters() - m.experts * m.expertParameters() - m.blockParameters()) / t
            + expertParamsOfVirtualStage(l, ranges, vs);
    }
    return n + rootParamsOfVirtualStage(l, ranges, vs);
}

namespace {

// Ring attention on a stage of `layers` layers: the exposed and the whole exchange per op (StageCost's cp
// fields), from the block time on the CP link and the attention compute that hides it (docs/planner.md).
void ringAttentionCosts(const Layout& l, const Costs& c, const LinkSpec& link, double layers, StageCost& sc)
{
    const ModelSpec& m = l.model;
    const DeviceSpec& dev = l.cluster.device;
    const RingAttentionVolume vol = ringAttentionVolume(m, c.b, c.t, c.cp, c.actBytes);
    const double step = link.latencyUs * 1e-6 + vol.blockBytes / (link.bandwidthGBs * 1e9);
    const double shape = dev.gemmMax > 0 ? gemmEfficiency(dev, c.h / double(c.t), c.T) / dev.gemmMax : 1.0;
    const bool flashKernel = usesFlashKernel(l);
    const double attention = attentionCoreFlops(l)
        / (flashKernel ? c.peak * dev.flashEfficiency : shape * c.peak * dev.gemmMax); // forward, as executed
    const bool flash = l.memory.attention == Attention::Flash;
    const double attentionBackward = (flash ? 2.5 : 2.0) * attention; // flash recomputes the scores
    const double full = l.memory.recompute == Recompute::Full ? 1.0 : 0.0;
    sc.forwardCp = layers * ringExposedForward(c.cp, step, attention);
    sc.backwardCp = layers * (ringExposedBackward(c.cp, step, attentionBackward) + full * sc.forwardCp / layers);
    sc.forwardCpComm = layers * double(vol.forwardBlocks) * step;
    sc.backwardCpComm = layers * (double(vol.backwardBlocks) + full * double(vol.forwardBlocks)) * step;
    sc.forwardCpBytes = layers * vol.forwardBytes();
    sc.backwardCpBytes = layers * (vol.backwardBytes() + full * vol.forwardBytes());
}

} // namespace

Costs computeCosts(const Layout& l, std::int64_t tpSpan, std::int64_t ppSpan, std::int64_t chunks,
    std::int64_t microBatches, std::int64_t dpSpan, std::int64_t cpSpan, std::int64_t epSpan)
{
    Costs c;
    const ModelSpec& m = l.model;
    const auto& par = l.parallel;
    const DeviceSpec& dev = l.cluster.device;
    c.t = par.tp;
    c.p = par.pp;
    c.cp = par.cp;
    c.d = par.dp * par.cp;
    c.b = par.microBatch;
    c.v = chunks;
    c.mb = microBatches;
    c.ranges = l.stageRanges();
    c.kind = par.schedule;
    c.virtualStages = c.p * c.v;
    c.actBytes = l.precision == Precision::Fp32 ? 4.0 : 2.0;
    c.peak = dev.peakTflops(l.precision) * 1e12;
    c.T = double(c.b * m.seqLen / c.cp);
    c.h = double(m.hidden);
    c.s = double(m.seqLen);
    c.V = double(m.paddedVocab());
    const std::int64_t t = c.t;
    const LinkSpec& tpLink = linkOf(l, tpSpan);
    const double tpAllReduce = usesNcclModel(l)
        ? collectiveSeconds(l, Collective::AllReduce, c.T * c.h * c.actBytes, { t, tpSpan })
        : ringAllReduceSeconds(c.T * c.h * c.actBytes, t, tpLink);
    const bool full = l.memory.recompute == Recompute::Full;
    const std::vector<StageWork> work = stageWork(l, chunks);
    c.stage.resize(static_cast<std::size_t>(c.virtualStages));
    for (std::int64_t vs = 0; vs < c.virtualStages; ++vs) {
        const double layers = double(c.ranges[static_cast<std::size_t>(vs)].size());
        const StageWork& w = work[static_cast<std::size_t>(vs)];
        StageCost& sc = c.stage[static_cast<std::size_t>(vs)];
        sc.layers = layers;
        sc.deferred = deferredLayersOfVirtualStage(l, c, vs);
        // Two all-reduces of T·h per layer each way (two more for full recomputation's forward); sequence
        // parallelism turns each into an all-gather and a reduce-scatter of the same bytes and time.
        sc.forwardTp = layers * 2.0 * tpAllReduce;
        sc.backwardTp = layers * (2.0 + (full ? 2.0 : 0.0)) * tpAllReduce;
        if (t > 1) {
            sc.forwardTpBytes = layers * 2.0 * c.T * c.h * c.actBytes;
            sc.backwardTpBytes = layers * (2.0 + (full ? 2.0 : 0.0)) * c.T * c.h * c.actBytes;
        }
        const double computeF = w.forward.seconds(dev, l.precision), computeB = w.backward.seconds(dev, l.precision);
        if (l.comm.tpCommOverlap && t > 1 && layers > 0) {
            // Userbuffers pipeline each TP collective with the GEMM beside it in t chunks: the first chunk
            // waits, the rest hides behind the GEMMs as long as the link keeps up (docs/formulas.md).
            const double gemmF = w.forward.flops / (c.peak * dev.gemmMax),
                         gemmB = w.backward.flops / (c.peak * dev.gemmMax);
            const double fullF = sc.forwardTp, fullB = sc.backwardTp;
            sc.forwardTp = std::max(0.0, fullF - gemmF) + fullF / double(t);
            sc.backwardTp = std::max(0.0, fullB - gemmB) + fullB / double(t);
            sc.forwardTp = std::min(sc.forwardTp, fullF);
            sc.backwardTp = std::min(sc.backwardTp, fullB);
        }
        if (l.memory.zero >= 2 && c.d > 1 && layers > 0)
            shardedDataParallelCosts(l, c, vs, computeF, computeB, dpSpan, sc);
        if (c.cp > 1 && layers > 0)
            ringAttentionCosts(l, c, linkOf(l, cpSpan), layers, sc);
        if (m.isMoe() && par.ep > 1) {
            // Dispatch and combine per MoE block: two all-to-alls forward, two backward (four with full
            // recomputation, which dispatches again).
            const StageRange& range = c.ranges[static_cast<std::size_t>(vs)];
            const double blocks = double(m.moeLayersIn(range.first, range.last));
            const ExpertGrid g = expertGrid(l);
            // Megatron-Core's grid: each rank dispatches its T/tp tokens (sequence parallel), gathered over the
            // expert_tp group first (MoEAlltoAllTokenDispatcher), which one all-gather and, after the experts,
            // one reduce-scatter of those tokens over expert_tp cost (docs/formulas.md).
            const double bytes = g.megatron
                ? moeAllToAllBytes(m, c.b, c.actBytes) / double(c.cp) * double(g.etp) / double(t)
                : moeAllToAllBytes(m, c.b, c.actBytes);
            const double one = allToAllSeconds(bytes, par.ep, linkOf(l, epSpan))
                + (g.etp > 1 ? 2.0 * ringAllGatherSeconds(bytes, g.etp, linkOf(l, tpSpan)) : 0.0);
            sc.forwardEp = blocks * 2.0 * one;
            sc.backwardEp = blocks * (2.0 + (full ? 2.0 : 0.0)) * one;
            sc.forwardEpBytes = blocks * 2.0 * bytes;
            sc.backwardEpBytes = blocks * (2.0 + (full ? 2.0 : 0.0)) * bytes;
        }
        sc.forward = computeF + sc.forwardTp + sc.forwardDp + sc.forwardCp + sc.forwardEp;
        sc.backward = computeB + sc.backwardTp + sc.backwardDp + sc.backwardCp + sc.backwardEp;
        if (splitsBackward(par.schedule) && layers > 0) {
            // W, the weight-gradient products: as many FLOPs as the forward's products with weights (2·P of
            // its 2·P + 4·s·h per layer a token, for P weights), at the GEMMs' rate. B keeps the rest: the
            // input-gradient products, the score products, the memory-bound backwards (norms, activations,
            // softmax, residual adds: the bytes term), the TP and EP collectives. P counts every expert (an
            // upper bound for MoE stages).
            const double P = paramsOfVirtualStage(l, c.ranges, vs); // this TP rank's
            const double attention = 4.0 * c.s * c.h * layers / double(t);
            const double products = w.forward.flops * 2.0 * P / (2.0 * P + attention);
            sc.weight = std::min(computeB, products / (c.peak * dev.gemmMax));
        }
    }
    const LinkSpec& ppLink = linkOf(l, ppSpan);
    c.p2p = c.p > 1 ? ppLink.latencyUs * 1e-6 + c.T * c.h * c.actBytes / (ppLink.bandwidthGBs * 1e9) : 0.0;
    return c;
}

// Parameters held by pipeline rank r (its layers over t; embeddings on the first, head on the last).
double paramsOfRank(const Layout& l, const Costs& c, std::int64_t r)
{
    double n = 0;
    for (std::int64_t ch = 0; ch < c.v; ++ch)
        n += paramsOfVirtualStage(l, c.ranges, stageOfChunk(l.parallel.schedule, c.p, r, ch));
    return n;
}

// Expert parameters held by pipeline rank r.
double expertParamsOfRank(const Layout& l, const Costs& c, std::int64_t r)
{
    if (!l.model.isMoe())
        return 0;
    double n = 0;
    for (std::int64_t ch = 0; ch < c.v; ++ch)
        n += expertParamsOfVirtualStage(l, c.ranges, stageOfChunk(l.parallel.schedule, c.p, r, ch));
    return n;
}

double exposedAfter(const EndOfStep& e, double firstForward)
{
    return e.gatherOverlappable ? std::max(0.0, e.after - firstForward) : e.after;
}
EndOfStep endOfStep(
    const Layout& l, double params, const LinkSpec& link, std::int64_t nodesSpanned, double expertParams)
{
    const std::int64_t d = l.parallel.dp * l.parallel.cp; // a CP group's gradients are reduced like replicas
    const double width = gradientBytesPerValue(l.precision, l.optimizer); // the gradients as reduced
    const double weights = double(bytesPerElement(l.precision)); // the parameters as gathered
    EndOfStep e;
    // MoE: the experts' gradients are averaged over the expert-data-parallel group (dp/ep ranks) instead.
    const std::int64_t edp = expertGrid(l).edp;
    // loom-train chooses one algorithm for all its buckets, at the stage's largest (AllreduceChoice.h).
    const trace::Algorithm algorithm = dpAllreduceAlgorithm(l, params, int(d), int(nodesSpanned));
    params -= expertParams;
    if (l.memory.zero == 1 && d > 1 && usesNcclModel(l) && l.comm.dpCodec.kind == Codec::Kind::None) {
        // The distributed optimizer (Megatron-Core, DeepSpeed ZeRO-1): a reduce-scatter of the gradients, then,
        // after the optimizer updated its shard, an all-gather of the 16-bit parameters; with
        // overlap_param_gather that runs during the next step's first forward (distributedOptimizerGather).
        const GroupShape g { d, nodesSpanned }, ge { edp, nodesSpanned };
        e.reduce = collectiveSeconds(l, Collective::ReduceScatter, params * width, g)
            + collectiveSeconds(l, Collective::ReduceScatter, expertParams * width, ge);
        e.after = collectiveSeconds(l, Collective::AllGather, params * 2.0, g)
            + collectiveSeconds(l, Collective::AllGather, expertParams * 2.0, ge);
        e.gatherOverlappable = l.comm.overlapParamGather;
        return e;
    }
    if (l.memory.zero <= 1)
        e.reduce = dpAllReduceSeconds(l, params * width, d, link, nodesSpanned, algorithm)
            + (expertParams > 0 ? dpAllReduceSeconds(l, expertParams * width, edp, link, nodesSpanned, algorithm)
                                : 0.0);
    else if (l.memory.zero == 2)
        e.after = usesNcclModel(l)
            ? collectiveSeconds(l, Collective::AllGather, params * weights, { d, nodesSpanned })
                + collectiveSeconds(l, Collective::AllGather, expertParams * weights, { edp, nodesSpanned })
            : ringAllGatherSeconds(params * weights, d, link) + ringAllGatherSeconds(expertParams * weights, edp, link);
    return e;
}

// The zero-bubble schedules' bubble as a fraction of the step, in closed form from rank r's F, B and W of a
// micro-batch (its chunks together): ZB-H1 (p-1)(F+B-W), ZB-H2 (p-1)(F+B-2W) (Qi et al. 2024, table 2);
// ZB-V the same on chunks of half a stage, (p-1)(F+B-2W)/2; DualPipe (DeepSeek-V3, table 2)
// (p/2-1)(F&B+B-3W) with F&B = F+B (here one after the other) on half-stage chunks. None below 0.
double zeroBubbleTheory(ScheduleKind kind, std::int64_t p, std::int64_t m, const Costs& c, std::int64_t r)
{
    double f = 0, b = 0, w = 0;
    for (std::int64_t ch = 0; ch < c.v; ++ch) {
        const StageCost& sc = c.stage[static_cast<std::size_t>(stageOfChunk(kind, p, r, ch))];
        f += sc.forward;
        w += sc.weight;
        b += sc.backward - sc.weight;
    }
    const double q = double(p - 1);
    const double bubble = kind == ScheduleKind::ZbH1 ? q * (f + b - w)
        : kind == ScheduleKind::ZbH2                 ? q * (f + b - 2 * w)
        : kind == ScheduleKind::ZbV                  ? q * (f + b - 2 * w) / 2
                                                     : (double(p) / 2 - 1) * ((f + b) / 2 + b / 2 - 3 * w / 2);
    const double work = double(m) * (f + b + w);
    return work > 0 ? std::max(0.0, bubble) / (work + std::max(0.0, bubble)) : 0.0;
}

} // namespace loom::plan::cost
