#include "engine/comm/GridGroups.h"

namespace loom::comm {

trace::GroupKind traceGroupKind(plan::GroupKind kind)
{
    switch (kind) {
    case plan::GroupKind::Tensor:
        return trace::GroupKind::Tensor;
    case plan::GroupKind::Pipeline:
        return trace::GroupKind::Pipeline;
    case plan::GroupKind::Data:
        return trace::GroupKind::Data;
    }
    return trace::GroupKind::Other;
}

std::string gridGroupName(const plan::RankGrid& grid, plan::GroupKind kind, std::int64_t rank)
{
    const plan::RankCoord c = grid.coordOf(rank);
    switch (kind) {
    case plan::GroupKind::Tensor:
        return "TP group of pp=" + std::to_string(c.pp) + " dp=" + std::to_string(c.dp);
    case plan::GroupKind::Pipeline:
        return "PP group of tp=" + std::to_string(c.tp) + " dp=" + std::to_string(c.dp);
    case plan::GroupKind::Data:
        return "DP group of tp=" + std::to_string(c.tp) + " pp=" + std::to_string(c.pp);
    }
    return "group";
}

std::vector<int> gridGroupNodes(const plan::RankGrid& grid, plan::GroupKind kind, std::int64_t rank)
{
    std::vector<int> nodes;
    for (auto member : grid.groupOf(kind, rank))
        nodes.push_back(static_cast<int>(grid.nodeOf(member)));
    return nodes;
}

std::vector<int> gridWorldNodes(const plan::RankGrid& grid)
{
    std::vector<int> nodes;
    for (std::int64_t r = 0; r < grid.size(); ++r)
        nodes.push_back(static_cast<int>(grid.nodeOf(r)));
    return nodes;
}

} // namespace loom::comm
