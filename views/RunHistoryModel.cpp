#include "views/RunHistoryModel.h"

#include <QColor>

namespace loom::views {

RunHistoryModel::RunHistoryModel(profiles::Store* store, QObject* parent)
    : QAbstractTableModel(parent)
    , m_store(store)
{
    refresh();
}

bool RunHistoryModel::refresh(QString* error)
{
    std::vector<profiles::RunRecord> runs;
    if (m_store) {
        try {
            runs = profiles::RunStore(*m_store).runs();
        } catch (const std::exception& e) {
            if (error)
                *error = tr("The run history could not be read: %1").arg(QString::fromUtf8(e.what()));
            return false;
        }
    }
    std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) { return a.id > b.id; });
    beginResetModel();
    m_runs = std::move(runs);
    endResetModel();
    return true;
}

qint64 RunHistoryModel::runIdAt(int row) const
{
    return row >= 0 && row < int(m_runs.size()) ? m_runs[std::size_t(row)].id : 0;
}

bool RunHistoryModel::remove(qint64 runId, QString* error)
{
    try {
        if (!m_store || !profiles::RunStore(*m_store).removeRun(runId)) {
            if (error)
                *error = tr("There is no run %1 to delete.").arg(runId);
            return false;
        }
    } catch (const std::exception& e) {
        if (error)
            *error = tr("Run %1 could not be deleted: %2").arg(runId).arg(QString::fromUtf8(e.what()));
        return false;
    }
    const auto it = std::find_if(m_runs.begin(), m_runs.end(), [&](const auto& r) { return r.id == runId; });
    if (it != m_runs.end()) {
        const int row = int(it - m_runs.begin());
        beginRemoveRows({}, row, row);
        m_runs.erase(it);
        endRemoveRows();
    }
    return true;
}

int RunHistoryModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(m_runs.size());
}
int RunHistoryModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant RunHistoryModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const auto& r = m_runs[std::size_t(index.row())];
    if (role == RunIdRole)
        return r.id;
    if (role == StateRole)
        return int(r.state);
    if (role == Qt::ForegroundRole && index.column() == State) {
        if (profiles::endedBadly(r.state))
            return QColor(0xC0, 0x1F, 0x1F);
        if (r.state == profiles::RunState::Finished)
            return QColor(0x2E, 0x7D, 0x32);
        return {};
    }
    if (role == Qt::ToolTipRole)
        return r.exitCause.isEmpty() ? r.command : r.exitCause;
    if (role != Qt::DisplayRole)
        return {};
    switch (index.column()) {
    case Id:
        return r.id;
    case Name:
        return r.name;
    case State:
        return profiles::toString(r.state);
    case Steps:
        return r.steps;
    case Started:
        return r.startedAt;
    case Ended:
        return r.endedAt;
    case Cause:
        return r.exitCause;
    }
    return {};
}

QVariant RunHistoryModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return {};
    static const char* names[] = { "run", "layout", "state", "steps", "started", "ended", "cause" };
    return section >= 0 && section < ColumnCount ? QVariant(tr(names[section])) : QVariant();
}

} // namespace loom::views
