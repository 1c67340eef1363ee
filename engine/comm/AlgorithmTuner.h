#pragma once

#include "engine/comm/Communicator.h"
#include "engine/plan/AllreduceChoice.h"

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace loom::comm {

// `comm.allreduce: "auto"`: the table and the choice are plan code (engine/plan/AllreduceChoice.h), shared
// with the cost model, the simulator and calibration; these names keep the communication layer's spelling.
// The choice is made where the caller builds its CollectiveOptions, so a communicator only ever sees a
// concrete algorithm.
using plan::AllreduceQuery;
using plan::allreduceTuningTable;
using plan::chooseAllreduce;
using plan::nodesSpanned;
using plan::TuningRule;

// The data-parallel group's choice as the layout makes it (`comm.allreduce` and `comm.chunk_kb`), resolved
// per call: Auto consults the table with each call's bytes.
struct CollectiveTuning {
    std::string_view backend = "mpi";
    int nodes = 1;
    CollectiveAlgorithm algorithm = CollectiveAlgorithm::Auto; // the layout's comm.allreduce
    std::size_t chunkBytes = 1 << 20;

    // The all-reduce of `bytes` over `ranks`: the table's choice for Auto, else `algorithm`.
    CollectiveAlgorithm allReduceAlgorithm(std::size_t bytes, int ranks) const;
    // Options for a reduce-scatter or an all-gather of `bytes` in all (every member's blocks) over `ranks`:
    // the all-reduce's algorithm, since each is half of an all-reduce (of the ring's or of the shared-memory
    // segment's) and so crosses over at the same size; the two-level algorithm is all-reduce only, so it
    // gives the ring.
    CollectiveOptions shardOptions(std::size_t bytes, int ranks) const;
};

} // namespace loom::comm
