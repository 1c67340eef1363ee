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

// The same table for a reduce-scatter or an all-gather (ZeRO's gradient and parameter collectives): the
// ring's crossing lies where the all-reduce's does (each is half of a ring all-reduce); the two-level
// and shared-memory algorithms exist for all-reduce only, so their rows give the ring.
CollectiveAlgorithm chooseShardCollective(
    const AllreduceQuery& query, const std::vector<TuningRule>& table = allreduceTuningTable());

// The data-parallel group's choice as the layout makes it (`comm.allreduce` and `comm.chunk_kb`), resolved
// per call: `automatic` consults the table with each call's bytes, else `fixed` is used (Hierarchical
// becoming the ring for a reduce-scatter or an all-gather).
struct CollectiveTuning {
    std::string_view backend = "mpi";
    int nodes = 1;
    bool automatic = true;
    CollectiveAlgorithm fixed = CollectiveAlgorithm::Library;
    std::size_t chunkBytes = 1 << 20;

    // Options for a reduce-scatter or an all-gather of `bytes` in all (every member's blocks) over `ranks`.
    CollectiveOptions shardOptions(std::size_t bytes, int ranks) const;
};

// The nodes that the global ranks `members` span when node n holds ranks [n·ranksPerNode, (n+1)·ranksPerNode).
int nodesSpanned(const std::vector<std::int32_t>& members, std::int64_t ranksPerNode);

} // namespace loom::comm
