#include "engine/plan/ExpertGroups.h"

#include "engine/plan/TextUtil.h"

#include <numeric>
#include <string>

namespace loom::plan {

namespace {

// The DP group of `rank` (ordered by dp) and the rank's place in it.
std::pair<std::vector<std::int64_t>, std::int64_t> dataGroup(const RankGrid& grid, std::int64_t rank)
{
    return { grid.groupOf(GroupKind::Data, rank), grid.coordOf(rank).dp };
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
