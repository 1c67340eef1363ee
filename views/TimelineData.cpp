#include "views/TimelineData.h"

#include <algorithm>
#include <limits>

namespace loom::views {

void TimelineData::setEvents(std::vector<trace::TraceEvent> events, std::vector<trace::GroupInfo> groups)
{
    m_events.clear();
    m_rows.clear();
    m_groups = std::move(groups);
    m_begin = m_end = 0;
    m_firstStep = m_lastStep = -1;
    append(events);
}

void TimelineData::addGroups(const std::vector<trace::GroupInfo>& groups)
{
    const std::size_t before = m_groups.size();
    for (const auto& g : groups)
        if (std::none_of(m_groups.begin(), m_groups.end(), [&](const trace::GroupInfo& o) { return o.id == g.id; }))
            m_groups.push_back(g);
    if (m_groups.size() != before) // comm events may change kind (TP, PP, DP) now that their group is known
        for (Row& r : m_rows)
            if (r.lane == trace::Lane::Comm)
                remix(r, 0);
}

int TimelineData::mixKind(trace::Lane lane, trace::EventKind kind, trace::GroupKind group)
{
    using trace::EventKind;
    if (lane == trace::Lane::Compute)
        return kind == EventKind::Forward || kind == EventKind::Recompute ? 0
            : kind == EventKind::Backward || kind == EventKind::Weight    ? 1
            : kind == EventKind::Optimizer                                ? 2
                                                                          : 3;
    switch (kind) {
    case EventKind::Send:
    case EventKind::Recv:
        return 1;
    case EventKind::AllReduce:
    case EventKind::ReduceScatter:
    case EventKind::AllGather:
    case EventKind::Broadcast:
        return group == trace::GroupKind::Tensor ? 0 : group == trace::GroupKind::Pipeline ? 1 : 2;
    case EventKind::AllToAll:
        return 2; // the mix bar keeps four classes: expert traffic counts with data-parallel traffic
    default:
        return 3;
    }
}

TimelineData::Mix TimelineData::mix(const Row& row, std::size_t first, std::size_t last) const
{
    Mix m {};
    if (last <= first || last >= row.mixSum.size())
        return m;
    for (int k = 0; k < kMixKinds; ++k)
        m[std::size_t(k)] = row.mixSum[last][std::size_t(k)] - row.mixSum[first][std::size_t(k)];
    return m;
}

void TimelineData::remix(Row& r, std::size_t from)
{
    r.mixSum.resize(r.events.size() + 1);
    if (from == 0)
        r.mixSum[0] = Mix {};
    for (std::size_t i = from; i < r.events.size(); ++i) {
        const auto& e = m_events[r.events[i]];
        Mix next = r.mixSum[i];
        next[std::size_t(mixKind(r.lane, e.kind, e.group >= 0 ? groupKindOf(e) : trace::GroupKind::Other))]
            += e.endNs - e.startNs;
        r.mixSum[i + 1] = next;
    }
}

namespace {

// Rows are ordered by (rank, slot): the host's compute lane, its comm lane, then one row per device stream.
int slotOf(const TimelineData::Row& r)
{
    return r.stream >= 0 ? 2 + r.stream : int(r.lane);
}
int slotOf(const trace::TraceEvent& e)
{
    return e.stream >= 0 ? 2 + e.stream : int(e.lane);
}

std::vector<TimelineData::Row>::const_iterator findRow(
    const std::vector<TimelineData::Row>& rows, std::int32_t rank, int slot)
{
    const auto it = std::lower_bound(rows.begin(), rows.end(), std::pair { rank, slot },
        [](const TimelineData::Row& r, const std::pair<std::int32_t, int>& key) {
            return std::pair { r.rank, slotOf(r) } < key;
        });
    return it != rows.end() && it->rank == rank && slotOf(*it) == slot ? it : rows.end();
}

} // namespace

int TimelineData::rowIndex(std::int32_t rank, trace::Lane lane) const
{
    const auto it = findRow(m_rows, rank, int(lane));
    return it == m_rows.end() ? -1 : int(it - m_rows.begin());
}

int TimelineData::rowOf(const trace::TraceEvent& e) const
{
    const auto it = findRow(m_rows, e.rank, slotOf(e));
    return it == m_rows.end() ? -1 : int(it - m_rows.begin());
}

TimelineData::Row& TimelineData::rowFor(const trace::TraceEvent& e)
{
    const int slot = slotOf(e);
    const auto it = std::lower_bound(m_rows.begin(), m_rows.end(), std::pair { e.rank, slot },
        [](const Row& r, const std::pair<std::int32_t, int>& key) {
            return std::pair { r.rank, slotOf(r) } < key;
        });
    if (it != m_rows.end() && it->rank == e.rank && slotOf(*it) == slot)
        return *it;
    Row r;
    r.rank = e.rank;
    r.lane = e.lane; // a device stream's row draws as the lane of its first event
    r.stream = e.stream;
    r.mixSum.assign(1, Mix {});
    for (const Row& o : m_rows)
        if (o.rank == e.rank && o.stage >= 0)
            r.stage = o.stage;
    return *m_rows.insert(it, std::move(r));
}

bool TimelineData::appendsInOrder(const std::vector<trace::TraceEvent>& events) const
{
    std::vector<std::int64_t> lastStart(m_rows.size());
    for (std::size_t i = 0; i < m_rows.size(); ++i)
        lastStart[i] = m_rows[i].start.empty() ? INT64_MIN : m_rows[i].start.back();
    for (const auto& e : events) {
        const int r = rowOf(e);
        if (r < 0 || e.startNs < lastStart[std::size_t(r)])
            return false;
        lastStart[std::size_t(r)] = e.startNs;
    }
    return true;
}

void TimelineData::append(const std::vector<trace::TraceEvent>& events)
{
    if (events.empty())
        return;
    const bool first = m_events.empty();
    for (const auto& e : events) {
        if (m_events.size() >= std::numeric_limits<std::uint32_t>::max())
            break; // 4 billion events: more than any view can use
        const auto index = std::uint32_t(m_events.size());
        m_events.push_back(e);
        m_begin = first && index == 0 ? e.startNs : std::min(m_begin, e.startNs);
        m_end = first && index == 0 ? e.endNs : std::max(m_end, e.endNs);
        if (e.step >= 0) {
            m_firstStep = m_firstStep < 0 ? e.step : std::min(m_firstStep, e.step);
            m_lastStep = std::max(m_lastStep, e.step);
        }
        Row& r = rowFor(e);
        if (e.stage >= 0 && (e.kind == trace::EventKind::Forward || e.kind == trace::EventKind::Backward)
            && (r.stage < 0 || e.stage < r.stage)) {
            r.stage = e.stage;
            for (Row& o : m_rows)
                if (o.rank == e.rank)
                    o.stage = r.stage;
        }
        if (r.start.empty() || e.startNs >= r.start.back()) {
            r.events.push_back(index);
            r.start.push_back(e.startNs);
            r.end.push_back(e.endNs);
            r.maxEnd.push_back(std::max(r.maxEnd.empty() ? INT64_MIN : r.maxEnd.back(), e.endNs));
            r.maxDuration = std::max(r.maxDuration, e.endNs - e.startNs);
            Mix next = r.mixSum.back();
            next[std::size_t(mixKind(r.lane, e.kind, e.group >= 0 ? groupKindOf(e) : trace::GroupKind::Other))]
                += e.endNs - e.startNs;
            r.mixSum.push_back(next);
            continue;
        }
        const auto pos = std::size_t(std::upper_bound(r.start.begin(), r.start.end(), e.startNs) - r.start.begin());
        r.events.insert(r.events.begin() + std::ptrdiff_t(pos), index);
        r.start.insert(r.start.begin() + std::ptrdiff_t(pos), e.startNs);
        r.end.insert(r.end.begin() + std::ptrdiff_t(pos), e.endNs);
        r.maxEnd.insert(r.maxEnd.begin() + std::ptrdiff_t(pos), 0);
        r.maxDuration = std::max(r.maxDuration, e.endNs - e.startNs);
        reindex(r, pos); // now: a later rowFor() may insert rows and move this one
        remix(r, pos);
    }
}

void TimelineData::reindex(Row& r, std::size_t from)
{
    std::int64_t running = from == 0 ? INT64_MIN : r.maxEnd[from - 1];
    for (std::size_t i = from; i < r.events.size(); ++i)
        r.maxEnd[i] = running = std::max(running, r.end[i]);
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
    return { first, std::max(first, last) };
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
