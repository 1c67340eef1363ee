#pragma once

// The op lists of a pipeline schedule replayed with each virtual stage's op times, for the schedule tests
// (tst_zerobubble, tst_timedschedule).
#include "engine/plan/Schedule.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

namespace loom::plan::testing {

// Replays the lists with each virtual stage's times and a hand-off of `transfer` between ranks; returns the
// makespan, or -1 on a deadlock.
inline double replay(const Schedule& s, const ScheduleCosts& c)
{
    const std::int64_t p = s.stages(), last = p * s.chunks() - 1;
    std::map<std::tuple<int, int, std::int64_t>, double> done; // (kind, mb, virtual stage) -> end
    std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
    std::vector<double> clock(static_cast<std::size_t>(p), 0);
    for (bool progress = true; progress;) {
        progress = false;
        for (std::int64_t r = 0; r < p; ++r) {
            auto& i = next[static_cast<std::size_t>(r)];
            for (const auto& ops = s.opsOf(r); i < ops.size(); ++i) {
                const PipelineOp& op = ops[i];
                const std::int64_t vs = s.virtualStage(r, op.chunk);
                const bool fwd = op.kind == PipelineOp::Kind::Forward, weight = op.kind == PipelineOp::Kind::Weight;
                const std::int64_t from = fwd ? vs - 1 : weight || vs == last ? vs : vs + 1;
                const int fromKind = fwd || (!weight && vs == last) ? 0 : 1;
                double ready = 0;
                if (!(fwd && vs == 0)) {
                    const auto it = done.find({ fromKind, op.microBatch, from });
                    if (it == done.end())
                        break;
                    ready = it->second + (s.rankOf(from) != r ? c.transfer : 0.0);
                }
                const OpTimes& t = c.stage[static_cast<std::size_t>(vs)];
                const double cost = fwd ? t.forward : weight ? t.weight : t.backward;
                auto& now = clock[static_cast<std::size_t>(r)];
                now = std::max(now, ready) + cost;
                done[{ int(op.kind), op.microBatch, vs }] = now;
                progress = true;
            }
        }
    }
    double makespan = 0;
    for (std::int64_t r = 0; r < p; ++r) {
        if (next[static_cast<std::size_t>(r)] != s.opsOf(r).size())
            return -1;
        makespan = std::max(makespan, clock[static_cast<std::size_t>(r)]);
    }
    return makespan;
}

inline ScheduleCosts uniform(std::int64_t stages, double f, double b, double w, double transfer = 0)
{
    ScheduleCosts c;
    c.stage.assign(static_cast<std::size_t>(stages), OpTimes { f, b, w });
    c.transfer = transfer;
    return c;
}

// The same with F, B and W taking tf, tb and tw on every virtual stage (an unsplit backward tb + tw).
inline double replay(const Schedule& s, double tf, double tb, double tw)
{
    return replay(s, uniform(s.stages() * s.chunks(), tf, s.splitsBackward() ? tb : tb + tw, tw));
}

} // namespace loom::plan::testing
