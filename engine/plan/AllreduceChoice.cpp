#include "engine/plan/AllreduceChoice.h"

#include "engine/plan/Formulas.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace loom::plan {

using trace::Algorithm;

const std::vector<TuningRule>& allreduceTuningTable()
{
    // Measured with loom-commbench on one 2-core node (docs/communication.md, "Choosing the all-reduce").
    static const std::vector<TuningRule> table = {
        // MPI, one node: Open MPI's own all-reduce wins while latency dominates; above the crossing, Loom's
        // all-reduce through a shared-memory segment (memory-copy speed; 1.7 times the ring at 64 MiB).
        { "mpi", false, 0, Algorithm::Library },
        { "mpi", false, 16 << 20, Algorithm::SharedMemory },
        // MPI across nodes: latency first, then the two-level all-reduce that keeps most bytes inside nodes.
        { "mpi", true, 0, Algorithm::Library },
        { "mpi", true, 16 << 20, Algorithm::Hierarchical },
        // Gloo: its own ring all-reduce at every size.
        { "gloo", false, 0, Algorithm::Library },
        { "gloo", true, 0, Algorithm::Library },
        // NCCL has its own tuner (ring, tree, NVLS by size and topology): let it choose.
        { "nccl", false, 0, Algorithm::Library },
        { "nccl", true, 0, Algorithm::Library },
    };
    return table;
}

Algorithm chooseAllreduce(const AllreduceQuery& query, const std::vector<TuningRule>& table)
{
    if (query.ranks <= 1)
        return Algorithm::Library;
    const bool multiNode = query.nodes > 1;
    Algorithm chosen = Algorithm::Library;
    for (const TuningRule& rule : table)
        if (rule.backend == query.backend && rule.multiNode == multiNode && query.bytes >= rule.minBytes)
            chosen = rule.algorithm;
    // Two levels need a node with more than one member; one rank per node is a flat ring across nodes.
    if (chosen == Algorithm::Hierarchical && query.ranks <= query.nodes)
        chosen = Algorithm::Ring;
    return chosen;
}

Algorithm resolveAllreduce(Algorithm requested, const AllreduceQuery& query)
{
    return requested == Algorithm::Auto ? chooseAllreduce(query) : requested;
}

Algorithm shardAlgorithm(Algorithm allReduce)
{
    switch (allReduce) {
    case Algorithm::Ring:
    case Algorithm::ChunkedRing:
    case Algorithm::SharedMemory: // the segment's own reduce-scatter and all-gather (the ring without one)
        return allReduce;
    case Algorithm::Hierarchical: // all-reduce only: its ring
        return Algorithm::Ring;
    default:
        return Algorithm::Library;
    }
}

int nodesSpanned(const std::vector<std::int32_t>& members, std::int64_t ranksPerNode)
{
    std::set<std::int64_t> nodes;
    for (std::int32_t r : members)
        nodes.insert(r / std::max<std::int64_t>(ranksPerNode, 1));
    return std::max(1, static_cast<int>(nodes.size()));
}

std::size_t dpAllreduceBytes(const Layout& layout, double stageParameters)
{
    const auto bucket = static_cast<std::size_t>(layout.comm.bucketMb * (1 << 20));
    return std::min(static_cast<std::size_t>(std::max(0.0, stageParameters) * 4.0), bucket);
}

Algorithm dpAllreduceAlgorithm(const Layout& layout, double stageParameters, int ranks, int nodes)
{
    return resolveAllreduce(layout.comm.allreduce,
        { toString(layout.commBackend()), dpAllreduceBytes(layout, stageParameters), ranks, nodes });
}

std::size_t sharedMemorySlotBytes(std::int64_t ranks)
{
    const std::size_t members = static_cast<std::size_t>(std::max<std::int64_t>(ranks, 1));
    return std::clamp<std::size_t>((16u << 20) / members, 1u << 20, 8u << 20);
}

double allreduceSeconds(
    const Layout& l, Algorithm algorithm, double bytes, std::int64_t ranks, std::int64_t nodes, const LinkSpec& link)
{
    if (ranks <= 1 || bytes <= 0)
        return 0;
    if (algorithm == Algorithm::Hierarchical && nodes > 1) {
        const double k = double(std::max<std::int64_t>(1, ranks / nodes));
        return ringAllReduceSeconds(bytes, static_cast<std::int64_t>(k), l.cluster.intraNode)
            + ringAllReduceSeconds(bytes / k, nodes, link);
    }
    if (algorithm == Algorithm::SharedMemory && nodes <= 1) {
        const double pieces = std::ceil(bytes / double(sharedMemorySlotBytes(ranks)));
        const double n = double(ranks), memBw = l.cluster.device.memoryBandwidthGBs * 1e9;
        return 2.0 * pieces * l.cluster.intraNode.latencyUs * 1e-6 + 4.0 * (n - 1.0) / n * bytes / memBw;
    }
    return ringAllReduceSeconds(bytes, ranks, link);
}

} // namespace loom::plan
