#pragma once

#include "engine/comm/Communicator.h"
#include "engine/trace/TraceEvent.h"

#include <cstdint>
#include <vector>

namespace loom::comm {

// This rank's clock against rank 0's: offset = mine - rank 0's, from the round trip with the smallest
// delay among `rounds` (Cristian's algorithm); error = half that round trip.
struct ClockAlignment {
    std::int64_t offsetNs = 0;
    std::int64_t errorNs = 0;
};

// Collective over `world` (point-to-point pings between rank 0 and each rank, then a scatter of the
// results). Rank 0 gets {0, 0}. Works with every backend's host communicator.
ClockAlignment alignClock(Communicator& world, int rounds = 8);

// Collective over `world`: every rank's events, with `offsetNs` subtracted (times on rank 0's clock), arrive
// at rank 0 in rank order; the others get nothing back.
std::vector<trace::TraceEvent> gatherEvents(
    Communicator& world, const std::vector<trace::TraceEvent>& mine, std::int64_t offsetNs);
// Collective over `world`: every rank's `value`, at rank 0 in rank order (empty elsewhere).
std::vector<std::int64_t> gatherValues(Communicator& world, std::int64_t value);

} // namespace loom::comm
