#pragma once

#include "engine/trace/TraceEvent.h"

#include <mpi.h>

#include <cstdint>
#include <vector>

namespace loom::comm {

// This rank's clock against rank 0's: offset = mine - rank 0's, from the round trip with the smallest
// delay among `rounds` (Cristian's algorithm); error = half that round trip.
struct ClockAlignment {
    std::int64_t offsetNs = 0;
    std::int64_t errorNs = 0;
};

// Collective over `comm`. Rank 0 gets {0, 0}.
ClockAlignment alignClock(MPI_Comm comm, int rounds = 8);

// Collective over `comm`: every rank's events, with `offsetNs` subtracted (times on rank 0's clock), arrive
// at rank 0 in rank order; the others get nothing back.
std::vector<trace::TraceEvent> gatherEvents(MPI_Comm comm, const std::vector<trace::TraceEvent>& mine, std::int64_t offsetNs);

}  // namespace loom::comm
