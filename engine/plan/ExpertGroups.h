#pragma once

#include "engine/plan/Diagnostics.h"
#include "engine/plan/Layout.h"
#include "engine/plan/RankGrid.h"

#include <cstdint>
#include <vector>

namespace loom::plan {

// Expert parallelism adds no ranks (Megatron-Core's scheme): it is carved out of the data-parallel group.
// The DP group of a rank, in order of its dp coordinate, is cut into dp/ep expert groups of ep consecutive
// members; each expert group holds every expert once (experts/ep on each member) and trades tokens with
// all-to-all. The expert-data-parallel group of a rank is the DP members at its position in every expert
// group (dp/ep of them): they hold the same experts, so experts' gradients are averaged over it, while the
// other parameters are averaged over the whole DP group as before.
//
// Example: tp=1, pp=1, dp=4, ep=2: DP group {0,1,2,3}; expert groups {0,1} and {2,3}; expert-data groups
// {0,2} and {1,3}. Rank 3 holds experts [E/2, E) like rank 1, and its tokens meet rank 2's in all-to-all.
//
// Preconditions: ep >= 1 divides grid.dp().
std::vector<std::int64_t> expertGroupOf(const RankGrid& grid, std::int64_t ep, std::int64_t rank);
std::vector<std::int64_t> expertDataGroupOf(const RankGrid& grid, std::int64_t ep, std::int64_t rank);
// The rank's index in its expert group (dp mod ep): it holds experts [index·E/ep, (index+1)·E/ep).
std::int64_t expertRankOf(const RankGrid& grid, std::int64_t ep, std::int64_t rank);

// Megatron-Core's expert grid (parallel.expert_tp set; megatron/core/parallel_state.py, whose expert rank
// generator has tp = expert_tp, ep, dp = expert data parallel and no cp): a stage's tp·cp·dp ranks, taken tp
// fastest, then cp, then dp, are cut into groups of expert_tp consecutive ranks (each expert split over them),
// ep consecutive such groups share out the experts, and the rest replicate them: edp = tp·cp·dp / (etp·ep).
// So ep may exceed dp: tp 8, dp 1, ep 8, expert_tp 1 holds E/8 whole experts on each GPU of a node.
// Without expert_tp the carving above holds: etp 1 (experts whole), ep out of dp, edp = dp·cp / ep.
struct ExpertGrid {
    std::int64_t etp = 1, ep = 1, edp = 1;
    bool megatron = false; // parallel.expert_tp set
};
ExpertGrid expertGrid(const Layout& layout);
// The expert-model-parallel group of `rank` on Megatron-Core's grid (ep members, expert_tp apart).
std::vector<std::int64_t> megatronExpertGroupOf(const RankGrid& grid, const ExpertGrid& g, std::int64_t rank);

// The layout rules of mixtures of experts, appended to `out` (called by validateLayout): parallel.ep needs
// a model with experts, must divide both experts and dp; top_k at most experts; capacity_factor (dropping
// tokens) is planned but loom-train routes dropless. Each error names the field and a fix.
void validateExperts(const Layout& layout, const Diagnostics& known, Diagnostics& out);

} // namespace loom::plan
