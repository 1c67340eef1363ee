#include "views/TimelineModel.h"

#include "views/Explain.h"

#include <QLocale>

namespace loom::views {

TimelineModel::TimelineModel(QObject* parent)
    : QAbstractItemModel(parent)
{
}

void TimelineModel::setTimeline(TimelineData data)
{
    beginResetModel();
    m_data = std::move(data);
    endResetModel();
    emit timelineChanged();
}

void TimelineModel::setEvents(std::vector<trace::TraceEvent> events, std::vector<trace::GroupInfo> groups)
{
    beginResetModel();
    m_data.setEvents(std::move(events), std::move(groups));
    endResetModel();
    emit timelineChanged();
}

void TimelineModel::clear()
{
    setEvents({});
}

void TimelineModel::addGroups(const std::vector<trace::GroupInfo>& groups)
{
    m_data.addGroups(groups);
    emit timelineChanged();
}

void TimelineModel::append(const std::vector<trace::TraceEvent>& events)
{
    if (events.empty())
        return;
    if (!m_data.appendsInOrder(events)) {
        beginResetModel();
        m_data.append(events);
        endResetModel();
        emit timelineChanged();
        return;
    }
    // Group by lane (keeping order) so each lane gets one insertion.
    std::vector<std::vector<trace::TraceEvent>> byRow(m_data.rows().size());
    for (const auto& e : events)
        byRow[std::size_t(m_data.rowOf(e))].push_back(e);
    for (std::size_t r = 0; r < byRow.size(); ++r) {
        if (byRow[r].empty())
            continue;
        const int first = int(m_data.rows()[r].events.size());
        beginInsertRows(index(int(r), 0), first, first + int(byRow[r].size()) - 1);
        m_data.append(byRow[r]);
        endInsertRows();
    }
    emit timelineChanged();
}

// Internal ids: 0 for a lane, lane + 1 for an event of that lane.
QModelIndex TimelineModel::index(int row, int column, const QModelIndex& parent) const
{
    if (row < 0 || column < 0 || column >= ColumnCount)
        return {};
    if (!parent.isValid())
        return row < int(m_data.rows().size()) ? createIndex(row, column, quintptr(0)) : QModelIndex();
    if (parent.internalId() != 0 || parent.column() != 0 || parent.row() >= int(m_data.rows().size()))
        return {};
    const auto& lane = m_data.rows()[std::size_t(parent.row())];
    return row < int(lane.events.size()) ? createIndex(row, column, quintptr(parent.row() + 1)) : QModelIndex();
}

QModelIndex TimelineModel::parent(const QModelIndex& child) const
{
    if (!child.isValid() || child.internalId() == 0)
        return {};
    return createIndex(int(child.internalId() - 1), 0, quintptr(0));
}

int TimelineModel::rowCount(const QModelIndex& parent) const
{
    if (!parent.isValid())
        return int(m_data.rows().size());
    if (parent.internalId() != 0 || parent.column() != 0)
        return 0;
    return int(m_data.rows()[std::size_t(parent.row())].events.size());
}

int TimelineModel::columnCount(const QModelIndex&) const
{
    return ColumnCount;
}

QVariant TimelineModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid))
        return {};
    if (index.internalId() == 0) {
        const auto& lane = m_data.rows()[std::size_t(index.row())];
        if (role == Qt::DisplayRole && index.column() == Name)
            return lane.stream >= 0                 ? tr("rank %1 stream %2").arg(lane.rank).arg(lane.stream)
                : lane.lane == trace::Lane::Compute ? tr("rank %1 compute").arg(lane.rank)
                                                    : tr("rank %1 comm").arg(lane.rank);
        if (role == Qt::DisplayRole && index.column() == Stage)
            return lane.stage;
        return {};
    }
    const auto& lane = m_data.rows()[std::size_t(index.internalId() - 1)];
    const std::uint32_t ev = lane.events[std::size_t(index.row())];
    if (role == EventIndexRole)
        return qulonglong(ev);
    if (role != Qt::DisplayRole)
        return {};
    const auto& e = m_data.event(ev);
    switch (index.column()) {
    case Name:
        return QString::fromLatin1(trace::toString(e.kind).data());
    case Start:
        return formatSeconds(double(e.startNs - m_data.beginNs()) * 1e-9);
    case Duration:
        return formatSeconds(double(e.durationNs()) * 1e-9);
    case MicroBatch:
        return e.microBatch;
    case Stage:
        return e.stage;
    case Bytes:
        return QLocale().toString(qulonglong(e.bytes));
    }
    return {};
}

QVariant TimelineModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return {};
    static const char* names[] = { "event", "start", "duration", "micro-batch", "stage", "bytes" };
    return section >= 0 && section < ColumnCount ? QVariant(tr(names[section])) : QVariant();
}

RangeStats rangeStats(const TimelineData& data, std::int64_t t0, std::int64_t t1)
{
    RangeStats s;
    s.t0 = std::min(t0, t1);
    s.t1 = std::max(t0, t1);
    const double span = double(std::max<std::int64_t>(1, s.t1 - s.t0));
    double commSeconds = 0;
    for (const auto& row : data.rows()) {
        const bool compute = row.lane == trace::Lane::Compute;
        (compute ? s.computeLanes : s.commLanes) += 1;
        const auto [first, last] = data.visible(row, s.t0, s.t1);
        // Busy time is the union of the lane's events clipped to the range (comm events may overlap).
        std::int64_t busy = 0, wait = 0, coveredTo = s.t0;
        for (std::size_t i = first; i < last; ++i) {
            const std::int64_t a = std::max(row.start[i], s.t0), b = std::min(row.end[i], s.t1);
            if (b <= a)
                continue;
            ++s.events;
            const auto& e = data.event(row.events[i]);
            if (e.kind == trace::EventKind::Wait) {
                wait += b - a;
                continue;
            }
            if (e.kind == trace::EventKind::Launch)
                continue; // the host launching device work: neither compute nor waiting
            if (b > coveredTo) {
                busy += b - std::max(a, coveredTo);
                coveredTo = b;
            }
            if (!compute && e.durationNs() > 0)
                s.bytes += double(e.bytes) * double(b - a) / double(e.durationNs());
        }
        if (compute) {
            s.computeBusy += double(busy) / span;
            s.waitFraction += double(wait) / span;
        } else {
            s.commBusy += double(busy) / span;
            commSeconds += double(busy) * 1e-9;
        }
    }
    if (s.computeLanes > 0) {
        s.computeBusy /= s.computeLanes;
        s.waitFraction /= s.computeLanes;
    }
    if (s.commLanes > 0)
        s.commBusy /= s.commLanes;
    s.gbPerSecond = commSeconds > 0 ? s.bytes / commSeconds / 1e9 : 0;
    return s;
}

} // namespace loom::views
