#pragma once

// A measured-looking pipeline run for the timeline tests: `stages` stages of `perStage` ranks (rank
// s·perStage + j), each step a forward, a send to the next stage (recv there), a backward, a DP
// all-reduce in the stage's group (id s, its ranks in replica order) and an optimizer step.

#include "engine/trace/TraceEvent.h"

#include <vector>

namespace loom::views::test {

struct FixtureRun {
    std::vector<trace::TraceEvent> events;
    std::vector<trace::GroupInfo> groups;
};

inline trace::TraceEvent fixtureEvent(
    int rank, trace::EventKind kind, std::int64_t start, std::int64_t end, int step, int stage)
{
    trace::TraceEvent e;
    e.rank = rank;
    e.kind = kind;
    e.lane = trace::laneOf(kind);
    e.startNs = start;
    e.endNs = end;
    e.step = step;
    e.stage = stage;
    e.microBatch = 0;
    return e;
}

inline FixtureRun pipelineFixture(int stages, int perStage, int steps)
{
    using trace::EventKind;
    FixtureRun run;
    for (int s = 0; s < stages; ++s) {
        trace::GroupInfo g;
        g.id = s;
        g.kind = trace::GroupKind::Data;
        g.name = "DP group of pp=" + std::to_string(s);
        for (int j = 0; j < perStage; ++j)
            g.ranks.push_back(s * perStage + j);
        run.groups.push_back(g);
    }
    const std::int64_t f = 100000, step = std::int64_t(2 * stages + 4) * f;
    for (int t = 0; t < steps; ++t) {
        const std::int64_t base = t * step;
        for (int s = 0; s < stages; ++s)
            for (int j = 0; j < perStage; ++j) {
                const int r = s * perStage + j;
                const std::int64_t fs = base + s * f;
                run.events.push_back(fixtureEvent(r, EventKind::Forward, fs, fs + f * 9 / 10, t, s));
                if (s + 1 < stages) {
                    auto send = fixtureEvent(r, EventKind::Send, fs + f * 9 / 10, fs + f, t, s);
                    send.peer = r + perStage;
                    send.bytes = 1 << 20;
                    run.events.push_back(send);
                }
                if (s > 0) {
                    auto recv = fixtureEvent(r, EventKind::Recv, fs - f / 5, fs, t, s);
                    recv.peer = r - perStage;
                    recv.bytes = 1 << 20;
                    run.events.push_back(recv);
                }
                const std::int64_t bs = base + (2 * stages - 1 - s) * f;
                run.events.push_back(fixtureEvent(r, EventKind::Backward, bs, bs + f * 9 / 10, t, s));
                auto ar
                    = fixtureEvent(r, EventKind::AllReduce, base + 2 * stages * f, base + (2 * stages + 2) * f, t, s);
                ar.group = s;
                ar.groupSize = perStage;
                ar.bytes = 8 << 20;
                ar.microBatch = -1;
                run.events.push_back(ar);
                auto opt = fixtureEvent(
                    r, EventKind::Optimizer, base + (2 * stages + 2) * f, base + (2 * stages + 3) * f, t, s);
                opt.microBatch = -1;
                run.events.push_back(opt);
            }
    }
    return run;
}

} // namespace loom::views::test
