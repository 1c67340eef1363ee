#include "engine/plan/Simulator.h"

#include "engine/plan/EarlyWeights.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <tuple>
#include <utility>

namespace loom::plan {

namespace {

// When each (forward or backward, virtual stage, micro-batch) finished; NaN until it has.
class Finished {
public:
    Finished(std::int64_t virtualStages, std::int64_t microBatches)
        : m_m(microBatches)
        , m_at(static_cast<std::size_t>(2 * virtualStages * microBatches), std::numeric_limits<double>::quiet_NaN())
    {
    }
    double& at(bool forward, std::int64_t virtualStage, std::int64_t microBatch)
    {
        const std::int64_t vs = 2 * virtualStage + (forward ? 0 : 1);
        return m_at[static_cast<std::size_t>(vs * m_m + microBatch)];
    }

private:
    std::int64_t m_m;
    std::vector<double> m_at;
};

trace::TraceEvent computeEvent(std::int32_t rank, const PipelineOp& op, std::int64_t vs, double start, double end)
{
    trace::TraceEvent e;
    e.rank = rank;
    e.kind = op.kind == PipelineOp::Kind::Forward ? trace::EventKind::Forward
        : op.kind == PipelineOp::Kind::Weight     ? trace::EventKind::Weight
                                                  : trace::EventKind::Backward;
    e.lane = trace::Lane::Compute;
    e.source = trace::EventSource::Simulated;
    e.step = 0;
    e.microBatch = op.microBatch;
    e.stage = static_cast<std::int32_t>(vs);
    e.chunk = op.chunk;
    e.startNs = static_cast<std::int64_t>(start * 1e9);
    e.endNs = static_cast<std::int64_t>(end * 1e9);
    return e;
}

trace::TraceEvent commEvent(
    const trace::TraceEvent& op, trace::EventKind kind, double start, double end, double bytes, std::int32_t groupSize)
{
    trace::TraceEvent e = op;
    e.kind = kind;
    e.lane = trace::Lane::Comm;
    e.startNs = static_cast<std::int64_t>(start * 1e9);
    e.endNs = static_cast<std::int64_t>(end * 1e9);
    e.bytes = e.wireBytes = static_cast<std::uint64_t>(bytes);
    e.groupSize = groupSize;
    e.algorithm = trace::Algorithm::Library;
    return e;
}

// The collectives inside one op, one event per kind: the TP all-reduces (all-gathers and reduce-scatters
// with sequence parallelism) at the end of the op's time, which they block, and the ZeRO-3 all-gathers
// (and in backward the ZeRO-2/3 gradient reduce-scatters) from the op's start, beside the compute.
void collectiveEvents(const EventNaming& n, const StageCost& c, const trace::TraceEvent& op, bool fwd,
    std::vector<trace::TraceEvent>& out)
{
    using K = trace::EventKind;
    const double start = double(op.startNs) * 1e-9, end = double(op.endNs) * 1e-9;
    const double tp = fwd ? c.forwardTp : c.backwardTp, tpBytes = fwd ? c.forwardTpBytes : c.backwardTpBytes;
    if (tp > 0 && n.sequenceParallel) {
        out.push_back(commEvent(op, K::AllGather, end - tp, end - tp / 2, tpBytes / 2, n.tpSize));
        out.push_back(commEvent(op, K::ReduceScatter, end - tp / 2, end, tpBytes / 2, n.tpSize));
    } else if (tp > 0) {
        out.push_back(commEvent(op, K::AllReduce, end - tp, end, tpBytes, n.tpSize));
    }
    const double ring = fwd ? c.forwardCpComm : c.backwardCpComm;
    if (ring > 0 && n.cpSize > 1) {
        // The K/V blocks (and in backward the dK/dV accumulators) to the next CP rank, from the op's start.
        trace::TraceEvent e
            = commEvent(op, K::Send, start, start + ring, fwd ? c.forwardCpBytes : c.backwardCpBytes, n.cpSize);
        e.algorithm = trace::Algorithm::None;
        e.peer = op.rank + n.tpSize; // cp varies right after tp: the next CP rank of a cp = 0 rank
        out.push_back(e);
    }
    // MoE: the dispatch and combine all-to-alls, drawn before the TP collectives (half the time each).
    const double ep = fwd ? c.forwardEp : c.backwardEp, epBytes = fwd ? c.forwardEpBytes : c.backwardEpBytes;
    if (ep > 0) {
        out.push_back(commEvent(op, K::AllToAll, end - tp - ep, end - tp - ep / 2, epBytes / 2, n.epSize));
        out.push_back(commEvent(op, K::AllToAll, end - tp - ep / 2, end - tp, epBytes / 2, n.epSize));
    }
    const double gather = fwd ? c.forwardGather : c.backwardGather;
    if (gather <= 0)
        return;
    auto zero = [&](K kind, double from, double to) {
        trace::TraceEvent e = commEvent(op, kind, from, to, c.gatherBytes, n.dpSize);
        e.algorithm = c.gatherAlgorithm;
        out.push_back(e);
    };
    if (fwd) {
        zero(K::AllGather, start, start + gather);
    } else {
        // ZeRO-3 gathers the parameters again and reduce-scatters the gradients; ZeRO-2 only the latter
        const bool both = c.forwardGather > 0;
        const double split = both ? gather / 2 : 0;
        if (both)
            zero(K::AllGather, start, start + split);
        zero(K::ReduceScatter, start + split, start + gather);
    }
}

} // namespace

ScheduleCosts scheduleCostsOf(const std::vector<StageCost>& cost, double transfer)
{
    ScheduleCosts out;
    out.transfer = transfer;
    for (const StageCost& c : cost) {
        const double w = std::min(c.weight, c.backward);
        out.stage.push_back({ c.forward, c.backward - w, w });
    }
    return out;
}

std::vector<RankTimes> replaySchedule(const Schedule& schedule, const std::vector<StageCost>& cost, double transfer,
    const EventNaming* naming, std::vector<trace::TraceEvent>* events)
{
    const std::int64_t p = schedule.stages(), virtualStages = p * schedule.chunks();
    std::vector<RankTimes> times(static_cast<std::size_t>(p));
    Finished done(virtualStages, schedule.microBatches());
    std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
    std::vector<double> clock(static_cast<std::size_t>(p), 0);
    std::vector<EarlyWeights> early;
    for (std::int64_t r = 0; r < p; ++r)
        early.emplace_back(schedule, r);
    // W of ops[index] on rank r, from the rank's clock on: no collectives of its own; the last one ends the
    // rank's gradients.
    const auto runWeight = [&](std::int64_t r, std::size_t index) {
        const PipelineOp& op = schedule.opsOf(r)[index];
        const std::int64_t vs = schedule.virtualStage(r, op.chunk);
        const StageCost& c = cost[static_cast<std::size_t>(vs)];
        double& now = clock[static_cast<std::size_t>(r)];
        const double start = now;
        now += std::min(c.weight, c.backward);
        RankTimes& rt = times[static_cast<std::size_t>(r)];
        rt.busy += now - start;
        rt.lastBackwardEnd = now;
        if (events && naming)
            events->push_back(computeEvent(naming->rankOf(r), op, vs, start, now));
    };
    // A hand-off from virtual stage `from` to the rank's own next one (the V's turn) is a local copy.
    std::int64_t r = 0;
    const auto handOff = [&](std::int64_t from) { return schedule.rankOf(from) == r ? 0.0 : transfer; };
    for (bool progress = true; progress;) {
        progress = false;
        for (r = 0; r < p; ++r) {
            auto& i = next[static_cast<std::size_t>(r)];
            const auto& ops = schedule.opsOf(r);
            while (i < ops.size()) {
                const PipelineOp& op = ops[i];
                const std::int64_t vs = schedule.virtualStage(r, op.chunk);
                const bool fwd = op.kind == PipelineOp::Kind::Forward, weight = op.kind == PipelineOp::Kind::Weight;
                double ready = 0;
                if (weight) { // its own B, on this rank
                    const double at = done.at(false, vs, op.microBatch);
                    if (at != at)
                        break;
                    ready = at;
                } else if (fwd && vs > 0) {
                    const double at = done.at(true, vs - 1, op.microBatch);
                    if (at != at)
                        break;
                    ready = at + handOff(vs - 1);
                } else if (!fwd) {
                    const bool last = vs == virtualStages - 1;
                    const double at = last ? done.at(true, vs, op.microBatch) : done.at(false, vs + 1, op.microBatch);
                    if (at != at)
                        break;
                    ready = at + (last ? 0.0 : handOff(vs + 1));
                }
                EarlyWeights& fill = early[static_cast<std::size_t>(r)];
                double& now = clock[static_cast<std::size_t>(r)];
                if (weight) {
                    if (fill.runsHere(i))
                        runWeight(r, i);
                    ++i;
                    progress = true;
                    continue;
                }
                // The input is not here when the rank is free: an earlier B's W runs instead of waiting.
                while (ready > now) {
                    const auto w = fill.takeNext();
                    if (!w)
                        break;
                    runWeight(r, *w);
                }
                const StageCost& c = cost[static_cast<std::size_t>(vs)];
                const double w = schedule.splitsBackward() ? std::min(c.weight, c.backward) : 0.0;
                const double duration = fwd ? c.forward : c.backward - w;
                const double start = std::max(now, ready);
                now = start + duration;
                done.at(fwd, vs, op.microBatch) = now;
                if (!fwd)
                    fill.backwardDone(i);
                RankTimes& rt = times[static_cast<std::size_t>(r)];
                rt.busy += duration;
                rt.tp += fwd ? c.forwardTp : c.backwardTp;
                rt.dp += fwd ? c.forwardDp : c.backwardDp;
                rt.cp += fwd ? c.forwardCp : c.backwardCp;
                rt.ep += fwd ? c.forwardEp : c.backwardEp;
                if (!fwd) {
                    rt.lastBackwardStart = start;
                    rt.lastBackwardEnd = std::max(rt.lastBackwardEnd, now);
                }
                if (events && naming) {
                    trace::TraceEvent e = computeEvent(naming->rankOf(r), op, vs, start, now);
                    events->push_back(e);
                    collectiveEvents(*naming, c, e, fwd, *events);
                    const bool sends = fwd ? vs < virtualStages - 1 : vs > 0;
                    if (sends && handOff(fwd ? vs + 1 : vs - 1) > 0) {
                        trace::TraceEvent s = e;
                        s.kind = trace::EventKind::Send;
                        s.lane = trace::Lane::Comm;
                        s.startNs = e.endNs;
                        s.endNs = static_cast<std::int64_t>((now + transfer) * 1e9);
                        s.bytes = s.wireBytes = naming->sendBytes;
                        s.peer = naming->rankOf(schedule.rankOf(fwd ? vs + 1 : vs - 1));
                        events->push_back(s);
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
}

double pipelineOps(std::int64_t pp, std::int64_t chunks, std::int64_t microBatches)
{
    return 2.0 * double(microBatches) * double(chunks) * double(pp);
}

namespace {

// The two step lengths an extrapolation replays: 2p and 4p micro-batches (for the interleaved schedule with
// a group N other than p: at least 2p and at least two whole groups, and twice that, each plus m mod N so that
// both end in the step's last partial group).
std::pair<std::int64_t, std::int64_t> sampleLengths(
    ScheduleKind kind, std::int64_t pp, std::int64_t m, std::int64_t group)
{
    if (kind != ScheduleKind::Interleaved || group <= 0 || group == pp)
        return { 2 * pp, 4 * pp };
    const std::int64_t whole = group * std::max<std::int64_t>(2, (2 * pp + group - 1) / group), rest = m % group;
    return { whole + rest, 2 * whole + rest };
}

RankTimes extrapolate(const RankTimes& a, const RankTimes& b, double steps)
{
    auto at = [steps](double x, double y) { return x + (y - x) * steps; };
    return { at(a.busy, b.busy), at(a.tp, b.tp), at(a.end, b.end), at(a.lastBackwardStart, b.lastBackwardStart),
        at(a.lastBackwardEnd, b.lastBackwardEnd), at(a.dp, b.dp), at(a.cp, b.cp), at(a.ep, b.ep) };
}

// The layers of rank r's chunks, in chunk order.
std::vector<double> chunkLayers(const std::vector<StageCost>& cost, ScheduleKind kind, std::int64_t pp, std::int64_t v,
    std::int64_t r, double StageCost::*field = &StageCost::layers)
{
    std::vector<double> out;
    for (std::int64_t ch = 0; ch < v; ++ch)
        out.push_back(cost.at(static_cast<std::size_t>(stageOfChunk(kind, pp, r, ch))).*field);
    return out;
}

// Rank r's peak of held layers: the forwards' activations, and with a split backward W's copies.
double peakLayers(const Schedule& schedule, const std::vector<StageCost>& cost, std::int64_t r)
{
    const ScheduleKind kind = schedule.kind();
    const std::int64_t pp = schedule.stages(), v = schedule.chunks();
    return schedule.peakInFlight(
        r, chunkLayers(cost, kind, pp, v, r), chunkLayers(cost, kind, pp, v, r, &StageCost::deferred));
}

} // namespace

std::string replayLimitText()
{
    std::string n = std::to_string(static_cast<long long>(kMaxReplayOps));
    for (int at = static_cast<int>(n.size()) - 3; at > 0; at -= 3)
        n.insert(static_cast<std::size_t>(at), ",");
    return "more pipeline operations than the planner replays (" + n
        + " in one replay, or in each of two shorter replays of 2p and 4p micro-batches to extrapolate from)";
}

bool pipelineSimulatable(
    ScheduleKind kind, std::int64_t pp, std::int64_t chunks, std::int64_t microBatches, std::int64_t group)
{
    chunks = scheduleChunks(kind, chunks);
    if (pipelineOps(pp, chunks, microBatches) <= kMaxReplayOps)
        return true;
    const std::int64_t longer = sampleLengths(kind, pp, microBatches, group).second;
    return pipelineOps(pp, chunks, longer) <= kMaxReplayOps && microBatches > longer;
}

PipelineTimes simulatePipeline(ScheduleKind kind, std::int64_t pp, std::int64_t chunks, std::int64_t m,
    const std::vector<StageCost>& cost, double transfer, const EventNaming* naming,
    std::vector<trace::TraceEvent>* events, std::int64_t group, WeightFill fill)
{
    const std::int64_t v = scheduleChunks(kind, chunks);
    const auto scheduleOf = [&](std::int64_t microBatches) {
        Schedule s(kind, pp, v, microBatches, group, scheduleCostsOf(cost, transfer));
        s.setWeightFill(fill);
        return s;
    };
    const std::int64_t n = group > 0 ? group : pp; // the interleaved schedule's micro-batch group
    PipelineTimes out;
    out.microBatches = m;
    const bool full = pipelineOps(pp, v, m) <= kMaxReplayOps;
    // The events: from the full replay when it is small enough, else from a replay of the first micro-batches
    // (whole micro-batch groups, as interleaving needs).
    std::int64_t eventM = m;
    if (pipelineOps(pp, v, m) > kMaxEventOps) {
        const std::int64_t fit = static_cast<std::int64_t>(kMaxEventOps / pipelineOps(pp, v, 1));
        eventM = kind == ScheduleKind::Interleaved ? std::max(n, fit / n * n) : std::max<std::int64_t>(1, fit);
        eventM = std::min(eventM, m);
    }
    if (full) {
        const Schedule schedule = scheduleOf(m);
        out.withTransfers = replaySchedule(schedule, cost, transfer, naming, eventM == m ? events : nullptr);
        out.noTransfers = replaySchedule(schedule, cost, 0.0);
        for (std::int64_t r = 0; r < pp; ++r) {
            out.peakInFlight.push_back(schedule.peakInFlight(r));
            out.peakLayersInFlight.push_back(peakLayers(schedule, cost, r));
        }
    } else {
        out.extrapolated = true;
        std::tie(out.sampled, out.sampledLonger) = sampleLengths(kind, pp, m, group);
        const Schedule a = scheduleOf(out.sampled), b = scheduleOf(out.sampledLonger);
        const double steps = double(m - out.sampled) / double(out.sampledLonger - out.sampled);
        const auto a1 = replaySchedule(a, cost, transfer), b1 = replaySchedule(b, cost, transfer);
        const auto a0 = replaySchedule(a, cost, 0.0), b0 = replaySchedule(b, cost, 0.0);
        for (std::int64_t r = 0; r < pp; ++r) {
            const auto i = static_cast<std::size_t>(r);
            out.withTransfers.push_back(extrapolate(a1[i], b1[i], steps));
            out.noTransfers.push_back(extrapolate(a0[i], b0[i], steps));
            // GPipe holds every micro-batch; the others reach their peak in the warm-up, within the first
            // two groups.
            out.peakInFlight.push_back(kind == ScheduleKind::GPipe ? m : b.peakInFlight(r));
            const auto layers = chunkLayers(cost, kind, pp, v, r);
            out.peakLayersInFlight.push_back(kind == ScheduleKind::GPipe
                    ? double(m) * std::accumulate(layers.begin(), layers.end(), 0.0)
                    : peakLayers(b, cost, r));
        }
    }
    out.eventMicroBatches = eventM;
    if ((eventM == m && full) || !events) {
        out.eventTimes = out.withTransfers;
    } else {
        const Schedule shortened = scheduleOf(eventM);
        out.eventTimes = replaySchedule(shortened, cost, transfer, naming, events);
    }
    return out;
}

} // namespace loom::plan
