#pragma once

#include "engine/plan/ClusterSpec.h"

#include <cstdint>
#include <string>
#include <vector>

namespace loom::plan {

// An all-reduce taken apart into the steps of its algorithm, for teaching (the workbench's all-reduce
// stepper) and for checking the α-β model by hand. Pure.
//
// Ring (Patarasuk and Yuan; what NCCL and Loom's ring do): the buffer of B bytes is cut into n chunks of
// B/n. Reduce-scatter, steps s = 0 … n−2: the member at ring position i sends chunk (i − s) mod n to position
// i+1, which adds it to its own; after n−1 steps position i holds the full sum of chunk (i+1) mod n.
// All-gather, steps s = 0 … n−2: position i sends chunk (i + 1 − s) mod n on, which the next one keeps.
// 2(n−1) steps in all, every member sending B/n bytes in each: 2(n−1)/n · B per member (the bus-bandwidth
// factor), and each step costs α + (B/n)/β on the slowest link it uses.
//
// Hierarchical (k members per node on N nodes, the same k on every node): a ring reduce-scatter inside
// each node (k−1 steps of B/k), a ring all-reduce of each member's 1/k share across the nodes among the
// members with the same place in their node (2(N−1) steps of B/(k·N)), then a ring all-gather inside each
// node (k−1 steps of B/k): 2(k−1) + 2(N−1) steps, and only B/k · 2(N−1)/N of each member's bytes cross
// the slower inter-node link.
struct Transfer {
    std::int64_t src = 0, dst = 0; // ranks
    std::int64_t chunk = 0; // which piece of the buffer, 0 … chunks−1 at the step's granularity
    double bytes = 0;
    bool interNode = false;
};

struct AllReduceStep {
    std::string phase; // "reduce-scatter", "all-gather"; hierarchical adds "inter-node reduce-scatter" and
                       // "inter-node all-gather" between them
    std::int64_t chunks = 0; // pieces the buffer is cut into at this step
    std::vector<Transfer> transfers;
    double seconds = 0; // α + bytes/β of the slowest link the step uses
};

// The steps of a ring all-reduce of `bytes` over `ranks` (in ring order); `devicesPerNode` says which
// transfers cross nodes. Empty for fewer than two ranks.
std::vector<AllReduceStep> ringAllReduceSteps(const std::vector<std::int64_t>& ranks, double bytes,
    std::int64_t devicesPerNode, const LinkSpec& intraNode, const LinkSpec& interNode);

// The steps of a hierarchical all-reduce: `ranks` grouped by node (rank / devicesPerNode). Falls back to the
// ring when the group lies in one node, or when its nodes hold different numbers of members.
std::vector<AllReduceStep> hierarchicalAllReduceSteps(const std::vector<std::int64_t>& ranks, double bytes,
    std::int64_t devicesPerNode, const LinkSpec& intraNode, const LinkSpec& interNode);

double totalSeconds(const std::vector<AllReduceStep>& steps);
// Bytes one rank sends over all the steps, and of those over inter-node links.
double bytesSentBy(const std::vector<AllReduceStep>& steps, std::int64_t rank, bool interNodeOnly = false);

} // namespace loom::plan
