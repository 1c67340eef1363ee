#include "engine/plan/Simulator.h"

#include <algorithm>
#include <limits>

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
    e.kind = op.kind == PipelineOp::Kind::Forward ? trace::EventKind::Forward : trace::EventKind::Backward;
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

} // namespace

std::vector<RankTimes> replaySchedule(const Schedule& schedule, const std::vector<StageCost>& cost, double transfer,
    const EventNaming* naming, std::vector<trace::TraceEvent>* events)
{
    const std::int64_t p = schedule.stages(), virtualStages = p * schedule.chunks();
    std::vector<RankTimes> times(static_cast<std::size_t>(p));
    Finished done(virtualStages, schedule.microBatches());
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
                    const double at = done.at(true, vs - 1, op.microBatch);
                    if (at != at)
                        break;
                    ready = at + transfer;
                } else if (!fwd) {
                    const bool last = vs == virtualStages - 1;
                    const double at = last ? done.at(true, vs, op.microBatch) : done.at(false, vs + 1, op.microBatch);
                    if (at != at)
                        break;
                    ready = at + (last ? 0.0 : transfer);
                }
                const StageCost& c = cost[static_cast<std::size_t>(vs)];
                const double duration = fwd ? c.forward : c.backward;
                double& now = clock[static_cast<std::size_t>(r)];
                const double start = std::max(now, ready);
                now = start + duration;
                done.at(fwd, vs, op.microBatch) = now;
                RankTimes& rt = times[static_cast<std::size_t>(r)];
                rt.busy += duration;
                rt.tp += fwd ? c.forwardTp : c.backwardTp;
                if (!fwd) {
                    rt.lastBackwardStart = start;
                    rt.lastBackwardEnd = now;
                }
                if (events && naming) {
                    trace::TraceEvent e = computeEvent(naming->rankOf(r), op, vs, start, now);
                    events->push_back(e);
                    const bool sends = fwd ? vs < virtualStages - 1 : vs > 0;
                    if (sends && transfer > 0) {
                        trace::TraceEvent s = e;
                        s.kind = trace::EventKind::Send;
                        s.lane = trace::Lane::Comm;
                        s.startNs = e.endNs;
                        s.endNs = static_cast<std::int64_t>((now + transfer) * 1e9);
                        s.bytes = s.wireBytes = naming->sendBytes;
                        s.peer = naming->rankOf((fwd ? vs + 1 : vs - 1 + virtualStages) % p);
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

} // namespace loom::plan
