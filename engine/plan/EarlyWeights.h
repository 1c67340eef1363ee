#pragma once

#include "engine/plan/Schedule.h"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

namespace loom::plan {

// Zero-bubble schedules with weight_fill "idle" (Schedule::fillsIdleWithWeight): a rank about to wait for
// an activation or a gradient that has not arrived runs, instead of waiting, the oldest W whose B it has
// done, ahead of the place its op list gives it. The schedules place W by list scheduling with the
// predicted op times; on real hardware the ops' times differ from them (shared cores, stragglers), and a W
// that runs where the rank would otherwise idle takes the same work off a later, busier place.
//
// A W that is the last of its chunk in the op list is anchored: it releases the chunk's gradients to the
// data-parallel reduction (and ZeRO), whose collectives every replica must start in the same order, so it
// always runs where the list puts it. Moving a W earlier only shortens what it holds, so the memory of the
// listed order (Schedule::peakInFlight) stays an upper bound.
//
// The engine's pipeline executor and the simulator's replay both keep one of these per rank and step, so
// the prediction replays the rule the engine runs. Indices are into Schedule::opsOf(rank).
class EarlyWeights {
public:
    EarlyWeights(const Schedule& schedule, std::int64_t pipelineRank);

    // The B at ops[index] is done: its W may now run early (unless anchored, or the rule is off).
    void backwardDone(std::size_t index);
    // The oldest W that may run now and has not run; marks it run. Empty when there is none.
    std::optional<std::size_t> takeNext();
    // The list reaches the W at ops[index]: true (and marked run) unless it already ran early.
    bool runsHere(std::size_t index)
    {
        const bool here = m_ran[index] == 0;
        m_ran[index] = 1;
        return here;
    }

private:
    bool m_on;
    std::vector<std::int64_t> m_weightOf; // per op: for a B, the index of its W; else -1
    std::vector<char> m_anchored, m_ran;
    std::deque<std::size_t> m_ready;
};

} // namespace loom::plan
