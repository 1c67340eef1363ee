#pragma once

// Collectives on GPU clusters as NCCL runs them (docs/formulas.md, "Collectives on GPU clusters"): one ring
// per NIC across nodes, and the algorithm NCCL's tuner would pick (ring, tree, NVLink SHARP) for the size and
// the group. Loom's own CPU engine keeps the plain α-β ring of Formulas.h.

#include "engine/plan/ClusterSpec.h"
#include "engine/plan/Layout.h"

#include <cstdint>
#include <string_view>

namespace loom::plan {

enum class Collective { AllReduce, AllGather, ReduceScatter };
enum class NcclAlgorithm { Ring, Tree, Nvls };
std::string_view toString(NcclAlgorithm algorithm);

// A communicator: `ranks` members spread evenly over `nodes` nodes.
struct GroupShape {
    std::int64_t ranks = 1, nodes = 1;
    std::int64_t perNode() const { return nodes > 0 ? ranks / nodes : ranks; }
};

struct CollectiveTime {
    NcclAlgorithm algorithm = NcclAlgorithm::Ring;
    double seconds = 0;
    double busBandwidthGBs = 0; // what nccl-tests would print: bytes / seconds × the ring's bus factor
};

// The bandwidth one member of the group gets across nodes: the node's NICs are shared by its devices, and a
// group with k members on a node runs k of the node's D devices' rings, so it gets nics·k/D adapters of
// inter_node.bandwidth_gbs each (a group filling whole nodes: all of them), never more than the
// intra-node link feeding them.
double interNodeBandwidthGBs(const ClusterSpec& cluster, std::int64_t membersPerNode);

// NCCL's choice for one collective of `bytes` (the whole array) over `group`: the fastest of the algorithms
// its tuner allows there, each timed with the tuner's latency and bandwidth model (Simple protocol).
CollectiveTime ncclCollective(const ClusterSpec& cluster, Collective kind, double bytes, GroupShape group);

// Whether the layout's collectives run on NCCL (a GPU cluster with the nccl backend): then they are priced
// with ncclCollective, else with the α-β ring on the group's link.
bool usesNcclModel(const Layout& layout);

// The seconds of one collective in the layout's cluster: NCCL's model where it applies, else the α-β ring
// (2(n-1)·α + 2(n-1)/n·S/β for an all-reduce, half of it for the others) on the inter-node link when the group
// spans nodes, else the node's own.
double collectiveSeconds(const Layout& layout, Collective kind, double bytes, GroupShape group);

} // namespace loom::plan
