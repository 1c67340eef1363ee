#pragma once

#include "engine/trace/TraceAggregates.h"

#include <QAbstractTableModel>
#include <QWidget>

class QComboBox;
class QLabel;
class QPushButton;
class QSortFilterProxyModel;
class QTableView;

namespace loom::views {

class TimelineView;

// An area selection's aggregates as a table, by kind or by rank: count, total time, mean, share of the
// range, bytes and GB/s. Qt::UserRole holds each cell's number, for sorting.
class AreaTableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { What, Count, Total, Mean, Share, Bytes, Bandwidth, ColumnCount };
    enum class By { Kind, Rank };
    explicit AreaTableModel(QObject* parent = nullptr);
    void setArea(const trace::AreaAggregates& area, By by);
    By by() const { return m_by; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    std::vector<trace::AreaRow> m_rows;
    By m_by = By::Kind;
};

// The timeline's details: the clicked event (what it is, where, when, bytes and bandwidth, its group, and
// its collective's parts on the other ranks), and the area selected as a sortable, copyable table.
class TimelineDetails : public QWidget {
    Q_OBJECT
public:
    explicit TimelineDetails(TimelineView* view, QWidget* parent = nullptr);
    QLabel* eventText() const { return m_event; }
    QTableView* table() const { return m_table; }
    QComboBox* byBox() const { return m_by; }
    QSortFilterProxyModel* sorted() const { return m_proxy; }
    AreaTableModel* areaModel() const { return m_model; }
    // The table as shown (sorted), tab-separated with its header: what Copy puts on the clipboard.
    QString tableText() const;
    void copyTable() const;

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    void showSelected(std::int64_t index);
    void showArea();

    TimelineView* m_view;
    QLabel *m_event, *m_areaTitle;
    QComboBox* m_by;
    QTableView* m_table;
    AreaTableModel* m_model;
    QSortFilterProxyModel* m_proxy;
    QPushButton* m_copy;
};

} // namespace loom::views
