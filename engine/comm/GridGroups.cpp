#include "engine/comm/GridGroups.h"

namespace loom::comm {

std::string gridGroupName(const plan::RankGrid& grid, plan::GroupKind kind, std::int64_t rank)
{
    const plan::RankCoord c = grid.coordOf(rank);
    const std::string cp = grid.cp() > 1 ? " cp=" + std::to_string(c.cp) : std::string();
    switch (kind) {
    case plan::GroupKind::Tensor:
        return "TP group of pp=" + std::to_string(c.pp) + " dp=" + std::to_string(c.dp) + cp;
    case plan::GroupKind::Pipeline:
        return "PP group of tp=" + std::to_string(c.tp) + " dp=" + std::to_string(c.dp) + cp;
    case plan::GroupKind::Context:
        return "CP group of tp=" + std::to_string(c.tp) + " pp=" + std::to_string(c.pp) + " dp=" + std::to_string(c.dp);
    case plan::GroupKind::Data:
        return std::string(grid.cp() > 1 ? "DP group over dp·cp of tp=" : "DP group of tp=") + std::to_string(c.tp)
            + " pp=" + std::to_string(c.pp);
    default:
        break;
    }
    return "group";
}

std::vector<int> gridGroupNodes(const plan::RankGrid& grid, plan::GroupKind kind, std::int64_t rank)
{
    std::vector<int> nodes;
    for (auto member : gridCommMembers(grid, kind, rank))
        nodes.push_back(static_cast<int>(grid.nodeOf(member)));
    return nodes;
}

std::vector<std::int64_t> gridCommMembers(const plan::RankGrid& grid, plan::GroupKind kind, std::int64_t rank)
{
    return kind == plan::GroupKind::Data ? grid.gradientGroupOf(rank) : grid.groupOf(kind, rank);
}

std::vector<int> gridWorldNodes(const plan::RankGrid& grid)
{
    std::vector<int> nodes;
    for (std::int64_t r = 0; r < grid.size(); ++r)
        nodes.push_back(static_cast<int>(grid.nodeOf(r)));
    return nodes;
}

} // namespace loom::comm
