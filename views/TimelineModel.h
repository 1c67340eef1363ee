#pragma once

#include "views/TimelineData.h"

#include <QAbstractItemModel>

namespace loom::views {

// The timeline as an item model: top-level rows are the lanes (rank × compute / comm), their children the
// lane's events in time order. Index-based over TimelineData (no object per event), so it holds millions;
// live events arrive through append(), which inserts rows in place when they extend lanes in order and
// resets otherwise. The timeline view draws from timeline(); the model serves tables, tests and selection.
class TimelineModel : public QAbstractItemModel {
    Q_OBJECT
public:
    enum Column { Name, Start, Duration, MicroBatch, Stage, Bytes, ColumnCount };
    enum Role { EventIndexRole = Qt::UserRole + 1 };

    explicit TimelineModel(QObject* parent = nullptr);

    const TimelineData& timeline() const { return m_data; }
    void setTimeline(TimelineData data);
    void setEvents(std::vector<trace::TraceEvent> events, std::vector<trace::GroupInfo> groups = {});
    void append(const std::vector<trace::TraceEvent>& events);
    void addGroups(const std::vector<trace::GroupInfo>& groups);
    void clear();

    QModelIndex index(int row, int column, const QModelIndex& parent = {}) const override;
    QModelIndex parent(const QModelIndex& child) const override;
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

signals:
    // Emitted after every change (reset or append), for views that draw timeline() directly.
    void timelineChanged();

private:
    TimelineData m_data;
};

// What a time range of the timeline holds (the "range selection" of Perfetto and Nsight Systems).
struct RangeStats {
    std::int64_t t0 = 0, t1 = 0;
    int computeLanes = 0, commLanes = 0;
    double computeBusy = 0; // mean fraction of the range the compute lanes are busy (forward, backward, ...)
    double commBusy = 0; // mean fraction the comm lanes are busy
    double waitFraction = 0; // mean fraction of the compute lanes spent in wait events
    double bytes = 0; // bytes of the communication events in the range (pro rata when cut)
    double gbPerSecond = 0; // bytes / busy comm time
    std::size_t events = 0;
};
RangeStats rangeStats(const TimelineData& data, std::int64_t t0, std::int64_t t1);

} // namespace loom::views
