#include "engine/plan/CostModel.h"

#include "engine/plan/RankGrid.h"
#include "engine/plan/Schedule.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace loom::plan {

double megatronModelFlops(const ModelSpec& m, std::int64_t globalBatch, bool fullRecompute)
{
    const double B = double(globalBatch), s = double(m.seqLen), l = double(m.layers), h = double(m.hidden),
                 V = double(m.vocab);
    return fullRecompute ? 96.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h))
                         : 72.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * l * h));
}

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
    return c;
}

double activationBytesPerLayer(const ModelSpec& m, std::int64_t b, std::int64_t t, Recompute recompute, bool sp)
{
    const double s = double(m.seqLen), h = double(m.hidden), a = double(m.heads), B = double(b), T = double(t);
    switch (recompute) {
    case Recompute::Full: return 2.0 * s * B * h;
    case Recompute::Selective: return sp ? 34.0 * s * B * h / T : s * B * h * (10.0 + 24.0 / T);
    case Recompute::None:
        if (t == 1)
            return s * B * h * (34.0 + 5.0 * a * s / h);
        return sp ? s * B * h / T * (34.0 + 5.0 * a * s / h) : s * B * h * (10.0 + 24.0 / T + 5.0 * a * s / (h * T));
    }
    return 0;
}

double gemmEfficiency(const DeviceSpec& d, double width, double rows)
{
    return d.gemmMax * width / (width + d.gemmHalfWidth) * rows / (rows + d.gemmHalfRows);
}

double ringAllReduceSeconds(double bytes, std::int64_t n, const LinkSpec& link)
{
    if (n <= 1 || bytes <= 0)
        return 0;
    const double alpha = link.latencyUs * 1e-6, beta = link.bandwidthGBs * 1e9;
    return 2.0 * double(n - 1) * alpha + 2.0 * double(n - 1) / double(n) * bytes / beta;
}

double ComputeWork::seconds(const DeviceSpec& device, Precision precision) const
{
    return flops / (device.peakTflops(precision) * 1e12 * device.gemmMax) + bytes / (device.memoryBandwidthGBs * 1e9);
}

std::vector<StageWork> stageWork(const Layout& l, std::int64_t chunks)
{
    const ModelSpec& m = l.model;
    const DeviceSpec& dev = l.cluster.device;
    const std::int64_t t = l.parallel.tp;
    const std::vector<StageRange> ranges = l.stageRanges();
    const std::int64_t virtualStages = l.parallel.pp * chunks;
    const double T = double(l.parallel.microBatch * m.seqLen), h = double(m.hidden), s = double(m.seqLen),
                 f = double(m.ffnHidden), V = double(m.paddedVocab());
    // FLOPs run at peak · max · shape; dividing by the shape leaves what peak · max must do.
    const double shape = dev.gemmMax > 0 ? gemmEfficiency(dev, h / double(t), T) / dev.gemmMax : 1.0;
    const double layerFlops = (2.0 * T * h * (4.0 * h + 2.0 * f) + 4.0 * T * s * h) / double(t) / shape;
    const double attentionFlops = 4.0 * T * s * h / double(t) / shape;
    // Memory-bound work (norms, softmax, GELU, dropout, residuals) moves about the layer's activation bytes
    // (Korthikanti et al.'s count) once in and once out; it weighs most where h is small.
    const double layerBytes = 2.0 * activationBytesPerLayer(m, l.parallel.microBatch, t, Recompute::None)
                              * (l.precision == Precision::Fp32 ? 2.0 : 1.0);
    const double headFlops = 2.0 * T * h * V / double(t) / shape;
    const bool full = l.memory.recompute == Recompute::Full, selective = l.memory.recompute == Recompute::Selective;
    std::vector<StageWork> out(static_cast<std::size_t>(virtualStages));
    for (std::int64_t vs = 0; vs < virtualStages; ++vs) {
        const double layers = double(ranges[static_cast<std::size_t>(vs)].size());
        StageWork& w = out[static_cast<std::size_t>(vs)];
        const double recompute = full ? 1.0 : 0.0;
        w.forward = {layers * layerFlops, layers * layerBytes};
        w.backward = {layers * ((2.0 + recompute) * layerFlops + (selective ? attentionFlops : 0.0)),
                      layers * (2.0 + recompute) * layerBytes};
        if (vs == virtualStages - 1) {
            w.forward.flops += headFlops;
            w.backward.flops += 2.0 * headFlops;
        }
    }
    return out;
}

namespace {

struct StageCost {
    double forward = 0, backward = 0;        // seconds per micro-batch, compute and TP communication
    double forwardTp = 0, backwardTp = 0;    // of which TP all-reduces
};

// The link a group uses: the inter-node link when it spans nodes, else the node's own.
const LinkSpec& linkOf(const Layout& l, std::int64_t nodesSpanned)
{
    return nodesSpanned > 1 && l.cluster.interNode ? *l.cluster.interNode : l.cluster.intraNode;
}

double dpAllReduceSeconds(const Layout& l, double gradBytes, std::int64_t dp, const LinkSpec& link,
                          std::int64_t nodesSpanned)
{
    if (dp <= 1)
        return 0;
    const auto& codec = l.comm.dpCodec;
    const double count = gradBytes / 4.0;  // values, whatever their width on the device
    const double beta = link.bandwidthGBs * 1e9, alpha = link.latencyUs * 1e-6;
    const double memBw = l.cluster.device.memoryBandwidthGBs * 1e9;
    using K = Codec::Kind;
    if (codec.kind == K::TopK) {  // sparse all-gather: (n-1)·8k bytes in and out per rank
        const double k = std::ceil(codec.topkFraction * count);
        return double(dp - 1) * alpha + double(dp - 1) * 8.0 * k / beta + 3.0 * gradBytes / memBw;
    }
    double ratio = 1.0;
    const double wire = gradBytes / count;  // bytes per value as reduced
    switch (codec.kind) {
    case K::Fp16:
    case K::Bf16: ratio = std::min(1.0, 2.0 / wire); break;
    case K::Int8: ratio = (1.0 + 4.0 / double(256)) / wire; break;
    case K::Int4: ratio = (0.5 + 4.0 / double(256)) / wire; break;
    default: break;
    }
    const double codecCost = codec.kind == K::None ? 0 : 4.0 * gradBytes / memBw;  // encode + decode, twice
    if (l.comm.allreduce == AllreduceAlgorithm::Hierarchical && nodesSpanned > 1) {
        // in-node reduce-scatter and all-gather, across-node all-reduce of 1/k (FORMULAS.md)
        const double k = double(std::max<std::int64_t>(1, dp / nodesSpanned));
        return ringAllReduceSeconds(gradBytes * ratio, static_cast<std::int64_t>(k), l.cluster.intraNode)
               + ringAllReduceSeconds(gradBytes * ratio / k, nodesSpanned, link) + codecCost;
    }
    return ringAllReduceSeconds(gradBytes * ratio, dp, link) + codecCost;
}

}  // namespace

bool simulatable(const Layout& l)
{
    const auto& p = l.parallel;
    const double ops = 2.0 * double(p.microBatches()) * double(p.vpp) * double(p.pp);
    return ops <= 4e6;
}

namespace {

// Everything the replay and the estimate share: per-virtual-stage costs, links and sizes.
struct Costs {
    std::int64_t t, p, d, b, v, mb, virtualStages;
    double actBytes, peak, T, h, s, V;
    std::vector<StageCost> stage;
    double p2p = 0;
    std::vector<StageRange> ranges;
};

Costs computeCosts(const Layout& l, std::int64_t tpSpan, std::int64_t ppSpan, std::int64_t chunks, std::int64_t microBatches)
{
    Costs c;
    const ModelSpec& m = l.model;
    const auto& par = l.parallel;
    const DeviceSpec& dev = l.cluster.device;
    c.t = par.tp;
    c.p = par.pp;
    c.d = par.dp;
    c.b = par.microBatch;
    c.v = chunks;
    c.mb = microBatches;
    c.ranges = l.stageRanges();
    c.virtualStages = c.p * c.v;
    c.actBytes = l.precision == Precision::Fp32 ? 4.0 : 2.0;
    c.peak = dev.peakTflops(l.precision) * 1e12;
    c.T = double(c.b * m.seqLen);
    c.h = double(m.hidden);
    c.s = double(m.seqLen);
    c.V = double(m.paddedVocab());
    const std::int64_t t = c.t;
    const LinkSpec& tpLink = linkOf(l, tpSpan);
    const double tpAllReduce = ringAllReduceSeconds(c.T * c.h * c.actBytes, t, tpLink);
    const bool full = l.memory.recompute == Recompute::Full;
    const std::vector<StageWork> work = stageWork(l, chunks);
    c.stage.resize(static_cast<std::size_t>(c.virtualStages));
    for (std::int64_t vs = 0; vs < c.virtualStages; ++vs) {
        const double layers = double(c.ranges[static_cast<std::size_t>(vs)].size());
        const StageWork& w = work[static_cast<std::size_t>(vs)];
        StageCost& sc = c.stage[static_cast<std::size_t>(vs)];
        sc.forwardTp = layers * 2.0 * tpAllReduce;
        sc.backwardTp = layers * (2.0 + (full ? 2.0 : 0.0)) * tpAllReduce;
        sc.forward = w.forward.seconds(dev, l.precision) + sc.forwardTp;
        sc.backward = w.backward.seconds(dev, l.precision) + sc.backwardTp;
    }
    const LinkSpec& ppLink = linkOf(l, ppSpan);
    c.p2p = c.p > 1 ? ppLink.latencyUs * 1e-6 + c.T * c.h * c.actBytes / (ppLink.bandwidthGBs * 1e9) : 0.0;
    return c;
}

// Parameters held by pipeline rank r (its layers over t; embeddings on the first, head on the last).
double paramsOfRank(const Layout& l, const Costs& c, std::int64_t r)
{
    const ModelSpec& m = l.model;
    double n = 0;
    for (std::int64_t ch = 0; ch < c.v; ++ch) {
        const std::int64_t vs = ch * c.p + r;
        n += double(c.ranges[static_cast<std::size_t>(vs)].size()) * double(m.blockParameters()) / double(c.t);
        if (vs == 0)
            n += double(m.embeddingParameters()) / double(c.t);
        if (vs == c.virtualStages - 1)
            n += double(m.headParameters()) + (vs != 0 ? double(m.paddedVocab() * m.hidden) / double(c.t) : 0.0);
    }
    return n;
}

// AdamW reads weights, gradients and both moments and writes three of them: ~28 bytes a parameter.
double optimizerBytesOf(const Layout& l, const Costs& c, std::int64_t r)
{
    return paramsOfRank(l, c, r) * 28.0 / (l.memory.zero == 1 ? double(c.d) : 1.0);
}

// Memory of pipeline rank r holding `inFlight` chunk-micro-batches of activations at its peak.
MemoryEstimate memoryOfRank(const Layout& l, const Costs& c, std::int64_t r, double inFlight)
{
    const ModelSpec& m = l.model;
    const bool mixed = l.precision != Precision::Fp32, full = l.memory.recompute == Recompute::Full;
    const double perLayerAct = activationBytesPerLayer(m, c.b, c.t, l.memory.recompute) * (mixed ? 1.0 : 2.0);
    const double fullLayerAct = activationBytesPerLayer(m, c.b, c.t, Recompute::None) * (mixed ? 1.0 : 2.0);
    const double params = paramsOfRank(l, c, r);
    double layers = 0;
    for (std::int64_t ch = 0; ch < c.v; ++ch)
        layers += double(c.ranges[static_cast<std::size_t>(ch * c.p + r)].size());
    MemoryEstimate mem;
    mem.params = params * (mixed ? 2.0 : 4.0) / 1e9;
    mem.grads = params * (mixed ? 2.0 : 4.0) / 1e9;
    mem.optimizer = params * (mixed ? 12.0 : 8.0) / (l.memory.zero == 1 ? double(c.d) : 1.0) / 1e9;
    mem.activations = (inFlight * layers / double(c.v) * perLayerAct + (full ? fullLayerAct : 0.0)) / 1e9;
    if (r == c.p - 1)
        mem.activations += c.T * c.V / double(c.t) * 4.0 / 1e9;  // fp32 logits of one micro-batch
    mem.reserve = 0.05 * l.cluster.device.memoryGB;
    return mem;
}

}  // namespace

double optimizerBytes(const Layout& l, std::int64_t r)
{
    const std::int64_t chunks = l.parallel.schedule == ScheduleKind::Interleaved ? l.parallel.vpp : 1;
    const Costs c = computeCosts(l, 1, 1, chunks, l.parallel.microBatches());
    return optimizerBytesOf(l, c, r);
}

Prediction predict(const Layout& l)
{
    Prediction out;
    const ModelSpec& m = l.model;
    const auto& par = l.parallel;
    const DeviceSpec& dev = l.cluster.device;
    const Schedule schedule = Schedule::forLayout(l);
    const RankGrid grid = RankGrid::forLayout(l);
    const Costs c = computeCosts(l, grid.maxNodesSpanned(GroupKind::Tensor), grid.maxNodesSpanned(GroupKind::Pipeline),
                                 schedule.chunks(), schedule.microBatches());
    const std::int64_t p = c.p, d = c.d, v = c.v, mb = c.mb, virtualStages = c.virtualStages;
    const double T = c.T, h = c.h, s = c.s, actBytes = c.actBytes, p2p = c.p2p;
    const auto& cost = c.stage;
    const bool full = l.memory.recompute == Recompute::Full;

    // Replay the schedule on one representative rank per stage (tp = 0, dp = 0).
    struct RankTimes {
        double busy = 0, tp = 0, end = 0, lastBackwardStart = 0, lastBackwardEnd = 0;
    };
    auto replay = [&](double transfer, std::vector<trace::TraceEvent>* events) {
        std::vector<RankTimes> times(static_cast<std::size_t>(p));
        std::map<std::tuple<int, int, std::int64_t>, double> done;
        std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
        std::vector<double> clock(static_cast<std::size_t>(p), 0);
        for (bool progress = true; progress;) {
            progress = false;
            for (std::int64_t r = 0; r < p; ++r) {
                auto& i = next[static_cast<std::size_t>(r)];
                const auto& ops = schedule.opsOf(r);
                while (i < ops.size()) {
                    const PipelineOp& op = ops[i];
                    const std::int64_t vs = schedule.virtualStage(r, op.chunk);
                    const bool fwd = op.kind == PipelineOp::Kind::Forward;
                    double ready = 0;
                    if (fwd && vs > 0) {
                        auto it = done.find({0, op.microBatch, vs - 1});
                        if (it == done.end())
                            break;
                        ready = it->second + transfer;
                    } else if (!fwd) {
                        auto it = vs == virtualStages - 1 ? done.find({0, op.microBatch, vs}) : done.find({1, op.microBatch, vs + 1});
                        if (it == done.end())
                            break;
                        ready = it->second + (vs == virtualStages - 1 ? 0.0 : transfer);
                    }
                    const StageCost& c = cost[static_cast<std::size_t>(vs)];
                    const double duration = fwd ? c.forward : c.backward;
                    double& now = clock[static_cast<std::size_t>(r)];
                    const double start = std::max(now, ready);
                    now = start + duration;
                    done[{fwd ? 0 : 1, op.microBatch, vs}] = now;
                    RankTimes& rt = times[static_cast<std::size_t>(r)];
                    rt.busy += duration;
                    rt.tp += fwd ? c.forwardTp : c.backwardTp;
                    if (!fwd) {
                        rt.lastBackwardStart = start;
                        rt.lastBackwardEnd = now;
                    }
                    if (events) {
                        trace::TraceEvent e;
                        e.rank = static_cast<std::int32_t>(grid.rankOf({0, r, 0}));
                        e.kind = fwd ? trace::EventKind::Forward : trace::EventKind::Backward;
                        e.lane = trace::Lane::Compute;
                        e.source = trace::EventSource::Simulated;
                        e.step = 0;
                        e.microBatch = op.microBatch;
                        e.stage = static_cast<std::int32_t>(vs);
                        e.chunk = op.chunk;
                        e.startNs = static_cast<std::int64_t>(start * 1e9);
                        e.endNs = static_cast<std::int64_t>(now * 1e9);
                        events->push_back(e);
                        const bool sends = fwd ? vs < virtualStages - 1 : vs > 0;
                        if (sends && transfer > 0) {
                            trace::TraceEvent s2 = e;
                            s2.kind = trace::EventKind::Send;
                            s2.lane = trace::Lane::Comm;
                            s2.startNs = e.endNs;
                            s2.endNs = static_cast<std::int64_t>((now + transfer) * 1e9);
                            s2.bytes = s2.wireBytes = static_cast<std::uint64_t>(T * h * actBytes);
                            s2.peer = static_cast<std::int32_t>(grid.rankOf({0, (fwd ? vs + 1 : vs - 1 + virtualStages) % p, 0}));
                            events->push_back(s2);
                        }
                    }
                    ++i;
                    progress = true;
                }
            }
        }
        for (std::int64_t r = 0; r < p; ++r)
            times[static_cast<std::size_t>(r)].end = clock[static_cast<std::size_t>(r)];
        return times;
    };
    const auto withTransfers = replay(p2p, &out.events);
    const auto noTransfers = replay(0.0, nullptr);

    auto paramsOf = [&](std::int64_t r) { return paramsOfRank(l, c, r); };

    const LinkSpec& dpLink = linkOf(l, grid.maxNodesSpanned(GroupKind::Data));
    const double memBw = dev.memoryBandwidthGBs * 1e9;
    const double gradWidth = l.precision == Precision::Fp32 ? 4.0 : 2.0;
    double stepEnd = 0;
    std::int64_t critical = 0;
    std::vector<double> dpTime(static_cast<std::size_t>(p)), optTime(static_cast<std::size_t>(p));
    for (std::int64_t r = 0; r < p; ++r) {
        const auto& rt = withTransfers[static_cast<std::size_t>(r)];
        const double params = paramsOf(r);
        const double dpSeconds = dpAllReduceSeconds(l, params * gradWidth, d, dpLink, grid.maxNodesSpanned(GroupKind::Data));
        // Staleness 1: the previous step's all-reduce runs from this step's start, behind all of its compute,
        // and only what outlasts the step is exposed.
        // With overlap, buckets fill evenly through the last backward: the first is ready after `first` of it,
        // and the last (reduced after backward) takes the same share of the all-reduce. One bucket: no overlap.
        const double first = std::min(1.0, l.comm.bucketMb * 1048576.0 / std::max(1.0, params * gradWidth));
        const double lastBackward = rt.lastBackwardEnd - rt.lastBackwardStart;
        const double dpStart = l.comm.staleness > 0 ? 0.0
                               : l.comm.overlap     ? rt.lastBackwardStart + first * lastBackward
                                                    : rt.lastBackwardEnd;
        const double dpEnd = l.comm.staleness > 0 ? std::max(rt.end, dpSeconds)
                             : l.comm.overlap     ? std::max(rt.lastBackwardEnd + first * dpSeconds, dpStart + dpSeconds)
                                                  : rt.lastBackwardEnd + dpSeconds;
        const double opt = optimizerBytesOf(l, c, r) / memBw;
        dpTime[static_cast<std::size_t>(r)] = dpEnd - rt.lastBackwardEnd;
        optTime[static_cast<std::size_t>(r)] = opt;
        const double end = std::max(rt.end, dpEnd) + opt;
        if (end > stepEnd) {
            stepEnd = end;
            critical = r;
        }
        if (out.events.size() < 4000000) {
            trace::TraceEvent e;
            e.rank = static_cast<std::int32_t>(grid.rankOf({0, r, 0}));
            e.kind = trace::EventKind::AllReduce;
            e.lane = trace::Lane::Comm;
            e.source = trace::EventSource::Simulated;
            e.step = 0;
            e.stage = static_cast<std::int32_t>(r);
            e.startNs = static_cast<std::int64_t>((l.comm.staleness > 0 ? dpStart : dpEnd - dpSeconds) * 1e9);
            e.endNs = static_cast<std::int64_t>((l.comm.staleness > 0 ? dpStart + dpSeconds : dpEnd) * 1e9);
            e.bytes = static_cast<std::uint64_t>(params * gradWidth);
            e.algorithm = trace::Algorithm::Library;
            if (d > 1)
                out.events.push_back(e);
            e.kind = trace::EventKind::Optimizer;
            e.lane = trace::Lane::Compute;
            e.startNs = static_cast<std::int64_t>(std::max(rt.end, dpEnd) * 1e9);
            e.endNs = static_cast<std::int64_t>((std::max(rt.end, dpEnd) + opt) * 1e9);
            e.bytes = 0;
            out.events.push_back(e);
        }
    }

    const auto& crit = withTransfers[static_cast<std::size_t>(critical)];
    const auto& critNoP2p = noTransfers[static_cast<std::size_t>(critical)];
    out.stepTime = stepEnd;
    out.tpExposed = crit.tp;
    out.compute = crit.busy - crit.tp;
    out.ppExposed = std::max(0.0, crit.end - critNoP2p.end);
    out.bubble = std::max(0.0, critNoP2p.end - critNoP2p.busy);
    out.dpExposed = dpTime[static_cast<std::size_t>(critical)];
    out.optimizer = optTime[static_cast<std::size_t>(critical)];
    out.bubbleFraction = out.bubble / out.stepTime;
    out.bubbleTheory = p > 1 ? double(p - 1) / double(v * mb + p - 1) : 0.0;
    out.modelFlops = megatronModelFlops(m, par.globalBatch, full);
    const double gpus = double(par.worldSize());
    out.tokensPerSecond = double(par.globalBatch) * s / out.stepTime;
    out.tflopsPerGpu = out.modelFlops / (out.stepTime * gpus) / 1e12;
    out.mfu = out.tflopsPerGpu / dev.peakTflops(l.precision);

    // Memory of the most loaded pipeline rank.
    out.memoryCapacityGB = dev.memoryGB;
    for (std::int64_t r = 0; r < p; ++r) {
        const MemoryEstimate mem = memoryOfRank(l, c, r, double(schedule.peakInFlight(r)));
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
    // Nodes the groups span under the default order (tp fastest, then pp, then dp): no grid needed.
    const std::int64_t tpSpan = (par.tp > D || D % par.tp != 0) ? 2 : 1;
    const std::int64_t ppSpan = par.tp * par.pp > D ? 2 : 1;
    const std::int64_t dpSpan = par.tp * par.pp * par.dp > D ? std::min(par.dp, (par.tp * par.pp * par.dp + D - 1) / D) : 1;
    const std::int64_t v = par.schedule == ScheduleKind::Interleaved ? par.vpp : 1;
    const std::int64_t m = par.microBatches();
    const Costs c = computeCosts(l, tpSpan, ppSpan, v, m);
    const std::int64_t p = c.p;
    Estimate e;
    double tau = 0, tauTp = 0;  // the slowest rank's forward + backward of one micro-batch through all its chunks
    double lastBackward = 0;
    for (std::int64_t r = 0; r < p; ++r) {
        double total = 0, tp = 0;
        for (std::int64_t ch = 0; ch < v; ++ch) {
            const StageCost& sc = c.stage[static_cast<std::size_t>(ch * p + r)];
            total += sc.forward + sc.backward;
            tp += sc.forwardTp + sc.backwardTp;
        }
        if (total > tau) {
            tau = total;
            tauTp = tp;
            lastBackward = c.stage[static_cast<std::size_t>(r)].backward;
        }
    }
    e.compute = double(m) * (tau - tauTp);
    e.tp = double(m) * tauTp;
    e.bubble = double(p - 1) * tau / double(v);
    e.pp = p > 1 ? 2.0 * double(p - 1) * double(v) * c.p2p : 0.0;
    const double dpSeconds = dpAllReduceSeconds(l, paramsOfRank(l, c, 0) * (l.precision == Precision::Fp32 ? 4.0 : 2.0),
                                                par.dp, linkOf(l, dpSpan), dpSpan);
    e.dp = l.comm.staleness > 0 ? std::max(0.0, dpSeconds - (e.compute + e.tp + e.bubble + e.pp))
           : l.comm.overlap     ? std::max(0.0, dpSeconds - lastBackward)
                                : dpSeconds;
    const double opt = optimizerBytesOf(l, c, 0) / (dev.memoryBandwidthGBs * 1e9);
    e.stepTime = e.compute + e.tp + e.bubble + e.pp + e.dp + opt;
    e.tokensPerSecond = double(par.globalBatch * l.model.seqLen) / e.stepTime;
    e.tflopsPerGpu = megatronModelFlops(l.model, par.globalBatch, l.memory.recompute == Recompute::Full) / e.stepTime
                     / double(par.worldSize()) / 1e12;
    // Activations in flight on the first and last stage, in closed form (as Schedule::peakInFlight counts).
    double first = 0, last = 0;
    switch (par.schedule) {
    case ScheduleKind::GPipe: first = last = double(m); break;
    case ScheduleKind::OneFOneB: first = double(std::min(p, m)); last = 1; break;
    case ScheduleKind::Interleaved:
        first = m == p ? double(m * v) : double(std::min(m * v, (p - 1) * 2 + (v - 1) * p + 1));
        last = m == p ? double(m * v) : double(std::min(m * v, (v - 1) * p + 1));
        break;
    }
    const MemoryEstimate a = memoryOfRank(l, c, 0, first), b = memoryOfRank(l, c, p - 1, last);
    e.memoryGB = std::max(a.total(), b.total());
    e.fits = e.memoryGB <= dev.memoryGB;
    return e;
}

}  // namespace loom::plan
