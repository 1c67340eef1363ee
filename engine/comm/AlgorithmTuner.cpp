#include "engine/comm/AlgorithmTuner.h"

#include <algorithm>
#include <set>

namespace loom::comm {

const std::vector<TuningRule>& allreduceTuningTable()
{
    // Measured with loom-commbench on one 2-core node (docs/communication.md, "Choosing the all-reduce").
    static const std::vector<TuningRule> table = {
        // MPI, one node: Open MPI's own all-reduce wins while latency dominates; above the crossing, Loom's
        // all-reduce through a shared-memory segment (memory-copy speed; 1.7 times the ring at 64 MiB).
        { "mpi", false, 0, CollectiveAlgorithm::Library },
        { "mpi", false, 16 << 20, CollectiveAlgorithm::SharedMemory },
        // MPI across nodes: latency first, then the two-level all-reduce that keeps most bytes inside nodes.
        { "mpi", true, 0, CollectiveAlgorithm::Library },
        { "mpi", true, 16 << 20, CollectiveAlgorithm::Hierarchical },
        // Gloo: its own ring all-reduce at every size.
        { "gloo", false, 0, CollectiveAlgorithm::Library },
        { "gloo", true, 0, CollectiveAlgorithm::Library },
        // NCCL has its own tuner (ring, tree, NVLS by size and topology): let it choose.
        { "nccl", false, 0, CollectiveAlgorithm::Library },
        { "nccl", true, 0, CollectiveAlgorithm::Library },
    };
    return table;
}

CollectiveAlgorithm chooseAllreduce(const AllreduceQuery& query, const std::vector<TuningRule>& table)
{
    if (query.ranks <= 1)
        return CollectiveAlgorithm::Library;
    const bool multiNode = query.nodes > 1;
    CollectiveAlgorithm chosen = CollectiveAlgorithm::Library;
    for (const TuningRule& rule : table)
        if (rule.backend == query.backend && rule.multiNode == multiNode && query.bytes >= rule.minBytes)
            chosen = rule.algorithm;
    // Two levels need a node with more than one member; one rank per node is a flat ring across nodes.
    if (chosen == CollectiveAlgorithm::Hierarchical && query.ranks <= query.nodes)
        chosen = CollectiveAlgorithm::Ring;
    return chosen;
}

CollectiveAlgorithm CollectiveTuning::allReduceAlgorithm(std::size_t bytes, int ranks) const
{
    return algorithm == CollectiveAlgorithm::Auto ? chooseAllreduce({ backend, bytes, ranks, nodes }) : algorithm;
}

CollectiveOptions CollectiveTuning::shardOptions(std::size_t bytes, int ranks) const
{
    CollectiveOptions options;
    options.chunkBytes = chunkBytes;
    switch (const CollectiveAlgorithm chosen = allReduceAlgorithm(bytes, ranks)) {
    case CollectiveAlgorithm::Ring:
    case CollectiveAlgorithm::ChunkedRing:
    case CollectiveAlgorithm::SharedMemory: // the segment's own reduce-scatter and all-gather (the ring without one)
        options.algorithm = chosen;
        break;
    case CollectiveAlgorithm::Hierarchical: // all-reduce only: its ring
        options.algorithm = CollectiveAlgorithm::Ring;
        break;
    default:
        options.algorithm = CollectiveAlgorithm::Library;
    }
    return options;
}

int nodesSpanned(const std::vector<std::int32_t>& members, std::int64_t ranksPerNode)
{
    std::set<std::int64_t> nodes;
    for (std::int32_t r : members)
        nodes.insert(r / std::max<std::int64_t>(ranksPerNode, 1));
    return std::max(1, static_cast<int>(nodes.size()));
}

} // namespace loom::comm
