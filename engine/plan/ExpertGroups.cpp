#include "engine/plan/ExpertGroups.h"

#include "engine/plan/TextUtil.h"

#include <algorithm>
#include <numeric>
#include <string>

namespace loom::plan {

namespace {

// The DP group of `rank` (ordered by dp) and the rank's place in it.
std::pair<std::vector<std::int64_t>, std::int64_t> dataGroup(const RankGrid& grid, std::int64_t rank)
{
    return { grid.groupOf(GroupKind::Data, rank), grid.coordOf(rank).dp };
}

// Megatron-Core's own checks of the expert grid (parallel_state.initialize_model_parallel: the world is a
// multiple of expert_tp·ep·pp; ModelParallelConfig: ep > 1 with tp > 1 needs sequence parallelism).
void validateMegatronExperts(const Layout& l, Diagnostics& d)
{
    using std::to_string;
    const auto& p = l.parallel;
    const std::int64_t span = p.tp * p.cp * p.dp;
    if (span % (p.expertTp * p.ep) != 0)
        d.error("parallel.expert_tp",
            "parallel.expert_tp=" + to_string(p.expertTp) + " times parallel.ep=" + to_string(p.ep)
                + " does not divide tp·cp·dp=" + to_string(span)
                + ", the ranks of a stage the expert grid is carved from; choose expert_tp·ep dividing "
                + to_string(span));
    if (p.expertTp > 1 && l.model.bias)
        d.error("parallel.expert_tp",
            "parallel.expert_tp=" + to_string(p.expertTp) + " splits experts with biases (model.bias true), which "
                + "Megatron-Core's expert layers refuse; use expert_tp 1, or a model without biases");
    if (p.ep > 1 && p.tp > 1 && !p.sp)
        d.error("parallel.sp",
            "parallel.ep=" + to_string(p.ep) + " with tp=" + to_string(p.tp)
                + " needs sequence parallelism, as Megatron-Core requires of expert and tensor parallelism "
                  "together; set \"sp\": true");
}

} // namespace

std::vector<std::int64_t> expertGroupOf(const RankGrid& grid, std::int64_t ep, std::int64_t rank)
{
    const auto [dp, me] = dataGroup(grid, rank);
    const std::int64_t first = me / ep * ep;
    return { dp.begin() + first, dp.begin() + first + ep };
}

std::vector<std::int64_t> expertDataGroupOf(const RankGrid& grid, std::int64_t ep, std::int64_t rank)
{
    const auto [dp, me] = dataGroup(grid, rank);
    std::vector<std::int64_t> out;
    for (auto i = me % ep; i < static_cast<std::int64_t>(dp.size()); i += ep)
        out.push_back(dp[static_cast<std::size_t>(i)]);
    return out;
}

std::int64_t expertRankOf(const RankGrid& grid, std::int64_t ep, std::int64_t rank)
{
    return grid.coordOf(rank).dp % ep;
}

ExpertGrid expertGrid(const Layout& l)
{
    const auto& p = l.parallel;
    ExpertGrid g;
    g.ep = std::max<std::int64_t>(1, p.ep);
    g.megatron = p.expertTp > 0;
    g.etp = g.megatron ? p.expertTp : 1;
    const std::int64_t span = g.megatron ? p.tp * p.cp * p.dp : p.cp * p.dp;
    g.edp = std::max<std::int64_t>(1, span / (g.etp * g.ep));
    return g;
}

std::vector<std::int64_t> megatronExpertGroupOf(const RankGrid& grid, const ExpertGrid& g, std::int64_t rank)
{
    const RankCoord me = grid.coordOf(rank);
    const std::int64_t t = grid.tp(), c = grid.cp();
    const std::int64_t index = me.tp + t * (me.cp + c * me.dp); // tp fastest, then cp, then dp
    const std::int64_t block = g.etp * g.ep, first = index / block * block + index % g.etp;
    std::vector<std::int64_t> out;
    for (std::int64_t k = 0; k < g.ep; ++k) {
        const std::int64_t i = first + k * g.etp;
        out.push_back(grid.rankOf({ i % t, me.pp, i / (t * c), (i / t) % c }));
    }
    return out;
}

void validateExperts(const Layout& l, const Diagnostics& known, Diagnostics& d)
{
    using std::to_string;
    const auto& p = l.parallel;
    const auto& m = l.model;
    if (known.hasErrorAt("parallel.ep") || known.hasErrorAt("parallel.dp") || known.hasErrorAt("model"))
        return;
    // Degrees that divide both the experts and dp: what the fixes offer.
    auto choices = [&] {
        std::string s;
        const std::int64_t g = std::gcd(std::max<std::int64_t>(m.experts, 1), p.dp);
        for (std::int64_t e = 1; e <= g; ++e)
            if (g % e == 0)
                s += (s.empty() ? "" : ", ") + to_string(e);
        return s;
    };
    if (p.expertTp > 0 && !m.isMoe()) {
        d.error("parallel.expert_tp",
            "parallel.expert_tp=" + to_string(p.expertTp) + " splits experts, but model " + m.name
                + " has none (model.experts is 0); leave expert_tp out, or use a mixture-of-experts model");
        return;
    }
    if (p.ep > 1 && !m.isMoe()) {
        d.error("parallel.ep",
            "parallel.ep=" + to_string(p.ep) + " splits experts, but model " + m.name
                + " has none (model.experts is 0); use ep 1, or a mixture-of-experts model such as moe-tiny");
        return;
    }
    if (!m.isMoe())
        return;
    if (m.experts % p.ep != 0)
        d.error("parallel.ep",
            "parallel.ep=" + to_string(p.ep) + " does not divide model.experts=" + to_string(m.experts)
                + "; each expert-parallel rank must hold the same number of experts: use ep in {" + choices() + "}");
    else if (p.expertTp > 0)
        validateMegatronExperts(l, d);
    else if (p.dp % p.ep != 0)
        d.error("parallel.ep",
            "parallel.ep=" + to_string(p.ep) + " does not divide parallel.dp=" + to_string(p.dp)
                + "; expert groups are carved out of the data-parallel group (ep consecutive DP ranks): use ep in {"
                + choices() + "} or a dp that is a multiple of " + to_string(p.ep));
    if (m.effectiveTopK() > m.experts)
        d.error("model.top_k",
            "model.top_k=" + to_string(m.effectiveTopK()) + " is more than model.experts=" + to_string(m.experts)
                + "; use top_k <= experts");
    if (m.capacityFactor > 0 && m.capacityFactor * double(m.effectiveTopK()) < 1.0)
        d.warning("model.capacity_factor",
            "model.capacity_factor=" + text::number(m.capacityFactor)
                + " leaves room for fewer tokens than arrive even with perfect balance (capacity_factor·top_k < "
                  "1); most tokens would be dropped");
}

} // namespace loom::plan
