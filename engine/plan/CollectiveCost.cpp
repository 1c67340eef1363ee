#include "engine/plan/CollectiveCost.h"

#include "engine/plan/Formulas.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace loom::plan {

namespace {

// NCCL's tuning constants for the Simple protocol (the one large messages use), in µs, from
// NVIDIA/nccl src/graph/tuning.cc at commit b6475625fbcaa2c3c0e50eed2fa1255d7514d4a2: the base latency of
// a ring, and the per-step latency of each algorithm on NVLink, PCIe and the network.
constexpr double kRingBaseUs = 8.4;
constexpr double kRingNvlinkUs = 3.4, kRingPcieUs = 5.7, kRingNetUs = 14.0;
constexpr double kTreeNvlinkUs = 28.0, kTreePcieUs = 28.0, kTreeNetUs = 28.0;
constexpr double kNvlsNvlinkUs = 23.0;
constexpr double kNetOverheadUs = 3.0; // the network post overhead (1 µs on x86) × 3 for Simple
// Bandwidth refinements: a tree moves 92 % of the ring's bus bandwidth; NVLS converts bus to algorithm
// bandwidth with 5/6, a tree with 1/2, a ring with n/nsteps.
constexpr double kTreeBusFactor = 0.92, kNvlsRatio = 5.0 / 6.0, kTreeRatio = 0.5;
// The ring's "plateau" latency factor of multi-node all-reduces on Ampere and later.
constexpr double kRingPlateau = 1.4;
// Trees fall short of the model for medium sizes: NCCL's correction for Simple, powers of two from 64 B.
constexpr std::array<double, 23> kTreeCorrection
    = { .9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9 };

double log2Floor(double x)
{
    return x >= 1 ? std::floor(std::log2(x)) : 0;
}

CollectiveTime ring(const ClusterSpec& c, Collective kind, double bytes, GroupShape g, double busGBs)
{
    const double n = double(g.ranks), N = double(g.nodes);
    const bool allReduce = kind == Collective::AllReduce;
    const double steps = allReduce ? 2.0 * (n - 1) : n - 1;
    const double interSteps = allReduce ? (g.nodes > 1 ? 2.0 * N : 0.0) : N - 1;
    // RCCL's xGMI links are timed like NVLink (direct GPU-to-GPU links).
    double intraLat = c.intraNode.kind == LinkKind::Pcie ? kRingPcieUs : kRingNvlinkUs;
    if (g.nodes > 1)
        intraLat = std::max(intraLat, kNetOverheadUs);
    double lat = kRingBaseUs + std::max(0.0, steps - interSteps) * intraLat + interSteps * kRingNetUs;
    if (allReduce && g.nodes > 1)
        lat *= kRingPlateau;
    const double algGBs = busGBs * n / steps;
    CollectiveTime t;
    t.algorithm = NcclAlgorithm::Ring;
    t.seconds = lat * 1e-6 + bytes / (algGBs * 1e9);
    return t;
}

CollectiveTime tree(const ClusterSpec& c, double bytes, GroupShape g, double busGBs)
{
    const double intraLat = c.intraNode.kind == LinkKind::Pcie ? kTreePcieUs : kTreeNvlinkUs;
    const double lat = 2.0 * (double(g.perNode() - 1) * intraLat + log2Floor(double(g.nodes)) * kTreeNetUs);
    double algGBs = busGBs * kTreeBusFactor * kTreeRatio;
    const double logSize = log2Floor(bytes / 64.0);
    if (logSize < double(kTreeCorrection.size()))
        algGBs *= kTreeCorrection[static_cast<std::size_t>(logSize)];
    CollectiveTime t;
    t.algorithm = NcclAlgorithm::Tree;
    t.seconds = lat * 1e-6 + bytes / (algGBs * 1e9);
    return t;
}

CollectiveTime nvls(const ClusterSpec& c, double bytes)
{
    CollectiveTime t;
    t.algorithm = NcclAlgorithm::Nvls;
    t.seconds = kNvlsNvlinkUs * 1e-6 + bytes / (c.intraNode.bandwidthGBs * kNvlsRatio * 1e9);
    return t;
}

} // namespace

std::string_view toString(NcclAlgorithm a)
{
    switch (a) {
    case NcclAlgorithm::Ring:
        return "ring";
    case NcclAlgorithm::Tree:
        return "tree";
    case NcclAlgorithm::Nvls:
        return "nvls";
    }
    return "ring";
}

double interNodeBandwidthGBs(const ClusterSpec& c, std::int64_t membersPerNode)
{
    if (!c.interNode)
        return c.intraNode.bandwidthGBs;
    const double devices = double(c.devicesPerNode > 0 ? c.devicesPerNode : 1);
    const double nics = double(std::max<std::int64_t>(1, c.interNode->nicsPerNode));
    const double k = double(std::clamp<std::int64_t>(membersPerNode, 1, c.devicesPerNode > 0 ? c.devicesPerNode : 1));
    return std::min(c.intraNode.bandwidthGBs, c.interNode->bandwidthGBs * nics * k / devices);
}

CollectiveTime ncclCollective(const ClusterSpec& c, Collective kind, double bytes, GroupShape g)
{
    CollectiveTime best;
    if (g.ranks <= 1 || bytes <= 0)
        return best;
    g.nodes = std::clamp<std::int64_t>(g.nodes, 1, g.ranks);
    const double bus = g.nodes > 1 ? interNodeBandwidthGBs(c, g.perNode()) : c.intraNode.bandwidthGBs;
    best = ring(c, kind, bytes, g, bus);
    if (kind == Collective::AllReduce && g.nodes > 1) {
        const CollectiveTime t = tree(c, bytes, g, bus);
        if (t.seconds < best.seconds)
            best = t;
    }
    if (g.nodes == 1 && c.intraNode.nvls && g.ranks > 2) {
        const CollectiveTime t = nvls(c, bytes);
        if (t.seconds < best.seconds)
            best = t;
    }
    const double n = double(g.ranks);
    const double factor = kind == Collective::AllReduce ? 2.0 * (n - 1) / n : (n - 1) / n;
    best.busBandwidthGBs = bytes / best.seconds * factor / 1e9;
    return best;
}

bool usesNcclModel(const Layout& l)
{
    return l.onGpuCluster() && l.commBackend() == CommBackend::Nccl;
}

double collectiveSeconds(const Layout& l, Collective kind, double bytes, GroupShape g)
{
    if (g.ranks <= 1 || bytes <= 0)
        return 0;
    if (usesNcclModel(l))
        return ncclCollective(l.cluster, kind, bytes, g).seconds;
    const LinkSpec& link = g.nodes > 1 && l.cluster.interNode ? *l.cluster.interNode : l.cluster.intraNode;
    return kind == Collective::AllReduce ? ringAllReduceSeconds(bytes, g.ranks, link)
                                         : ringAllGatherSeconds(bytes, g.ranks, link);
}

} // namespace loom::plan
