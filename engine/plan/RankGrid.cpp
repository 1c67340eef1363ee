#include "engine/plan/RankGrid.h"

#include <algorithm>
#include <set>

namespace loom::plan {

RankGrid::RankGrid(
    std::int64_t tp, std::int64_t pp, std::int64_t dp, std::int64_t devicesPerNode, RankOrder order, std::int64_t cp)
    : m_tp(std::max<std::int64_t>(tp, 1))
    , m_pp(std::max<std::int64_t>(pp, 1))
    , m_dp(std::max<std::int64_t>(dp, 1))
    , m_devicesPerNode(std::max<std::int64_t>(devicesPerNode, 1))
    , m_cp(std::max<std::int64_t>(cp, 1))
    , m_order(order)
{
}

RankGrid RankGrid::forLayout(const Layout& layout)
{
    const auto& p = layout.parallel;
    std::int64_t perNode = layout.cluster.autoDevices() ? p.worldSize() : layout.cluster.devicesPerNode;
    return RankGrid(p.tp, p.pp, p.dp, perNode, p.order, p.cp);
}

RankCoord RankGrid::coordOf(std::int64_t rank) const
{
    RankCoord c;
    c.tp = rank % m_tp;
    std::int64_t rest = rank / m_tp;
    c.cp = rest % m_cp;
    rest /= m_cp;
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
        return c.tp + m_tp * (c.cp + m_cp * (c.pp + m_pp * c.dp));
    return c.tp + m_tp * (c.cp + m_cp * (c.dp + m_dp * c.pp));
}

std::int64_t RankGrid::groupSize(GroupKind kind) const
{
    switch (kind) {
    case GroupKind::Tensor:
        return m_tp;
    case GroupKind::Pipeline:
        return m_pp;
    case GroupKind::Context:
        return m_cp;
    default:
        return m_dp;
    }
}

std::int64_t& RankGrid::along(RankCoord& c, GroupKind kind)
{
    switch (kind) {
    case GroupKind::Tensor:
        return c.tp;
    case GroupKind::Pipeline:
        return c.pp;
    case GroupKind::Context:
        return c.cp;
    default:
        return c.dp;
    }
}

std::vector<std::int64_t> RankGrid::groupOf(GroupKind kind, std::int64_t rank) const
{
    RankCoord c = coordOf(rank);
    std::vector<std::int64_t> out;
    const std::int64_t n = groupSize(kind);
    out.reserve(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
        RankCoord m = c;
        along(m, kind) = i;
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
        if (along(c, kind) == 0)
            out.push_back(groupOf(kind, r));
    }
    return out;
}

std::vector<std::int64_t> RankGrid::gradientGroupOf(std::int64_t rank) const
{
    RankCoord c = coordOf(rank);
    std::vector<std::int64_t> out;
    out.reserve(static_cast<std::size_t>(m_dp * m_cp));
    for (std::int64_t d = 0; d < m_dp; ++d)
        for (std::int64_t k = 0; k < m_cp; ++k) {
            c.dp = d;
            c.cp = k;
            out.push_back(rankOf(c));
        }
    return out;
}

std::int64_t RankGrid::gradientNodesSpanned() const
{
    if (m_cp == 1)
        return maxNodesSpanned(GroupKind::Data);
    std::int64_t widest = 0;
    for (std::int64_t r = 0; r < size(); ++r) {
        RankCoord c = coordOf(r);
        if (c.dp != 0 || c.cp != 0)
            continue;
        std::set<std::int64_t> nodes;
        for (auto member : gradientGroupOf(r))
            nodes.insert(nodeOf(member));
        widest = std::max<std::int64_t>(widest, static_cast<std::int64_t>(nodes.size()));
        if (widest == nodeCount())
            break;
    }
    return widest;
}

std::int64_t RankGrid::maxNodesSpanned(GroupKind kind) const
{
    std::int64_t widest = 0;
    for (std::int64_t r = 0; r < size(); ++r) {
        RankCoord c = coordOf(r);
        if (along(c, kind) != 0)
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
    const std::int64_t cpNodes = m_cp > 1 ? maxNodesSpanned(GroupKind::Context) : 1;
    if (cpNodes > 1)
        notes.push_back("a CP group spans " + std::to_string(cpNodes) + " nodes (tp·cp = " + std::to_string(m_tp) + "·"
            + std::to_string(m_cp) + " = " + std::to_string(m_tp * m_cp) + " ranks per TP×CP block, "
            + std::to_string(m_devicesPerNode)
            + " devices per node), so ring attention's K/V blocks cross the "
              "slower inter-node link every layer; keep tp·cp at or below the devices of a node where the memory "
              "allows");
    return notes;
}

} // namespace loom::plan
