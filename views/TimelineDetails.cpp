#include "views/TimelineDetails.h"

#include "views/Explain.h"
#include "views/TimelineView.h"
#include "views/Units.h"

#include <QApplication>
#include <QClipboard>
#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QKeyEvent>
#include <QLabel>
#include <QLocale>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QVBoxLayout>

namespace loom::views {

AreaTableModel::AreaTableModel(QObject* parent)
    : QAbstractTableModel(parent)
{
}

void AreaTableModel::setArea(const trace::AreaAggregates& area, By by)
{
    beginResetModel();
    m_by = by;
    m_rows = by == By::Kind ? area.byKind : area.byRank;
    endResetModel();
}

int AreaTableModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(m_rows.size());
}

int AreaTableModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant AreaTableModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid))
        return {};
    const auto& r = m_rows[std::size_t(index.row())];
    if (role == Qt::TextAlignmentRole)
        return index.column() == What ? int(Qt::AlignLeft | Qt::AlignVCenter) : int(Qt::AlignRight | Qt::AlignVCenter);
    if (role == Qt::UserRole) {
        switch (index.column()) {
        case What:
            return m_by == By::Kind ? QVariant(QString::fromStdString(trace::kindLabel(r.kind, r.group)))
                                    : QVariant(r.rank);
        case Count:
            return qlonglong(r.count);
        case Total:
            return qlonglong(r.totalNs);
        case Mean:
            return r.meanNs;
        case Share:
            return r.share;
        case Bytes:
            return r.bytes;
        case Bandwidth:
            return r.gbPerSecond;
        }
        return {};
    }
    if (role != Qt::DisplayRole)
        return {};
    const QLocale l;
    switch (index.column()) {
    case What:
        return m_by == By::Kind ? QString::fromStdString(trace::kindLabel(r.kind, r.group)) : tr("rank %1").arg(r.rank);
    case Count:
        return l.toString(qlonglong(r.count));
    case Total:
        return formatSeconds(double(r.totalNs) * 1e-9);
    case Mean:
        return formatSeconds(r.meanNs * 1e-9);
    case Share:
        return l.toString(100 * r.share, 'f', 1) + QStringLiteral(" %");
    case Bytes:
        return r.bytes > 0 ? memoryText(r.bytes) : QString(); // in the unit that fits: the column stays narrow
    case Bandwidth:
        return r.gbPerSecond > 0 ? l.toString(r.gbPerSecond, 'f', 2) : QString();
    }
    return {};
}

QVariant AreaTableModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || section < 0 || section >= ColumnCount)
        return {};
    // Shown: short names, so that every column fits the panel; Qt::UserRole (what Copy writes) and the
    // tooltip: the full ones.
    const QString names[] = { m_by == By::Kind ? tr("kind") : tr("rank"), tr("count"), tr("total"), tr("mean"),
        tr("share of range"), tr("bytes"), tr("GB/s") };
    if (role == Qt::UserRole || role == Qt::ToolTipRole)
        return names[section];
    if (role != Qt::DisplayRole)
        return {};
    return section == Share ? tr("share") : names[section];
}

TimelineDetails::TimelineDetails(TimelineView* view, QWidget* parent)
    : QWidget(parent)
    , m_view(view)
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 2, 4, 2);
    m_event = new QLabel(tr("Click an event for its details; Shift+drag over tracks (or drag on the ruler) for "
                            "the area's table."));
    m_event->setWordWrap(true);
    m_event->setTextFormat(Qt::RichText);
    m_event->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_event->setAlignment(Qt::AlignTop | Qt::AlignLeft);
    layout->addWidget(m_event);
    auto* bar = new QHBoxLayout;
    m_areaTitle = new QLabel;
    m_by = new QComboBox;
    m_by->addItems({ tr("by kind"), tr("by rank") });
    m_copy = new QPushButton(tr("Copy"));
    m_copy->setToolTip(tr("Copy the table, as shown, tab-separated (Ctrl+C in the table)"));
    bar->addWidget(m_areaTitle, 1);
    bar->addWidget(m_by);
    bar->addWidget(m_copy);
    layout->addLayout(bar);
    m_model = new AreaTableModel(this);
    m_proxy = new QSortFilterProxyModel(this);
    m_proxy->setSourceModel(m_model);
    m_proxy->setSortRole(Qt::UserRole);
    m_table = new QTableView;
    m_table->setModel(m_proxy);
    m_table->setSortingEnabled(true);
    m_table->sortByColumn(AreaTableModel::Total, Qt::DescendingOrder);
    m_table->verticalHeader()->hide();
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->installEventFilter(this); // Ctrl+C copies the whole table, not the current cell
    layout->addWidget(m_table, 1);
    connect(m_copy, &QPushButton::clicked, this, &TimelineDetails::copyTable);
    connect(m_by, &QComboBox::currentIndexChanged, this, &TimelineDetails::showArea);
    connect(view, &TimelineView::eventSelected, this, &TimelineDetails::showSelected);
    connect(view, &TimelineView::areaSelected, this, &TimelineDetails::showArea);
    showArea();
}

bool TimelineDetails::eventFilter(QObject* watched, QEvent* event)
{
    if (watched == m_table && event->type() == QEvent::KeyPress
        && static_cast<QKeyEvent*>(event)->matches(QKeySequence::Copy)) {
        copyTable();
        return true;
    }
    return QWidget::eventFilter(watched, event);
}

void TimelineDetails::showSelected(std::int64_t index)
{
    if (index < 0) {
        m_event->setText(tr("No event selected."));
        return;
    }
    QString text = m_view->eventDescription(index);
    const auto& members = m_view->highlighted();
    if (members.size() > 1) {
        const auto& data = m_view->timeline();
        text += tr("<br><b>The same %1 on %2 ranks</b> (outlined):")
                    .arg(QString::fromLatin1(trace::toString(data.event(std::uint32_t(index)).kind).data()))
                    .arg(members.size());
        constexpr std::size_t kShown = 16;
        for (std::size_t i = 0; i < members.size() && i < kShown; ++i) {
            const auto& e = data.event(members[i]);
            text += tr("<br>&nbsp;rank %1: start %2, %3")
                        .arg(e.rank)
                        .arg(formatSeconds(double(e.startNs - data.beginNs()) * 1e-9),
                            formatSeconds(double(e.durationNs()) * 1e-9));
        }
        if (members.size() > kShown)
            text += tr("<br>&nbsp;… and %1 more").arg(members.size() - kShown);
    }
    m_event->setText(text);
}

void TimelineDetails::showArea()
{
    const auto& a = m_view->area();
    const bool any = a.t1 > a.t0;
    m_model->setArea(a, m_by->currentIndex() == 1 ? AreaTableModel::By::Rank : AreaTableModel::By::Kind);
    m_areaTitle->setText(any ? tr("Area: %1 × %2 lanes").arg(formatSeconds(double(a.t1 - a.t0) * 1e-9)).arg(a.lanes)
                             : tr("No area selected"));
    m_copy->setEnabled(any);
}

QString TimelineDetails::tableText() const
{
    QStringList lines;
    QStringList head;
    for (int c = 0; c < m_proxy->columnCount(); ++c)
        head << m_proxy->headerData(c, Qt::Horizontal, Qt::UserRole).toString();
    lines << head.join(QLatin1Char('\t'));
    for (int r = 0; r < m_proxy->rowCount(); ++r) {
        QStringList cells;
        for (int c = 0; c < m_proxy->columnCount(); ++c)
            cells << m_proxy->index(r, c).data().toString();
        lines << cells.join(QLatin1Char('\t'));
    }
    return lines.join(QLatin1Char('\n')) + QLatin1Char('\n');
}

void TimelineDetails::copyTable() const
{
    QApplication::clipboard()->setText(tableText());
}

} // namespace loom::views
