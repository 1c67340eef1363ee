#pragma once

#include "engine/plan/Layout.h"

#include <cstdint>
#include <string>
#include <vector>

namespace loom::plan {

// A rank's place in the parallel dimensions (cp last so that {tp, pp, dp} initialisers keep their meaning).
struct RankCoord {
    std::int64_t tp = 0;
    std::int64_t pp = 0;
    std::int64_t dp = 0;
    std::int64_t cp = 0;

    bool operator==(const RankCoord&) const = default;
};

// A rank's TP, CP, PP or DP group: one group-kind enum with the communication layer and the trace
// (trace::GroupKind; the grid's functions take Tensor, Context, Pipeline or Data).
using GroupKind = trace::GroupKind;

// Ranks <-> (tp, pp, dp) coordinates <-> devices, and the TP, PP and DP groups: one pure function of
// (tp, pp, dp, devices per node, order), shared by the planner, the simulator, the launcher and the engine.
//
// Ranks fill devices in order: rank r runs on node r / devicesPerNode, local device r % devicesPerNode.
// The default order, tp-pp-dp, makes tp vary fastest, then pp, then dp:
//     rank = tp + T * (pp + P * dp)
// so a TP group is T consecutive ranks (inside one node whenever T divides the devices per node: the
// fastest links carry the most frequent traffic), a pipeline (all its stages) comes next, and data-parallel
// replicas are outermost. The alternative, tp-dp-pp (Megatron-LM's), puts dp before pp:
//     rank = tp + T * (dp + D * pp)
//
// Context parallelism (cp = C > 1) sits right after tp in both orders, since ring attention exchanges K/V
// in every layer's forward and backward (more often than dp's once-a-step reduction, less than tp's
// all-reduces): tp-cp-pp-dp is rank = tp + T * (cp + C * (pp + P * dp)) and tp-cp-dp-pp (Megatron-LM's
// tp-cp-ep-dp-pp; expert groups add no ranks) is rank = tp + T * (cp + C * (dp + D * pp)). A node of 8
// with tp=2, cp=4 holds one whole TP×CP block. The gradients of a CP group's ranks are summed like those
// of DP replicas: gradientGroupOf() is the dp·cp ranks that reduce them together (Megatron's dp-cp group).
//
// Worked example (docs/rank-grid.md; also tests/engine/plan/tst_rankgrid.cpp): 16 ranks, tp=2, pp=4,
// dp=2 on 2 nodes of 8, order tp-pp-dp:
//     rank:  0 1 | 2 3 | 4 5 | 6 7 || 8 9 | 10 11 | 12 13 | 14 15
//     pp:    0 0 | 1 1 | 2 2 | 3 3 || 0 0 |  1  1 |  2  2 |  3  3
//     dp:    0 ...                 0 || 1 ...                    1
// node 0 holds replica 0's whole pipeline and node 1 replica 1's; TP groups {0,1}, {2,3}, ...; PP groups
// {0,2,4,6}, {1,3,5,7}, {8,10,12,14}, {9,11,13,15}; DP groups {0,8}, {1,9}, ..., {7,15} cross the nodes.
class RankGrid {
public:
    // Preconditions: tp, pp, dp, cp >= 1, devicesPerNode >= 1 (the validator checks these for layouts).
    RankGrid(std::int64_t tp, std::int64_t pp, std::int64_t dp, std::int64_t devicesPerNode,
        RankOrder order = RankOrder::TpPpDp, std::int64_t cp = 1);
    // The grid of a layout on its cluster (an auto-sized cluster puts every rank on one node).
    static RankGrid forLayout(const Layout& layout);

    std::int64_t size() const { return m_tp * m_cp * m_pp * m_dp; }
    std::int64_t tp() const { return m_tp; }
    std::int64_t cp() const { return m_cp; }
    std::int64_t pp() const { return m_pp; }
    std::int64_t dp() const { return m_dp; }
    std::int64_t devicesPerNode() const { return m_devicesPerNode; }
    std::int64_t nodeCount() const { return (size() + m_devicesPerNode - 1) / m_devicesPerNode; }
    RankOrder order() const { return m_order; }

    RankCoord coordOf(std::int64_t rank) const;
    std::int64_t rankOf(const RankCoord& coord) const;
    std::int64_t nodeOf(std::int64_t rank) const { return rank / m_devicesPerNode; }
    std::int64_t localIndexOf(std::int64_t rank) const { return rank % m_devicesPerNode; }

    // The ranks of `rank`'s group of that kind, ordered by their coordinate along it (so index i of a
    // pipeline group is stage i).
    std::vector<std::int64_t> groupOf(GroupKind kind, std::int64_t rank) const;
    // Every group of that kind, each once, in order of their lowest rank.
    std::vector<std::vector<std::int64_t>> groups(GroupKind kind) const;
    // The number of distinct nodes the widest group of that kind touches.
    std::int64_t maxNodesSpanned(GroupKind kind) const;
    // The ranks that sum `rank`'s gradients: its DP group times its CP group (dp·cp ranks, cp fastest;
    // the DP group when cp = 1), and the nodes the widest such group touches.
    std::vector<std::int64_t> gradientGroupOf(std::int64_t rank) const;
    std::int64_t gradientNodesSpanned() const;

    // Sentences about the placement a user should know, e.g. a TP group that has to span nodes.
    std::vector<std::string> placementNotes() const;

private:
    std::int64_t groupSize(GroupKind kind) const;
    static std::int64_t& along(RankCoord& c, GroupKind kind);
    std::int64_t m_tp, m_pp, m_dp, m_devicesPerNode;
    std::int64_t m_cp = 1;
    RankOrder m_order;
};

} // namespace loom::plan
