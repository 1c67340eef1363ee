#include "views/LayoutEdits.h"

#include "engine/plan/LayoutValidator.h"
#include "engine/plan/RankGrid.h"
#include "engine/plan/StageAssignment.h"

#include <algorithm>
#include <set>

namespace loom::views {

using std::to_string;

namespace {

const char* fieldOf(Degree degree)
{
    switch (degree) {
    case Degree::Tp:
        return "parallel.tp";
    case Degree::Pp:
        return "parallel.pp";
    case Degree::Dp:
        return "parallel.dp";
    }
    return "parallel";
}

// The error that makes a degree impossible: one about that degree, or about the grid and the devices.
std::string degreeRefusal(const plan::Layout& candidate, Degree degree)
{
    const plan::Diagnostics d = plan::validateRules(candidate);
    const std::string own = fieldOf(degree);
    for (const auto& p : d.errors())
        if (p.field == own || p.field == "parallel" || p.field == "nodes")
            return p.message;
    return {};
}

} // namespace

EditResult withDegree(const plan::Layout& layout, Degree degree, std::int64_t value)
{
    EditResult out;
    const std::string name = degree == Degree::Tp ? "tp" : degree == Degree::Pp ? "pp" : "dp";
    if (value < 1) {
        out.refusal = name + "=" + to_string(value) + " is not a degree; use a whole number of 1 or more";
        return out;
    }
    plan::Layout next = layout;
    auto& par = next.parallel;
    const auto& cluster = layout.cluster;
    const std::int64_t devices = cluster.autoDevices() ? 0 : layout.nodes * cluster.devicesPerNode;
    switch (degree) {
    case Degree::Tp:
    case Degree::Pp:
        (degree == Degree::Tp ? par.tp : par.pp) = value;
        if (devices > 0) {
            const std::int64_t tcp = par.tp * par.cp * par.pp; // cp (1 unless context parallel) stays as it is
            const std::string what = par.cp > 1 ? "tp·cp·pp" : "tp·pp";
            if (devices % tcp != 0) {
                out.refusal = name + "=" + to_string(value) + " leaves " + what + " = " + to_string(tcp)
                    + ", which does not divide the " + to_string(devices) + " devices of " + to_string(layout.nodes)
                    + " node(s); choose " + what + " dividing " + to_string(devices) + ", or change the node count";
                return out;
            }
            par.dp = devices / tcp;
        }
        if (degree == Degree::Pp)
            par.stages.clear();
        break;
    case Degree::Dp:
        par.dp = value;
        if (cluster.devicesPerNode > 0) {
            const std::int64_t world = par.worldSize();
            if (world % cluster.devicesPerNode != 0) {
                out.refusal = "dp=" + to_string(value) + " makes tp·pp·dp = " + to_string(world)
                    + " ranks, which do not fill whole nodes of " + to_string(cluster.devicesPerNode) + " devices ("
                    + cluster.name + "); choose dp so that tp·pp·dp is a multiple of "
                    + to_string(cluster.devicesPerNode);
                return out;
            }
            next.nodes = world / cluster.devicesPerNode;
        }
        break;
    }
    out.refusal = degreeRefusal(next, degree);
    if (out.refusal.empty())
        out.layout = std::move(next);
    return out;
}

std::vector<std::pair<std::int64_t, std::string>> degreeChoices(const plan::Layout& layout, Degree degree)
{
    std::set<std::int64_t> values;
    const auto& m = layout.model;
    const auto& par = layout.parallel;
    const std::int64_t current = degree == Degree::Tp ? par.tp : degree == Degree::Pp ? par.pp : par.dp;
    const std::int64_t limit = degree == Degree::Tp ? std::max<std::int64_t>(m.heads, 1)
        : degree == Degree::Pp                      ? std::max<std::int64_t>(m.layers, 1)
                                                    : 4096;
    for (std::int64_t v = 1; v <= std::min<std::int64_t>(limit, 8); ++v)
        values.insert(v);
    for (std::int64_t v = 1; v <= limit; v *= 2)
        values.insert(v);
    if (degree != Degree::Dp)
        for (std::int64_t v = 1; v <= std::min<std::int64_t>(limit, 256); ++v)
            if ((degree == Degree::Tp ? m.heads : m.layers) % v == 0)
                values.insert(v);
    if (!layout.cluster.autoDevices()) {
        const std::int64_t devices = layout.nodes * layout.cluster.devicesPerNode;
        const std::int64_t other = (degree == Degree::Tp ? par.pp : degree == Degree::Pp ? par.tp : 0) * par.cp;
        if (other > 0 && devices % other == 0)
            for (std::int64_t v = 1; v <= std::min(limit, devices / other); ++v)
                if ((devices / other) % v == 0)
                    values.insert(v);
        if (degree == Degree::Dp && layout.cluster.devicesPerNode > 0)
            for (std::int64_t nodes = 1; nodes <= 2 * layout.nodes && values.size() < 64; ++nodes) {
                const std::int64_t world = nodes * layout.cluster.devicesPerNode;
                if (world % (par.tp * par.cp * par.pp) == 0)
                    values.insert(world / (par.tp * par.cp * par.pp));
            }
    }
    values.insert(current);
    std::vector<std::pair<std::int64_t, std::string>> out;
    for (std::int64_t v : values) {
        if (v == current) {
            out.emplace_back(v, std::string());
            continue;
        }
        const EditResult r = withDegree(layout, degree, v);
        out.emplace_back(v, r.refusal);
    }
    return out;
}

EditResult dropBlocksOnRank(const plan::Layout& layout, std::int64_t rank, std::int64_t first, std::int64_t last)
{
    EditResult out;
    const plan::RankGrid grid = plan::RankGrid::forLayout(layout);
    if (rank < 0 || rank >= grid.size()) {
        out.refusal = "device " + to_string(rank) + " runs no rank of this layout (it uses " + to_string(grid.size())
            + " devices); drop on a device that has a stage colour";
        return out;
    }
    const std::int64_t pipelineRank = grid.coordOf(rank).pp;
    const std::int64_t stage = plan::nearestChunkStage(layout, pipelineRank, first, last);
    const auto assigned = plan::assignBlocksToStage(layout.stageRanges(), stage, first, last);
    if (!assigned.ok()) {
        out.refusal = assigned.refusal;
        return out;
    }
    plan::Layout next = layout;
    next.parallel.stages = assigned.ranges;
    out.layout = std::move(next);
    return out;
}

plan::Layout withEndsCountedAsLayers(const plan::Layout& layout, bool on)
{
    plan::Layout next = layout;
    if (!on)
        next.parallel.stages.clear();
    else if (auto split = plan::accountedStageSplit(layout.model.layers, layout.virtualStages()); !split.empty())
        next.parallel.stages = std::move(split);
    return next;
}

bool endsCountedAsLayers(const plan::Layout& layout)
{
    return !layout.parallel.stages.empty()
        && layout.parallel.stages == plan::accountedStageSplit(layout.model.layers, layout.virtualStages());
}

plan::Layout withVpp(const plan::Layout& layout, std::int64_t vpp)
{
    plan::Layout next = layout;
    next.parallel.vpp = vpp;
    next.parallel.stages.clear();
    return next;
}

} // namespace loom::views
