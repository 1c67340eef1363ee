#include "engine/plan/CostModel.h"

#include "engine/plan/AllreduceChoice.h"
#include "engine/plan/CollectiveCost.h"
#include "engine/plan/ExpertGroups.h"
#include "engine/plan/MemoryTraffic.h"
#include "engine/plan/RankGrid.h"
#include "engine/plan/Schedule.h"
#include "engine/plan/Simulator.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

namespace loom::plan {

trace::StatsContext statsContext(const Layout& l)
{
    const auto& p = l.parallel;
    trace::StatsContext c;
    c.pp = p.pp;
    c.vpp = p.vpp;
    c.interleaved = p.schedule == ScheduleKind::Interleaved;
    if (p.microBatch * p.dp > 0)
        c.microBatches = p.microBatches();
    c.tokensPerStep = p.globalBatch * l.model.seqLen;
    const StepFlops flops = stepFlops(l);
    c.modelFlopsPerStep = flops.model;
    c.hardwareFlopsPerStep = flops.hardware;
    c.devices = p.worldSize();
    c.peakTflops = l.cluster.device.peakTflops(l.precision);
    if (splitsBackward(p.schedule) && p.pp > 1)
        c.bubbleTheory = predict(l, false).bubbleTheory; // Qi et al.'s forms need the ops' costs
    return c;
}

namespace {

// The link a group uses: the inter-node link when it spans nodes, else the node's own.
const LinkSpec& linkOf(const Layout& l, std::int64_t nodesSpanned)
{
    return nodesSpanned > 1 && l.cluster.interNode ? *l.cluster.interNode : l.cluster.intraNode;
}

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

bool simulatable(const Layout& l)
{
    const auto& p = l.parallel;
    return p.microBatches() >= 1 && pipelineSimulatable(p.schedule, p.pp, p.vpp, p.microBatches(), p.microbatchGroup);
}

namespace {

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

// Expert parameters of virtual stage vs on one device: its MoE blocks' experts / ep.
double expertParamsOfVirtualStage(const Layout& l, const std::vector<StageRange>& ranges, std::int64_t vs)
{
    const ModelSpec& m = l.model;
    if (!m.isMoe())
        return 0;
    const StageRange& range = ranges[static_cast<std::size_t>(vs)];
    return double(m.moeLayersIn(range.first, range.last)) * double(m.experts * m.expertParameters())
        / double(std::max<std::int64_t>(1, l.parallel.ep));
}

// Parameters of virtual stage vs (its layers over t; the embedding on the first, the head on the last).
double paramsOfVirtualStage(const Layout& l, const std::vector<StageRange>& ranges, std::int64_t vs)
{
    const ModelSpec& m = l.model;
    const double t = double(l.parallel.tp);
    const auto last = static_cast<std::int64_t>(ranges.size()) - 1;
    const StageRange& range = ranges[static_cast<std::size_t>(vs)];
    double n = double(range.size()) * double(m.blockParameters()) / t;
    if (m.isMoe()) { // everything but the experts split over t; the experts whole (expert TP 1), E/ep of them
        const double moeBlocks = double(m.moeLayersIn(range.first, range.last));
        n += moeBlocks * double(m.moeBlockParameters() - m.experts * m.expertParameters() - m.blockParameters()) / t
            + expertParamsOfVirtualStage(l, ranges, vs);
    }
    if (vs == 0)
        n += double(m.embeddingParameters()) / t;
    if (vs == last) { // the final norm, and the LM head split over t (tied: a copy of the embedding unless vs = 0)
        const double head = double(m.paddedVocab() * m.hidden) / t;
        n += double(m.headParameters()) - (m.tieEmbeddings ? 0.0 : double(m.paddedVocab() * m.hidden))
            + (!m.tieEmbeddings || vs != 0 ? head : 0.0);
    }
    return n;
}

// What ZeRO-2 and ZeRO-3 add to an op that computes for `compute` seconds while `comm` seconds of its
// collectives run on their own stream: gathers are prefetched (the next layer's, and the next op's first
// layer's during the op before) and gradient reduce-scatters wait for nothing, so only what the link cannot
// finish beside the compute is exposed: max(0, comm - compute). Without comm.overlap all of it waits.
double exposedBeside(const Layout& l, double comm, double compute)
{
    if (comm <= 0)
        return 0;
    return l.comm.overlap ? std::max(0.0, comm - compute) : comm;
}

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

Costs computeCosts(const Layout& l, std::int64_t tpSpan, std::int64_t ppSpan, std::int64_t chunks,
    std::int64_t microBatches, std::int64_t dpSpan = 1, std::int64_t cpSpan = 1, std::int64_t epSpan = 1)
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
    const LinkSpec& dpLink = linkOf(l, dpSpan);
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
        if (l.memory.zero >= 2 && c.d > 1 && layers > 0) {
            // ZeRO-3 all-gathers each layer's parameters before its forward and again before its backward;
            // ZeRO-2 and 3 reduce-scatter each layer's gradients after its backward (every micro-batch: only a
            // shard of the gradients is kept).
            const double bytes = paramsOfVirtualStage(l, c.ranges, vs) * c.actBytes;
            const double perLayer
                = (usesNcclModel(l) ? collectiveSeconds(l, Collective::AllGather, bytes / layers, { c.d, dpSpan })
                                    : ringAllGatherSeconds(bytes / layers, c.d, dpLink))
                * layers;
            sc.gatherBytes = bytes;
            // loom-train's ShardedParams gathers and scatters one block (a unit) per call, in fp32.
            sc.gatherAlgorithm = shardAlgorithm(resolveAllreduce(l.comm.allreduce,
                { toString(l.commBackend()), static_cast<std::size_t>(bytes / c.actBytes * 4.0 / layers), int(c.d),
                    int(dpSpan) }));
            sc.forwardGather = l.memory.zero >= 3 ? perLayer : 0.0;
            sc.backwardGather = perLayer + sc.forwardGather;
            sc.forwardDp = exposedBeside(l, sc.forwardGather, computeF);
            sc.backwardDp = exposedBeside(l, sc.backwardGather, computeB);
        }
        if (c.cp > 1 && layers > 0)
            ringAttentionCosts(l, c, linkOf(l, cpSpan), layers, sc);
        if (m.isMoe() && par.ep > 1) {
            // Dispatch and combine per MoE block: two all-to-alls forward, two backward (four with full
            // recomputation, which dispatches again).
            const StageRange& range = c.ranges[static_cast<std::size_t>(vs)];
            const double blocks = double(m.moeLayersIn(range.first, range.last));
            const double bytes = moeAllToAllBytes(m, c.b, c.actBytes);
            const double one = allToAllSeconds(bytes, par.ep, linkOf(l, epSpan));
            sc.forwardEp = blocks * 2.0 * one;
            sc.backwardEp = blocks * (2.0 + (full ? 2.0 : 0.0)) * one;
            sc.forwardEpBytes = blocks * 2.0 * bytes;
            sc.backwardEpBytes = blocks * (2.0 + (full ? 2.0 : 0.0)) * bytes;
        }
        sc.forward = computeF + sc.forwardTp + sc.forwardDp + sc.forwardCp + sc.forwardEp;
        sc.backward = computeB + sc.backwardTp + sc.backwardDp + sc.backwardCp + sc.backwardEp;
        if (splitsBackward(par.schedule) && layers > 0) {
            // W, the weight-gradient products: as many FLOPs as the forward's products with weights (2·P a
            // token for P weights), of a backward of 2·(2·P + 4·s·h per layer); the score products, the TP
            // and EP collectives stay in B. P counts every expert (an upper bound for MoE stages).
            const double P = paramsOfVirtualStage(l, c.ranges, vs); // this TP rank's
            const double attention = 4.0 * c.s * c.h * layers / double(t);
            sc.weight = computeB * P / (2.0 * P + attention);
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

// The nodes rank 0's expert group spans (every expert group has the same shape).
std::int64_t expertGroupNodes(const Layout& l, const RankGrid& grid)
{
    if (!l.model.isMoe() || l.parallel.ep <= 1 || l.parallel.dp % l.parallel.ep != 0)
        return 1;
    std::vector<std::int64_t> nodes;
    for (auto r : expertGroupOf(grid, l.parallel.ep, 0))
        nodes.push_back(grid.nodeOf(r));
    std::sort(nodes.begin(), nodes.end());
    return std::unique(nodes.begin(), nodes.end()) - nodes.begin();
}

// The clipping norm reads the gradients; AdamW reads weights, gradients and both moments and writes three of
// them: ~32 bytes a parameter.
double optimizerBytesOf(const Layout& l, const Costs& c, std::int64_t r)
{
    return paramsOfRank(l, c, r) * 32.0 / (l.memory.zero >= 1 ? double(c.d) : 1.0);
}

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

// The blocks pipeline rank r holds over its chunks.
double layersOfRank(const Costs& c, std::int64_t r)
{
    double layers = 0;
    for (std::int64_t ch = 0; ch < c.v; ++ch)
        layers += double(c.ranges[static_cast<std::size_t>(stageOfChunk(c.kind, c.p, r, ch))].size());
    return layers;
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

// Layer-micro-batches pipeline rank r holds at its schedule's first peak, in closed form (what
// Schedule::peakInFlight finds by replaying, without the replay): GPipe all m forwards, 1F1B min(p − r, m),
// interleaved its warm-up of (p − r − 1)·2 + (v − 1)·N forwards and one more, run through the chunks in
// groups of N micro-batches, each weighing its chunk's layers.
double heldLayersAtFirstPeak(const Layout& l, const Costs& c, std::int64_t r, std::int64_t m)
{
    const auto& par = l.parallel;
    const std::int64_t p = c.p, v = c.v;
    if (splitsBackward(par.schedule)) {
        // From F to W (loom-train's W keeps copies of what it reads): ZB-H1 up to p on every rank, ZB-H2
        // 2p - 1, the V's 2p chunks of half a stage, which is p of a whole rank's layers.
        const std::int64_t held = par.schedule == ScheduleKind::ZbH2 ? 2 * p - 1 : p;
        return double(std::min(held, m)) * layersOfRank(c, r);
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
MemoryEstimate memoryOfRank(const Layout& l, const Costs& c, std::int64_t r, double heldLayers)
{
    const ModelSpec& m = l.model;
    const bool mixed = l.precision != Precision::Fp32, full = l.memory.recompute == Recompute::Full;
    const bool sp = l.parallel.sp;
    const Attention attention = l.memory.attention;
    const double width = mixed ? 1.0 : 2.0;
    // Context parallelism keeps s/cp of each sequence's activations (and s/cp rows of any scores) per rank.
    const double cp = double(c.cp);
    const bool efficientNorm = l.memory.efficientNorm;
    const double perLayerAct
        = layerActivationBytes(m, c.b, c.t, sp, attention, l.memory.recompute, efficientNorm) * width / cp
        - fp8ActivationSavingBytes(l, c.b);
    const double fullLayerAct
        = layerActivationBytes(m, c.b, c.t, sp, attention, Recompute::None, efficientNorm) * width / cp;
    const double params = paramsOfRank(l, c, r);
    const ModelStateBytes state = modelStateBytesPerParameter(l.precision, l.memory.zero, c.d);
    // Experts are replicated over the expert-data-parallel group only (dp/ep ranks): ZeRO shards them there.
    const double experts = m.isMoe() ? expertParamsOfRank(l, c, r) : 0.0;
    const ModelStateBytes expertState = modelStateBytesPerParameter(
        l.precision, l.memory.zero, std::max<std::int64_t>(1, c.d / std::max<std::int64_t>(1, l.parallel.ep)));
    MemoryEstimate mem;
    mem.params = ((params - experts) * state.params + experts * expertState.params) / 1e9;
    mem.grads = ((params - experts) * state.grads + experts * expertState.grads) / 1e9;
    mem.optimizer = ((params - experts) * state.optimizer + experts * expertState.optimizer) / 1e9;
    if (l.memory.zero >= 3 && c.d > 1) // two layers' parameters gathered (one in use, one prefetched) and
                                       // one layer's full gradients before their reduce-scatter
        mem.gathered = 3.0 * double(m.blockParameters()) / double(c.t) * c.actBytes / 1e9;
    mem.activations = (heldLayers * perLayerAct + (full ? fullLayerAct : 0.0)) / 1e9;
    if (r == c.p - 1)
        mem.activations += c.T * c.V / double(c.t) * 4.0 / 1e9; // fp32 logits of one micro-batch
    mem.reserve = 0.05 * l.cluster.device.memoryGB;
    if (l.cluster.intraNode.kind == LinkKind::Shm)
        mem.reserve += cpuEngineBytes(l, c, params) / 1e9;
    return mem;
}

} // namespace

double optimizerBytes(const Layout& l, std::int64_t r)
{
    const std::int64_t chunks = scheduleChunks(l.parallel.schedule, l.parallel.vpp);
    const Costs c = computeCosts(l, 1, 1, chunks, l.parallel.microBatches());
    return optimizerBytesOf(l, c, r);
}

namespace {

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
double exposedAfter(const EndOfStep& e, double firstForward)
{
    return e.gatherOverlappable ? std::max(0.0, e.after - firstForward) : e.after;
}
EndOfStep endOfStep(
    const Layout& l, double params, const LinkSpec& link, std::int64_t nodesSpanned, double expertParams = 0)
{
    const std::int64_t d = l.parallel.dp * l.parallel.cp; // a CP group's gradients are reduced like replicas
    const double width = l.precision == Precision::Fp32 ? 4.0 : 2.0;
    EndOfStep e;
    // MoE: the experts' gradients are averaged over the expert-data-parallel group (dp/ep ranks) instead.
    const std::int64_t edp = d / std::max<std::int64_t>(1, l.parallel.ep);
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
            ? collectiveSeconds(l, Collective::AllGather, params * width, { d, nodesSpanned })
                + collectiveSeconds(l, Collective::AllGather, expertParams * width, { edp, nodesSpanned })
            : ringAllGatherSeconds(params * width, d, link) + ringAllGatherSeconds(expertParams * width, edp, link);
    return e;
}

CollectiveSummary summarise(const Layout& l, const char* group, Collective kind, double bytes, GroupShape g)
{
    CollectiveSummary s;
    s.group = group;
    s.collective = kind == Collective::AllReduce ? "all_reduce" : "reduce_scatter";
    s.bytes = bytes;
    s.ranks = g.ranks;
    s.nodes = g.nodes;
    if (usesNcclModel(l)) {
        const CollectiveTime t = ncclCollective(l.cluster, kind, bytes, g);
        s.algorithm = std::string(toString(t.algorithm));
        s.seconds = t.seconds;
        s.busBandwidthGBs = t.busBandwidthGBs;
    } else {
        s.algorithm = "alpha_beta";
        s.seconds = collectiveSeconds(l, kind, bytes, g);
        const double n = double(g.ranks);
        s.busBandwidthGBs = s.seconds > 0
            ? bytes / s.seconds * (kind == Collective::AllReduce ? 2.0 * (n - 1) / n : (n - 1) / n) / 1e9
            : 0.0;
    }
    return s;
}

// The TP all-reduce of one micro-batch's activations and the gradients' reduction of pipeline rank 0 (a
// reduce-scatter with the distributed optimizer on NCCL), for `loom plan predict --json`.
std::vector<CollectiveSummary> collectiveSummaries(
    const Layout& l, const Costs& c, std::int64_t tpSpan, std::int64_t dpSpan, double params)
{
    std::vector<CollectiveSummary> out;
    if (c.t > 1)
        out.push_back(summarise(l, "tp", Collective::AllReduce, c.T * c.h * c.actBytes, { c.t, tpSpan }));
    if (c.d > 1) {
        const bool distributed = l.memory.zero == 1 && usesNcclModel(l);
        out.push_back(summarise(l, "dp", distributed ? Collective::ReduceScatter : Collective::AllReduce,
            params * (l.precision == Precision::Fp32 ? 4.0 : 2.0), { c.d, dpSpan }));
    }
    return out;
}

trace::TraceEvent stepEvent(std::int32_t rank, std::int64_t stage, trace::EventKind kind, double start, double end,
    double bytes, trace::Algorithm algorithm = trace::Algorithm::Library)
{
    trace::TraceEvent e;
    e.rank = rank;
    e.kind = kind;
    e.lane = kind == trace::EventKind::Optimizer ? trace::Lane::Compute : trace::Lane::Comm;
    e.source = trace::EventSource::Simulated;
    e.step = 0;
    e.stage = static_cast<std::int32_t>(stage);
    e.startNs = static_cast<std::int64_t>(start * 1e9);
    e.endNs = static_cast<std::int64_t>(end * 1e9);
    e.bytes = static_cast<std::uint64_t>(bytes);
    if (kind != trace::EventKind::Optimizer)
        e.algorithm = algorithm;
    return e;
}

} // namespace

Prediction predict(const Layout& l)
{
    return predict(l, true);
}

Prediction predict(const Layout& l, bool withEvents)
{
    Prediction out;
    const ModelSpec& m = l.model;
    const auto& par = l.parallel;
    const DeviceSpec& dev = l.cluster.device;
    const std::int64_t chunks = scheduleChunks(par.schedule, par.vpp);
    const RankGrid grid = RankGrid::forLayout(l);
    const std::int64_t dpSpan = grid.gradientNodesSpanned();
    const std::int64_t epSpan = expertGroupNodes(l, grid);
    const Costs c = computeCosts(l, grid.maxNodesSpanned(GroupKind::Tensor), grid.maxNodesSpanned(GroupKind::Pipeline),
        chunks, par.microBatches(), dpSpan, par.cp > 1 ? grid.maxNodesSpanned(GroupKind::Context) : 1, epSpan);
    const std::int64_t p = c.p, d = c.d, v = c.v, mb = c.mb;
    const double T = c.T, h = c.h, s = c.s, actBytes = c.actBytes, p2p = c.p2p;
    const auto& cost = c.stage;

    // Replay the schedule on one representative rank per stage (tp = 0, dp = 0).
    EventNaming naming;
    naming.rankOf = [&grid](std::int64_t r) { return static_cast<std::int32_t>(grid.rankOf({ 0, r, 0 })); };
    naming.sendBytes = static_cast<std::uint64_t>(T * h * actBytes);
    naming.tpSize = static_cast<std::int32_t>(c.t);
    naming.dpSize = static_cast<std::int32_t>(std::min<std::int64_t>(d, std::numeric_limits<std::int32_t>::max()));
    naming.sequenceParallel = par.sp;
    naming.cpSize = static_cast<std::int32_t>(c.cp);
    naming.epSize = static_cast<std::int32_t>(std::min<std::int64_t>(par.ep, std::numeric_limits<std::int32_t>::max()));
    const PipelineTimes pipe = simulatePipeline(
        par.schedule, p, chunks, mb, cost, p2p, &naming, withEvents ? &out.events : nullptr, par.microbatchGroup);
    const auto& withTransfers = pipe.withTransfers;
    const auto& noTransfers = pipe.noTransfers;
    out.extrapolated = pipe.extrapolated;
    out.eventMicroBatches = pipe.eventMicroBatches;
    if (pipe.extrapolated)
        out.notes.push_back("the step of " + std::to_string(mb) + " micro-batches is extrapolated from replays of "
            + std::to_string(pipe.sampled) + " and " + std::to_string(pipe.sampledLonger)
            + " (the steady state adds the same time per micro-batch)");
    if (withEvents && pipe.eventMicroBatches < mb)
        out.notes.push_back("the timeline shows the first " + std::to_string(pipe.eventMicroBatches) + " of "
            + std::to_string(mb) + " micro-batches (a shortened step ending with its DP and optimizer work)");

    auto paramsOf = [&](std::int64_t r) { return paramsOfRank(l, c, r); };

    const LinkSpec& dpLink = linkOf(l, dpSpan);
    const double memBw = dev.memoryBandwidthGBs * 1e9;
    const double gradWidth = l.precision == Precision::Fp32 ? 4.0 : 2.0;
    double stepEnd = 0;
    std::int64_t critical = 0;
    std::vector<double> dpTime(static_cast<std::size_t>(p)), optTime(static_cast<std::size_t>(p));
    for (std::int64_t r = 0; r < p; ++r) {
        const auto& rt = withTransfers[static_cast<std::size_t>(r)];
        const double params = paramsOf(r);
        const EndOfStep dpWork = endOfStep(l, params, dpLink, dpSpan, expertParamsOfRank(l, c, r));
        const double dpSeconds = dpWork.reduce;
        // Staleness 1: the previous step's all-reduce runs from this step's start, behind all of its compute,
        // and only what outlasts the step is exposed.
        // With overlap, buckets fill evenly through the last backward: the first is ready after `first` of it,
        // and the last (reduced after backward) takes the same share of the all-reduce. One bucket: no overlap.
        const double first = std::min(1.0, l.comm.bucketMb * 1048576.0 / std::max(1.0, params * gradWidth));
        const double lastBackward = rt.lastBackwardEnd - rt.lastBackwardStart;
        const double dpStart = l.comm.staleness > 0 ? 0.0
            : l.comm.gradReduceOverlapped()         ? rt.lastBackwardStart + first * lastBackward
                                                    : rt.lastBackwardEnd;
        const double dpEnd = l.comm.staleness > 0 ? std::max(rt.end, dpSeconds)
            : l.comm.gradReduceOverlapped() ? std::max(rt.lastBackwardEnd + first * dpSeconds, dpStart + dpSeconds)
                                            : rt.lastBackwardEnd + dpSeconds;
        const double opt = optimizerBytesOf(l, c, r) / memBw;
        const double after = exposedAfter(dpWork, cost[static_cast<std::size_t>(r)].forward);
        dpTime[static_cast<std::size_t>(r)] = std::max(rt.end, dpEnd) - rt.end + after;
        optTime[static_cast<std::size_t>(r)] = opt;
        const double end = std::max(rt.end, dpEnd) + opt + after;
        if (end > stepEnd) {
            stepEnd = end;
            critical = r;
        }
        // The same work after the (possibly shortened) replay the timeline shows; with staleness 1 the
        // all-reduce is drawn from the step's start.
        const auto& et = pipe.eventTimes[static_cast<std::size_t>(r)];
        const double eDpEnd = l.comm.staleness > 0 ? std::max(et.end, dpSeconds)
            : l.comm.gradReduceOverlapped()        ? std::max(et.lastBackwardEnd, et.lastBackwardStart + dpSeconds)
                                                   : et.lastBackwardEnd + dpSeconds;
        const double eDpStart = l.comm.staleness > 0 ? 0.0 : eDpEnd - dpSeconds;
        const double optStart = std::max(et.end, eDpEnd);
        if (!withEvents)
            continue;
        const std::int32_t rank = naming.rankOf(r);
        // The algorithm loom-train runs for this stage's buckets (and its ZeRO-2 all-gather, half of it).
        const trace::Algorithm dpAlgorithm = dpAllreduceAlgorithm(l, params, int(d), int(dpSpan));
        if (d > 1 && dpSeconds > 0)
            out.events.push_back(stepEvent(
                rank, r, trace::EventKind::AllReduce, eDpStart, eDpStart + dpSeconds, params * gradWidth, dpAlgorithm));
        out.events.push_back(stepEvent(rank, r, trace::EventKind::Optimizer, optStart, optStart + opt, 0));
        if (after > 0)
            out.events.push_back(stepEvent(rank, r, trace::EventKind::AllGather, optStart + opt, optStart + opt + after,
                params * gradWidth, shardAlgorithm(dpAlgorithm)));
    }

    const auto& crit = withTransfers[static_cast<std::size_t>(critical)];
    const auto& critNoP2p = noTransfers[static_cast<std::size_t>(critical)];
    out.stepTime = stepEnd;
    out.tpExposed = crit.tp;
    out.cpExposed = crit.cp;
    out.epExposed = crit.ep;
    out.compute = crit.busy - crit.tp - crit.dp - crit.cp - crit.ep;
    out.totalParameters = double(m.parameterCount());
    out.activeParameters = double(m.activeParameterCount());
    out.ppExposed = std::max(0.0, crit.end - critNoP2p.end);
    out.bubble = std::max(0.0, critNoP2p.end - critNoP2p.busy);
    out.dpExposed = dpTime[static_cast<std::size_t>(critical)] + crit.dp;
    out.optimizer = optTime[static_cast<std::size_t>(critical)];
    out.bubbleFraction = out.bubble / out.stepTime;
    out.bubbleTheory = p > 1 ? double(p - 1) / double(v * mb + p - 1) : 0.0;
    if (splitsBackward(par.schedule) && p > 1)
        out.bubbleTheory = zeroBubbleTheory(par.schedule, p, mb, c, 0);
    const StepFlops flops = stepFlops(l);
    out.modelFlops = flops.model;
    out.hardwareFlops = flops.hardware;
    out.tokensPerSecond = double(par.globalBatch) * s / out.stepTime;
    const trace::Throughput rate
        = trace::throughput(flops.model, flops.hardware, out.stepTime, par.worldSize(), dev.peakTflops(l.precision));
    out.tflopsPerGpu = rate.tflopsPerDevice;
    out.mfu = rate.mfu;
    out.hardwareTflopsPerGpu = rate.hardwareTflopsPerDevice;
    out.hfu = rate.hfu;

    out.collectives = collectiveSummaries(l, c, grid.maxNodesSpanned(GroupKind::Tensor), dpSpan, paramsOf(0));

    // Memory of the most loaded pipeline rank.
    out.memoryCapacityGB = dev.memoryGB;
    for (std::int64_t r = 0; r < p; ++r) {
        const MemoryEstimate mem = memoryOfRank(l, c, r, pipe.peakLayersInFlight[static_cast<std::size_t>(r)]);
        out.memoryPerStage.push_back(mem);
        if (mem.total() > out.memory.total())
            out.memory = mem;
    }
    out.fits = out.memory.total() <= out.memoryCapacityGB;
    if (!out.fits)
        out.notes.push_back("needs " + std::to_string(out.memory.total()).substr(0, 6) + " GB per device but "
            + l.cluster.device.name + " has " + std::to_string(dev.memoryGB).substr(0, 6) + " GB");
    return out;
}

Estimate estimate(const Layout& l)
{
    const auto& par = l.parallel;
    const DeviceSpec& dev = l.cluster.device;
    const std::int64_t D = l.cluster.autoDevices() ? par.worldSize() : l.cluster.devicesPerNode;
    // Nodes the groups span under the default order (tp fastest, then cp, pp, dp): no grid needed.
    const std::int64_t tc = par.tp * par.cp;
    const std::int64_t tpSpan = (par.tp > D || D % par.tp != 0) ? 2 : 1;
    const std::int64_t cpSpan = tc > D ? std::min(par.cp, (tc + D - 1) / D) : 1;
    const std::int64_t ppSpan = tc * par.pp > D ? 2 : 1;
    const std::int64_t dpSpan = tc * par.pp * par.dp > D ? std::min(par.dp * par.cp, (tc * par.pp * par.dp + D - 1) / D)
                                                         : (cpSpan > 1 ? cpSpan : 1);
    const std::int64_t v = scheduleChunks(par.schedule, par.vpp);
    const std::int64_t m = par.microBatches();
    // The expert group: ep DP ranks tp·cp·pp apart.
    const std::int64_t epStride = tc * par.pp;
    const std::int64_t epSpan = epStride * par.ep > D ? std::min(par.ep, (epStride * par.ep + D - 1) / D) : 1;
    const Costs c = computeCosts(l, tpSpan, ppSpan, v, m, dpSpan, cpSpan, epSpan);
    const std::int64_t p = c.p;
    Estimate e;
    // the slowest rank's forward + backward of one micro-batch through all its chunks
    double tau = 0, tauTp = 0, tauDp = 0, tauCp = 0, tauEp = 0;
    double lastBackward = 0;
    for (std::int64_t r = 0; r < p; ++r) {
        double total = 0, tp = 0, dp = 0, cpTime = 0, ep = 0;
        for (std::int64_t ch = 0; ch < v; ++ch) {
            const StageCost& sc = c.stage[static_cast<std::size_t>(stageOfChunk(par.schedule, p, r, ch))];
            total += sc.forward + sc.backward;
            tp += sc.forwardTp + sc.backwardTp;
            dp += sc.forwardDp + sc.backwardDp;
            cpTime += sc.forwardCp + sc.backwardCp;
            ep += sc.forwardEp + sc.backwardEp;
        }
        if (total > tau) {
            tau = total;
            tauTp = tp;
            tauDp = dp;
            tauCp = cpTime;
            tauEp = ep;
            lastBackward = c.stage[static_cast<std::size_t>(r)].backward;
        }
    }
    e.compute = double(m) * (tau - tauTp - tauDp - tauCp - tauEp);
    e.tp = double(m) * tauTp;
    e.cp = double(m) * tauCp;
    e.ep = double(m) * tauEp;
    e.bubble = double(p - 1) * tau / double(v);
    e.pp = p > 1 ? 2.0 * double(p - 1) * double(v) * c.p2p : 0.0;
    const EndOfStep dpWork
        = endOfStep(l, paramsOfRank(l, c, 0), linkOf(l, dpSpan), dpSpan, expertParamsOfRank(l, c, 0));
    const double dpSeconds = dpWork.reduce;
    const double dpExposed = l.comm.staleness > 0
        ? std::max(0.0, dpSeconds - (e.compute + e.tp + e.cp + e.ep + e.bubble + e.pp))
        : l.comm.gradReduceOverlapped() ? std::max(0.0, dpSeconds - lastBackward)
                                        : dpSeconds;
    e.dp = dpExposed + exposedAfter(dpWork, c.stage[0].forward) + double(m) * tauDp;
    const double opt = optimizerBytesOf(l, c, 0) / (dev.memoryBandwidthGBs * 1e9);
    e.stepTime = e.compute + e.tp + e.cp + e.ep + e.bubble + e.pp + e.dp + opt;
    e.tokensPerSecond = double(par.globalBatch * l.model.seqLen) / e.stepTime;
    const StepFlops flops = stepFlops(l);
    const trace::Throughput rate = trace::throughput(flops.model, flops.hardware, e.stepTime, par.worldSize(), 0);
    e.tflopsPerGpu = rate.tflopsPerDevice;
    e.hardwareTflopsPerGpu = rate.hardwareTflopsPerDevice;
    // Activations in flight at the first peak, in closed form, on the rank that holds the most layer-micro-
    // batches (with Llama 3's split not rank 0, whose first chunk is empty) and on the first and last rank,
    // which also hold the embedding and the head.
    std::int64_t most = 0;
    double mostHeld = -1;
    for (std::int64_t r = 0; r < p; ++r)
        if (const double held = heldLayersAtFirstPeak(l, c, r, m); held > mostHeld)
            most = r, mostHeld = held;
    e.memoryGB = 0;
    for (std::int64_t r : { std::int64_t(0), most, p - 1 })
        e.memoryGB = std::max(e.memoryGB, memoryOfRank(l, c, r, heldLayersAtFirstPeak(l, c, r, m)).total());
    e.fits = e.memoryGB <= dev.memoryGB;
    return e;
}

} // namespace loom::plan
