#include "engine/plan/CostModel.h"

#include "engine/plan/AllreduceChoice.h"
#include "engine/plan/CollectiveCost.h"
#include "engine/plan/CostModelDetail.h"
#include "engine/plan/ExpertGroups.h"
#include "engine/plan/RankGrid.h"
#include "engine/plan/Schedule.h"
#include "engine/plan/Simulator.h"
#include "engine/plan/SoftwareStack.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

namespace loom::plan {

// The stage costs and memory terms (CostModelDetail.h) are this file's own vocabulary.
using namespace cost;

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

bool simulatable(const Layout& l)
{
    const auto& p = l.parallel;
    return p.microBatches() >= 1 && pipelineSimulatable(p.schedule, p.pp, p.vpp, p.microBatches(), p.microbatchGroup);
}

namespace {

// The nodes rank 0's expert group spans (every expert group has the same shape).
std::int64_t expertGroupNodes(const Layout& l, const RankGrid& grid)
{
    const ExpertGrid g = expertGrid(l);
    if (!l.model.isMoe() || l.parallel.ep <= 1 || (!g.megatron && l.parallel.dp % l.parallel.ep != 0))
        return 1;
    std::vector<std::int64_t> nodes;
    for (auto r : g.megatron ? megatronExpertGroupOf(grid, g, 0) : expertGroupOf(grid, l.parallel.ep, 0))
        nodes.push_back(grid.nodeOf(r));
    std::sort(nodes.begin(), nodes.end());
    return std::unique(nodes.begin(), nodes.end()) - nodes.begin();
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
            params * gradientBytesPerValue(l.precision, l.optimizer), { c.d, dpSpan }));
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

namespace {

// The busiest pipeline rank of the replay without point-to-point time, its idle time and the load imbalance.
void setBottleneck(Prediction& out, const std::vector<RankTimes>& ranks)
{
    if (ranks.empty())
        return;
    std::size_t busiest = 0;
    double sum = 0, pipelineEnd = 0; // the busiest stage idles until the pipeline's end, not its own
    for (std::size_t r = 0; r < ranks.size(); ++r) {
        sum += ranks[r].busy;
        pipelineEnd = std::max(pipelineEnd, ranks[r].end);
        if (ranks[r].busy > ranks[busiest].busy)
            busiest = r;
    }
    const RankTimes& b = ranks[busiest];
    out.bottleneckStage = std::int64_t(busiest);
    out.bottleneckBubble = std::max(0.0, pipelineEnd - b.busy);
    out.bottleneckBubbleFraction = out.stepTime > 0 ? out.bottleneckBubble / out.stepTime : 0.0;
    out.loadImbalance = b.busy > 0 ? std::max(0.0, 1.0 - sum / double(ranks.size()) / b.busy) : 0.0;
}

} // namespace

namespace {

// The layout as its software stack runs it: the device's ceilings times the stack's compute fraction
// (SoftwareStack.h), so that every cost term reads one device. The eager stacks' extra element-wise bytes are
// counted where the memory-bound work is (stageWork).
template <typename F> auto withStack(const Layout& l, F&& cost)
{
    if (!l.onGpuCluster() || l.stack.compute == 1.0)
        return cost(l);
    Layout s = l;
    s.cluster.device = stackDevice(l);
    return cost(s);
}

Prediction predictLayout(const Layout& l, bool withEvents);
Estimate estimateLayout(const Layout& l);

// The stage costs predict replays the layout's schedule with, over the spans of its rank grid.
Costs layoutCosts(const Layout& l, const RankGrid& grid)
{
    const auto& par = l.parallel;
    return computeCosts(l, grid.maxNodesSpanned(GroupKind::Tensor), grid.maxNodesSpanned(GroupKind::Pipeline),
        scheduleChunks(par.schedule, par.vpp), par.microBatches(), grid.gradientNodesSpanned(),
        par.cp > 1 ? grid.maxNodesSpanned(GroupKind::Context) : 1, expertGroupNodes(l, grid));
}

} // namespace

ScheduleCosts scheduleCosts(const Layout& l)
{
    return withStack(l, [](const Layout& s) {
        const Costs c = layoutCosts(s, RankGrid::forLayout(s));
        return scheduleCostsOf(c.stage, c.p2p);
    });
}

Prediction predict(const Layout& l)
{
    return predict(l, true);
}

Prediction predict(const Layout& l, bool withEvents)
{
    return withStack(l, [withEvents](const Layout& s) { return predictLayout(s, withEvents); });
}

Estimate estimate(const Layout& l)
{
    return withStack(l, [](const Layout& s) { return estimateLayout(s); });
}

namespace {

Prediction predictLayout(const Layout& l, bool withEvents)
{
    Prediction out;
    const ModelSpec& m = l.model;
    const auto& par = l.parallel;
    const DeviceSpec& dev = l.cluster.device;
    const std::int64_t chunks = scheduleChunks(par.schedule, par.vpp);
    const RankGrid grid = RankGrid::forLayout(l);
    const std::int64_t dpSpan = grid.gradientNodesSpanned();
    const Costs c = layoutCosts(l, grid);
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
    const PipelineTimes pipe = simulatePipeline(par.schedule, p, chunks, mb, cost, p2p, &naming,
        withEvents ? &out.events : nullptr, par.microbatchGroup, par.weightFill);
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
    const double gradWidth = gradientBytesPerValue(l.precision, l.optimizer);
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
                params * actBytes, shardAlgorithm(dpAlgorithm)));
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
    for (std::int64_t ch = 0; ch < v; ++ch) { // FSDP2's own costs inside dpExposed (CostSharded.cpp)
        const StageCost& sc = cost[static_cast<std::size_t>(stageOfChunk(par.schedule, p, critical, ch))];
        out.shardEdges += double(mb) * (sc.forwardShardEdge + sc.backwardShardEdge);
        out.shardCopies += double(mb) * (sc.forwardShardCopy + sc.backwardShardCopy);
    }
    out.bubbleFraction = out.bubble / out.stepTime;
    out.bubbleTheory = p > 1 ? double(p - 1) / double(v * mb + p - 1) : 0.0;
    if (splitsBackward(par.schedule) && p > 1)
        out.bubbleTheory = zeroBubbleTheory(par.schedule, p, mb, c, 0);
    setBottleneck(out, noTransfers);
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
    out.fits = out.memory.fitsIn(out.memoryCapacityGB);
    if (!out.fits)
        out.notes.push_back("needs " + std::to_string(out.memory.total()).substr(0, 6) + " GB per device but "
            + l.cluster.device.name + " has " + std::to_string(dev.memoryGB).substr(0, 6) + " GB");
    return out;
}

Estimate estimateLayout(const Layout& l)
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
    std::int64_t epSpan = epStride * par.ep > D ? std::min(par.ep, (epStride * par.ep + D - 1) / D) : 1;
    if (par.expertTp > 0) { // Megatron-Core's grid: etp·ep consecutive of a stage's tp, cp, then dp ranks
        const std::int64_t members = par.expertTp * par.ep, dpMembers = (members + tc - 1) / tc;
        epSpan = members <= tc ? (tc > D ? std::min(par.ep, (members + D - 1) / D) : 1)
                               : (epStride * dpMembers > D ? std::min(par.ep, (epStride * dpMembers + D - 1) / D) : 1);
    }
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
    // Zero-bubble schedules replay their ops for each rank's peak: the rank with the most layers stands in
    // for the middle ranks there, so that an estimate replays at most three ranks.
    const bool split = splitsBackward(par.schedule);
    std::int64_t most = 0;
    double mostHeld = -1;
    for (std::int64_t r = 0; r < p; ++r)
        if (const double held = split ? layersOfRank(c, r) : heldLayersAtFirstPeak(l, c, r, m); held > mostHeld)
            most = r, mostHeld = held;
    e.memoryGB = 0;
    for (std::int64_t r : { std::int64_t(0), most, p - 1 })
        e.memoryGB = std::max(e.memoryGB, memoryOfRank(l, c, r, heldLayersAtFirstPeak(l, c, r, m)).total());
    e.fits = e.memoryGB <= dev.memoryGB;
    return e;
}

} // namespace

} // namespace loom::plan
