#include "engine/plan/RankGrid.h"

#include <algorithm>
#include <set>

namespace loom::plan {

RankGrid::RankGrid(std::int64_t tp, std::int64_t pp, std::int64_t dp, std::int64_t devicesPerNode, RankOrder order)
    : m_tp(std::max<std::int64_t>(tp, 1))
    , m_pp(std::max<std::int64_t>(pp, 1))
    , m_dp(std::max<std::int64_t>(dp, 1))
    , m_devicesPerNode(std::max<std::int64_t>(devicesPerNode, 1))
    , m_order(order)
{
}

RankGrid RankGrid::forLayout(const Layout& layout)
{
    const auto& p = layout.parallel;
    std::int64_t perNode = layout.cluster.autoDevices() ? p.worldSize() : layout.cluster.devicesPerNode;
    return RankGrid(p.tp, p.pp, p.dp, perNode, p.order);
}

RankCoord RankGrid::coordOf(std::int64_t rank) const
{
    RankCoord c;
    c.tp = rank % m_tp;
    std::int64_t rest = rank / m_tp;
    if (m_order == RankOrder::TpPpDp) {
        c.pp = rest % m_pp;
        c.dp = rest / m_pp;
    } else {
        c.dp = rest % m_dp;
        c.pp = rest / m_dp;
    }
    return c;
}

std::int64_t RankGrid::rankOf(const RankCoord& c) const
{
    if (m_order == RankOrder::TpPpDp)
        return c.tp + m_tp * (c.pp + m_pp * c.dp);
    return c.tp + m_tp * (c.dp + m_dp * c.pp);
}

std::int64_t RankGrid::groupSize(GroupKind kind) const
{
    return kind == GroupKind::Tensor ? m_tp : kind == GroupKind::Pipeline ? m_pp : m_dp;
}

std::vector<std::int64_t> RankGrid::groupOf(GroupKind kind, std::int64_t rank) const
{
    RankCoord c = coordOf(rank);
    std::vector<std::int64_t> out;
    const std::int64_t n = groupSize(kind);
    out.reserve(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
        RankCoord m = c;
        (kind == GroupKind::Tensor ? m.tp : kind == GroupKind::Pipeline ? m.pp : m.dp) = i;
        out.push_back(rankOf(m));
    }
    return out;
}

std::vector<std::vector<std::int64_t>> RankGrid::groups(GroupKind kind) const
{
    std::vector<std::vector<std::int64_t>> out;
    for (std::int64_t r = 0; r < size(); ++r) {
        RankCoord c = coordOf(r);
        // A rank is its group's first member when its coordinate along the group is 0; groups listed in
        // order of that rank are in order of their lowest rank, since rank grows with every coordinate.
        if ((kind == GroupKind::Tensor ? c.tp : kind == GroupKind::Pipeline ? c.pp : c.dp) == 0)
            out.push_back(groupOf(kind, r));
    }
    return out;
}

std::int64_t RankGrid::maxNodesSpanned(GroupKind kind) const
{
    std::int64_t widest = 0;
    for (std::int64_t r = 0; r < size(); ++r) {
        RankCoord c = coordOf(r);
        if ((kind == GroupKind::Tensor ? c.tp : kind == GroupKind::Pipeline ? c.pp : c.dp) != 0)
            continue;
        std::set<std::int64_t> nodes;
        for (auto member : groupOf(kind, r))
            nodes.insert(nodeOf(member));
        widest = std::max<std::int64_t>(widest, static_cast<std::int64_t>(nodes.size()));
        if (widest == nodeCount())
            break;
    }
    return widest;
}

std::vector<std::string> RankGrid::placementNotes() const
{
    std::vector<std::string> notes;
    const std::int64_t tpNodes = maxNodesSpanned(GroupKind::Tensor);
    if (tpNodes > 1) {
        std::string why = m_tp > m_devicesPerNode ? "tp=" + std::to_string(m_tp) + " is more than the "
                + std::to_string(m_devicesPerNode) + " devices of a node"
                                                  : "tp=" + std::to_string(m_tp) + " does not divide the "
                + std::to_string(m_devicesPerNode) + " devices of a node";
        notes.push_back("a TP group spans " + std::to_string(tpNodes) + " nodes (" + why
            + "), so its per-block all-reduces cross the slower inter-node link; choose a tp that "
              "divides "
            + std::to_string(m_devicesPerNode) + " to keep TP inside a node");
    }
    return notes;
}

} // namespace loom::plan
