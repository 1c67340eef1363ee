// TimelineView's tracks: grouping by stage, DP replica or node, the groups' summaries (engine/trace),
// collapsing, pinning, and the layout of the tracks that hit testing and painting share.
#include "views/TimelineView.h"

#include <QScrollBar>

#include <tuple>

namespace loom::views {

void TimelineView::invalidateLayout()
{
    m_layoutDirty = true;
}

void TimelineView::setGrouping(Grouping g)
{
    if (g == m_grouping)
        return;
    m_grouping = g;
    m_collapsed.clear();
    m_summariesDirty = true;
    invalidateLayout();
    updateScrollBars();
    viewport()->update();
}

void TimelineView::setRanksPerNode(int n)
{
    m_ranksPerNode = std::max(1, n);
    m_summariesDirty = true;
    invalidateLayout();
    viewport()->update();
}

int TimelineView::groupOfRow(int index) const
{
    if (index < 0 || std::size_t(index) >= data().rows().size())
        return -1;
    const auto& row = data().rows()[std::size_t(index)];
    switch (m_grouping) {
    case Grouping::None:
        return -1;
    case Grouping::Stage:
        return row.stage;
    case Grouping::Node:
        return row.rank >= 0 ? row.rank / m_ranksPerNode : -1;
    case Grouping::Replica:
        // The replica is the rank's place in its data-parallel group.
        for (const auto& g : data().groups())
            if (g.kind == trace::GroupKind::Data)
                for (std::size_t i = 0; i < g.ranks.size(); ++i)
                    if (g.ranks[i] == row.rank)
                        return int(i);
        return -1;
    }
    return -1;
}

void TimelineView::setHosts(const QStringList& hosts, int ranksPerHost)
{
    m_hosts = hosts;
    m_ranksPerHost = std::max(1, ranksPerHost);
    viewport()->update();
}

QString TimelineView::rankName(std::int64_t rank) const
{
    const std::int64_t host = rank >= 0 ? rank / m_ranksPerHost : -1;
    if (host < 0 || host >= m_hosts.size())
        return tr("rank %1").arg(rank);
    return tr("rank %1 · %2").arg(rank).arg(m_hosts[qsizetype(host)]);
}

int TimelineView::groupCount() const
{
    int n = 0;
    for (std::size_t r = 0; r < data().rows().size(); ++r)
        n = std::max(n, groupOfRow(int(r)) + 1);
    return n;
}

QString TimelineView::groupName(int group) const
{
    switch (m_grouping) {
    case Grouping::Stage:
        return tr("stage %1").arg(group);
    case Grouping::Replica:
        return tr("DP replica %1").arg(group);
    case Grouping::Node:
        return tr("node %1").arg(group);
    case Grouping::None:
        break;
    }
    return {};
}

trace::TrackSummary TimelineView::groupSummary(int group) const
{
    if (m_summariesDirty) {
        std::vector<int> groupOf;
        for (std::size_t r = 0; r < data().rows().size(); ++r) {
            const auto rank = data().rows()[r].rank;
            if (rank < 0)
                continue;
            if (std::size_t(rank) >= groupOf.size())
                groupOf.resize(std::size_t(rank) + 1, -1);
            groupOf[std::size_t(rank)] = groupOfRow(int(r));
        }
        m_summaries = trace::summarizeTrackGroups(
            data().events(), groupOf, groupCount(), data().beginNs(), std::max(data().endNs(), data().beginNs() + 1));
        m_summariesDirty = false;
    }
    return group >= 0 && std::size_t(group) < m_summaries.size() ? m_summaries[std::size_t(group)]
                                                                 : trace::TrackSummary {};
}

void TimelineView::setCollapsed(int group, bool collapse)
{
    if (collapse)
        m_collapsed.insert(group);
    else
        m_collapsed.erase(group);
    invalidateLayout();
    updateScrollBars();
    viewport()->update();
}

void TimelineView::setAllCollapsed(bool collapse)
{
    m_collapsed.clear();
    if (collapse)
        for (int g = 0; g < groupCount(); ++g)
            m_collapsed.insert(g);
    invalidateLayout();
    updateScrollBars();
    viewport()->update();
}

void TimelineView::setPinned(int row, bool pin)
{
    if (pin)
        m_pins.insert(row);
    else
        m_pins.erase(row);
    invalidateLayout();
    updateScrollBars();
    viewport()->update();
}

void TimelineView::setFlows(Flows f)
{
    m_flowMode = f;
    viewport()->update();
}

void TimelineView::setKindHidden(LegendKind kind, bool hidden)
{
    const std::uint32_t bit = 1u << int(kind);
    m_hidden = hidden ? (m_hidden | bit) : (m_hidden & ~bit);
    if (m_selected >= 0 && hidden) {
        const auto& e = data().event(std::uint32_t(m_selected));
        if (legendKindOf(e.kind, e.group >= 0 ? data().groupKindOf(e) : trace::GroupKind::Other) == kind)
            selectEvent(-1);
    }
    viewport()->update();
}

std::vector<std::size_t> TimelineView::displayOrder() const
{
    // Grouped by pipeline stage (ranks without one last), then by rank, the compute lane above the comm lane.
    const auto& rows = data().rows();
    std::vector<std::size_t> order(rows.size());
    for (std::size_t i = 0; i < order.size(); ++i)
        order[i] = i;
    std::vector<int> groups(rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i)
        groups[i] = groupOfRow(int(i));
    std::stable_sort(order.begin(), order.end(), [&rows, &groups, this](std::size_t a, std::size_t b) {
        const auto key = [&](std::size_t i) {
            const auto& r = rows[i];
            const int g = m_grouping == Grouping::None ? r.stage : groups[i];
            return std::tuple(g < 0 ? INT32_MAX : g, r.rank, r.stream >= 0 ? 2 + r.stream : int(r.lane));
        };
        return key(a) < key(b);
    });
    return order;
}

const std::vector<TimelineView::Track>& TimelineView::tracks() const
{
    if (!m_layoutDirty)
        return m_tracks;
    m_layoutDirty = false;
    m_tracks.clear();
    const auto& rows = data().rows();
    m_rowTrack.assign(rows.size(), -1);
    const auto height
        = [](const TimelineData::Row& r) { return r.lane == trace::Lane::Compute ? kComputeRow : kCommRow; };
    int pinTop = 0, top = 0;
    const auto order = displayOrder();
    for (std::size_t i : order)
        if (m_pins.count(int(i))) {
            m_rowTrack[i] = int(m_tracks.size());
            m_tracks.push_back({ false, int(i), groupOfRow(int(i)), true, pinTop, height(rows[i]) });
            pinTop += height(rows[i]) + 2;
        }
    m_pinnedHeight = pinTop;
    int current = INT32_MIN;
    for (std::size_t i : order) {
        if (m_pins.count(int(i)))
            continue;
        const int g = groupOfRow(int(i));
        if (m_grouping != Grouping::None && g != current && g >= 0) {
            current = g;
            // Collapsed headers are packed without gaps, so 64 stages fit in one screen.
            const bool shut = m_collapsed.count(g) > 0;
            m_tracks.push_back({ true, shut ? int(i) : -1, g, false, top, shut ? kCollapsedRow : kHeaderRow });
            top += shut ? kCollapsedRow : kHeaderRow + 2;
        }
        if (g >= 0 && m_collapsed.count(g)) {
            m_rowTrack[i] = int(m_tracks.size()) - 1; // drawn, summarised, by its header
            continue;
        }
        m_rowTrack[i] = int(m_tracks.size());
        m_tracks.push_back({ false, int(i), g, false, top, height(rows[i]) });
        top += height(rows[i]) + 2;
    }
    return m_tracks;
}

int TimelineView::pinnedHeight() const
{
    tracks(); // lays out, measuring the pinned band, when needed
    return m_pinnedHeight;
}

int TimelineView::contentHeight() const
{
    int h = 0;
    for (const Track& t : tracks())
        if (!t.pin)
            h = std::max(h, t.top + t.height + 2);
    return h;
}

int TimelineView::trackY(const Track& t) const
{
    return t.pin ? kRulerHeight + t.top : kRulerHeight + pinnedHeight() + t.top - verticalScrollBar()->value();
}

const TimelineView::Track* TimelineView::trackAtY(int y) const
{
    const int pinned = pinnedHeight();
    for (const Track& t : tracks()) {
        const int top = trackY(t);
        if (!t.pin && top < kRulerHeight + pinned)
            continue; // scrolled under the pinned band
        if (y >= top && y < top + t.height)
            return &t;
    }
    return nullptr;
}

QRect TimelineView::rowRect(int row) const
{
    tracks();
    if (row < 0 || std::size_t(row) >= m_rowTrack.size() || m_rowTrack[std::size_t(row)] < 0)
        return {};
    const Track& t = m_tracks[std::size_t(m_rowTrack[std::size_t(row)])];
    if (t.header)
        return {};
    return QRect(0, trackY(t), viewport()->width(), t.height);
}

QRect TimelineView::headerRect(int group) const
{
    for (const Track& t : tracks())
        if (t.header && t.group == group)
            return QRect(0, trackY(t), viewport()->width(), t.height);
    return {};
}

} // namespace loom::views
