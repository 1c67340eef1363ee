#include "views/teaching/AllReduceSteps.h"

#include <algorithm>
#include <map>

namespace loom::plan {

namespace {

std::int64_t mod(std::int64_t a, std::int64_t n)
{
    return ((a % n) + n) % n;
}

double stepSeconds(const AllReduceStep& step, const LinkSpec& intra, const LinkSpec& inter)
{
    double worst = 0;
    for (const Transfer& t : step.transfers) {
        const LinkSpec& link = t.interNode ? inter : intra;
        const double beta = std::max(1e-9, link.bandwidthGBs) * 1e9;
        worst = std::max(worst, link.latencyUs * 1e-6 + t.bytes / beta);
    }
    return worst;
}

// One ring phase over several disjoint rings at once (one per node, or one per place in the node): each
// ring's position i sends chunk (i − s + shift) mod n to position i+1. `chunkOffset(ring)` places a ring's
// chunks in the buffer's numbering.
void ringPhase(std::vector<AllReduceStep>& out, const std::string& phase,
    const std::vector<std::vector<std::int64_t>>& rings, double chunkBytes, std::int64_t chunks, std::int64_t shift,
    std::int64_t devicesPerNode, const std::vector<std::int64_t>& chunkBase, std::int64_t chunkStride)
{
    const auto n = std::int64_t(rings.front().size());
    for (std::int64_t s = 0; s + 1 < n; ++s) {
        AllReduceStep step;
        step.phase = phase;
        step.chunks = chunks;
        for (std::size_t r = 0; r < rings.size(); ++r) {
            const auto& ring = rings[r];
            for (std::int64_t i = 0; i < n; ++i) {
                Transfer t;
                t.src = ring[std::size_t(i)];
                t.dst = ring[std::size_t((i + 1) % n)];
                t.chunk = chunkBase[r] + chunkStride * mod(i - s + shift, n);
                t.bytes = chunkBytes;
                t.interNode = t.src / devicesPerNode != t.dst / devicesPerNode;
                step.transfers.push_back(t);
            }
        }
        out.push_back(std::move(step));
    }
}

} // namespace

std::vector<AllReduceStep> ringAllReduceSteps(const std::vector<std::int64_t>& ranks, double bytes,
    std::int64_t devicesPerNode, const LinkSpec& intra, const LinkSpec& inter)
{
    std::vector<AllReduceStep> out;
    const auto n = std::int64_t(ranks.size());
    if (n < 2)
        return out;
    devicesPerNode = std::max<std::int64_t>(1, devicesPerNode);
    const std::vector<std::vector<std::int64_t>> rings { ranks };
    ringPhase(out, "reduce-scatter", rings, bytes / double(n), n, 0, devicesPerNode, { 0 }, 1);
    ringPhase(out, "all-gather", rings, bytes / double(n), n, 1, devicesPerNode, { 0 }, 1);
    for (auto& s : out)
        s.seconds = stepSeconds(s, intra, inter);
    return out;
}

std::vector<AllReduceStep> hierarchicalAllReduceSteps(const std::vector<std::int64_t>& ranks, double bytes,
    std::int64_t devicesPerNode, const LinkSpec& intra, const LinkSpec& inter)
{
    devicesPerNode = std::max<std::int64_t>(1, devicesPerNode);
    std::map<std::int64_t, std::vector<std::int64_t>> byNode;
    for (std::int64_t r : ranks)
        byNode[r / devicesPerNode].push_back(r);
    const auto nodes = std::int64_t(byNode.size());
    const auto k = std::int64_t(byNode.begin() == byNode.end() ? 0 : byNode.begin()->second.size());
    const bool even
        = std::all_of(byNode.begin(), byNode.end(), [k](const auto& e) { return std::int64_t(e.second.size()) == k; });
    if (nodes < 2 || !even)
        return ringAllReduceSteps(ranks, bytes, devicesPerNode, intra, inter);
    std::vector<AllReduceStep> out;
    std::vector<std::vector<std::int64_t>> inNode, across(static_cast<std::size_t>(k));
    for (const auto& [node, members] : byNode) {
        inNode.push_back(members);
        for (std::int64_t i = 0; i < k; ++i)
            across[std::size_t(i)].push_back(members[std::size_t(i)]);
    }
    // Inside the node the buffer is in k chunks (c = 0 … k−1); across the nodes each member's chunk c is cut
    // into N pieces, numbered c·N + j in the finer numbering.
    if (k > 1)
        ringPhase(out, "reduce-scatter", inNode, bytes / double(k), k, 0, devicesPerNode,
            std::vector<std::int64_t>(inNode.size(), 0), 1);
    std::vector<std::int64_t> base(static_cast<std::size_t>(k));
    for (std::int64_t i = 0; i < k; ++i)
        base[std::size_t(i)] = mod(i + 1, k) * nodes; // after the reduce-scatter, place i holds chunk i+1
    const double piece = bytes / double(k * nodes);
    ringPhase(out, "inter-node reduce-scatter", across, piece, k * nodes, 0, devicesPerNode, base, 1);
    ringPhase(out, "inter-node all-gather", across, piece, k * nodes, 1, devicesPerNode, base, 1);
    if (k > 1)
        ringPhase(out, "all-gather", inNode, bytes / double(k), k, 1, devicesPerNode,
            std::vector<std::int64_t>(inNode.size(), 0), 1);
    for (auto& s : out)
        s.seconds = stepSeconds(s, intra, inter);
    return out;
}

double totalSeconds(const std::vector<AllReduceStep>& steps)
{
    double t = 0;
    for (const auto& s : steps)
        t += s.seconds;
    return t;
}

double bytesSentBy(const std::vector<AllReduceStep>& steps, std::int64_t rank, bool interNodeOnly)
{
    double sum = 0;
    for (const auto& s : steps)
        for (const auto& t : s.transfers)
            if (t.src == rank && (!interNodeOnly || t.interNode))
                sum += t.bytes;
    return sum;
}

} // namespace loom::plan
