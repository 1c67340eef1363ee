#pragma once

#include "engine/comm/Communicator.h"

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace loom::comm {

// `comm.allreduce: "auto"`: the all-reduce algorithm chosen per backend, message size and group, the way
// NCCL's tuner chooses, from a small table measured with loom-commbench (the table, the runs behind it and
// how to re-measure it: docs/communication.md). The choice is made where the caller builds its
// CollectiveOptions, so a communicator only ever sees a concrete algorithm.

// What the choice depends on.
struct AllreduceQuery {
    std::string_view backend = "mpi"; // "mpi", "gloo" (CPU buffers) or "nccl" (GPU buffers)
    std::size_t bytes = 0; // one call's message
    int ranks = 1; // members of the group
    int nodes = 1; // nodes the group spans
};

// One row: for `backend`, groups inside one node (multiNode false) or across nodes, messages of at least
// `minBytes` use `algorithm` (until a later row of the same backend and locality takes over).
struct TuningRule {
    std::string_view backend;
    bool multiNode = false;
    std::size_t minBytes = 0;
    CollectiveAlgorithm algorithm = CollectiveAlgorithm::Library;
};

// The measured table, rows of one backend and locality in increasing minBytes.
const std::vector<TuningRule>& allreduceTuningTable();

// A concrete algorithm for the query (never fails): the last matching row of the table. A backend
// without rows (or a group of one rank) uses the library's own all-reduce; Hierarchical is chosen only
// when the group spans several nodes with more than one rank on some node.
CollectiveAlgorithm chooseAllreduce(
    const AllreduceQuery& query, const std::vector<TuningRule>& table = allreduceTuningTable());

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

// The nodes that the global ranks `members` span when node n holds ranks [n·ranksPerNode, (n+1)·ranksPerNode).
int nodesSpanned(const std::vector<std::int32_t>& members, std::int64_t ranksPerNode);

} // namespace loom::comm
