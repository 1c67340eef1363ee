#include "engine/trace/BandwidthSeries.h"

#include <algorithm>
#include <set>
#include <unordered_map>

namespace loom::trace {

BandwidthSeries::BandwidthSeries(std::vector<std::int64_t> nodeOfRank)
    : m_nodeOfRank(std::move(nodeOfRank))
{
}

void BandwidthSeries::clear()
{
    m_bus.clear();
    m_link.clear();
    m_points.clear();
}

std::int64_t BandwidthSeries::nodeOf(std::int32_t rank) const
{
    return rank >= 0 && std::size_t(rank) < m_nodeOfRank.size() ? m_nodeOfRank[std::size_t(rank)] : 0;
}

BandwidthPoint& BandwidthSeries::pointOf(std::int32_t step)
{
    const std::int32_t shown = step + 1;
    auto it = std::lower_bound(
        m_points.begin(), m_points.end(), shown, [](const BandwidthPoint& p, std::int32_t s) { return p.step < s; });
    if (it == m_points.end() || it->step != shown) {
        it = m_points.insert(it, BandwidthPoint {});
        it->step = shown;
    }
    return *it;
}

void BandwidthSeries::add(const std::vector<TraceEvent>& events, const std::vector<GroupInfo>& groups)
{
    std::unordered_map<std::int32_t, const GroupInfo*> byId;
    for (const auto& g : groups)
        byId.emplace(g.id, &g);
    std::set<std::pair<std::int32_t, std::string>> touchedBus, touchedLink;
    for (const auto& e : events) {
        if (e.lane != Lane::Comm || e.durationNs() <= 0 || e.bytes == 0 || e.kind == EventKind::Wait)
            continue;
        const auto found = byId.find(e.group);
        const GroupInfo* group = found == byId.end() ? nullptr : found->second;
        const GroupKind kind = group ? group->kind : GroupKind::Other;
        const std::string name = (kind == GroupKind::Other ? std::string() : std::string(toString(kind)) + " ")
            + std::string(toString(e.kind));
        const double seconds = double(e.durationNs()) * 1e-9;
        auto& bus = m_bus[{ e.step, name }];
        bus.gigabytes += double(e.bytes) * busBandwidthFactor(e.kind, e.groupSize) / 1e9;
        bus.seconds += seconds;
        touchedBus.insert({ e.step, name });

        bool crossNode = e.peer >= 0 && nodeOf(e.peer) != nodeOf(e.rank);
        if (group)
            for (std::int32_t r : group->ranks)
                crossNode = crossNode || nodeOf(r) != nodeOf(e.rank);
        const std::string link = crossNode ? kInterNode : kIntraNode;
        auto& l = m_link[{ e.step, link }];
        l.gigabytes += double(e.wireBytes > 0 ? e.wireBytes : e.bytes) / 1e9;
        l.seconds += seconds;
        touchedLink.insert({ e.step, link });
    }
    for (const auto& key : touchedBus) {
        const Sum& s = m_bus[key];
        pointOf(key.first).perCollective[key.second] = s.seconds > 0 ? s.gigabytes / s.seconds : 0;
    }
    for (const auto& key : touchedLink) {
        const Sum& s = m_link[key];
        pointOf(key.first).perLinkClass[key.second] = s.seconds > 0 ? s.gigabytes / s.seconds : 0;
    }
}

std::vector<BandwidthPoint> bandwidthSeries(const std::vector<TraceEvent>& events, const std::vector<GroupInfo>& groups,
    const std::vector<std::int64_t>& nodeOfRank)
{
    BandwidthSeries series(nodeOfRank);
    series.add(events, groups);
    return series.points();
}

} // namespace loom::trace
