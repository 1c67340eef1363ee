#include "views/TimelineData.h"

#include <algorithm>
#include <map>

namespace loom::views {

void TimelineData::setEvents(std::vector<trace::TraceEvent> events, std::vector<trace::GroupInfo> groups)
{
    m_events = std::move(events);
    m_groups = std::move(groups);
    m_rows.clear();
    m_begin = m_end = 0;
    std::map<std::pair<std::int32_t, int>, std::size_t> rowOf;
    for (const auto& e : m_events)
        rowOf.try_emplace(std::pair{e.rank, int(e.lane)}, 0);
    // Rows ordered by rank, compute lane above comm lane.
    for (auto& [key, index] : rowOf) {
        index = m_rows.size();
        Row r;
        r.rank = key.first;
        r.lane = trace::Lane(key.second);
        m_rows.push_back(std::move(r));
    }
    bool first = true;
    for (std::uint32_t i = 0; i < m_events.size(); ++i) {
        const auto& e = m_events[i];
        Row& r = m_rows[rowOf[{e.rank, int(e.lane)}]];
        r.events.push_back(i);
        if (e.stage >= 0 && (e.kind == trace::EventKind::Forward || e.kind == trace::EventKind::Backward)
            && (r.stage < 0 || e.stage < r.stage))
            r.stage = e.stage;
        m_begin = first ? e.startNs : std::min(m_begin, e.startNs);
        m_end = first ? e.endNs : std::max(m_end, e.endNs);
        first = false;
    }
    for (Row& r : m_rows) {
        std::stable_sort(r.events.begin(), r.events.end(),
            [this](std::uint32_t a, std::uint32_t b) { return m_events[a].startNs < m_events[b].startNs; });
        r.maxEnd.resize(r.events.size());
        r.start.resize(r.events.size());
        r.end.resize(r.events.size());
        std::int64_t running = INT64_MIN;
        for (std::size_t i = 0; i < r.events.size(); ++i) {
            const auto& e = m_events[r.events[i]];
            r.start[i] = e.startNs;
            r.end[i] = e.endNs;
            r.maxEnd[i] = running = std::max(running, e.endNs);
            r.maxDuration = std::max(r.maxDuration, e.endNs - e.startNs);
        }
    }
    // Both lanes of a rank show its pipeline stage.
    for (Row& r : m_rows)
        if (r.stage < 0)
            for (const Row& o : m_rows)
                if (o.rank == r.rank && o.stage >= 0)
                    r.stage = o.stage;
}

trace::GroupKind TimelineData::groupKindOf(const trace::TraceEvent& e) const
{
    for (const auto& g : m_groups)
        if (g.id == e.group)
            return g.kind;
    return trace::GroupKind::Other;
}

std::pair<std::size_t, std::size_t> TimelineData::visible(const Row& row, std::int64_t t0, std::int64_t t1) const
{
    const auto first = std::size_t(std::lower_bound(row.maxEnd.begin(), row.maxEnd.end(), t0) - row.maxEnd.begin());
    const auto last = std::size_t(std::upper_bound(row.start.begin(), row.start.end(), t1) - row.start.begin());
    return {first, std::max(first, last)};
}

std::int64_t TimelineData::eventAt(const Row& row, std::int64_t t) const
{
    const auto [first, last] = visible(row, t, t);
    for (std::size_t i = last; i > first; --i)
        if (row.start[i - 1] <= t && t <= row.end[i - 1])
            return row.events[i - 1];
    return -1;
}

} // namespace loom::views
