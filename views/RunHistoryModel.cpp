#include "views/RunHistoryModel.h"

#include "engine/plan/LayoutParser.h"
#include "profiles/ProfileCatalog.h"

#include <QLocale>

#include <QColor>

namespace loom::views {

RunHistoryModel::RunHistoryModel(profiles::Store* store, QObject* parent)
    : QAbstractTableModel(parent)
    , m_store(store)
{
    refresh();
}

std::vector<RunHistoryModel::Row> RunHistoryModel::readRows(profiles::Store& store)
{
    const profiles::RunStore runStore(store);
    const auto last = runStore.lastSteps();
    const profiles::ProfileCatalog catalog(&store);
    std::vector<Row> rows;
    for (auto& record : runStore.runs()) {
        Row row;
        // The layout as the run was launched with it; one the parser cannot read leaves the columns empty
        // rather than guessing.
        const auto read = plan::readLayout(record.layoutJson.toStdString(), catalog);
        if (read.layout) {
            const auto& p = read.layout->parallel;
            row.degrees = QStringLiteral("%1/%2/%3").arg(p.tp).arg(p.pp).arg(p.dp);
            row.codec = QString::fromStdString(read.layout->comm.dpCodec.toString());
        }
        if (const auto it = last.find(record.id); it != last.end())
            row.last = it->second;
        row.record = std::move(record);
        rows.push_back(std::move(row));
    }
    return rows;
}

bool RunHistoryModel::refresh(QString* error)
{
    std::vector<Row> runs;
    if (m_store) {
        try {
            runs = readRows(*m_store);
        } catch (const std::exception& e) {
            if (error)
                *error = tr("The run history could not be read: %1").arg(QString::fromUtf8(e.what()));
            return false;
        }
    }
    std::sort(runs.begin(), runs.end(), [](const Row& a, const Row& b) { return a.record.id > b.record.id; });
    beginResetModel();
    m_runs = std::move(runs);
    endResetModel();
    return true;
}

qint64 RunHistoryModel::runIdAt(int row) const
{
    return row >= 0 && row < int(m_runs.size()) ? m_runs[std::size_t(row)].record.id : 0;
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
    const auto it = std::find_if(m_runs.begin(), m_runs.end(), [&](const Row& r) { return r.record.id == runId; });
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
    const auto& r = m_runs[std::size_t(index.row())].record;
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
    if (role == Qt::TextAlignmentRole && (index.column() == FinalLoss || index.column() == TokensPerSecond))
        return int(Qt::AlignRight | Qt::AlignVCenter);
    if (role != Qt::DisplayRole)
        return {};
    return display(m_runs[std::size_t(index.row())], index.column());
}

QVariant RunHistoryModel::display(const Row& row, int column) const
{
    const auto& r = row.record;
    switch (column) {
    case Id:
        return r.id;
    case Name:
        return r.name;
    case State:
        return profiles::toString(r.state);
    case Steps:
        return r.steps;
    case Degrees:
        return row.degrees;
    case Codec:
        return row.codec;
    case FinalLoss:
        return row.last ? profiles::lossText(row.last->loss) : QString();
    case TokensPerSecond:
        return row.last ? QLocale().toString(row.last->tokensPerSecond, 'f', 0) : QString();
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
    static const char* names[] = { "run", "layout", "state", "steps", "tp/pp/dp", "codec", "final loss", "tokens/s",
        "started", "ended", "cause" };
    return section >= 0 && section < ColumnCount ? QVariant(tr(names[section])) : QVariant();
}

} // namespace loom::views
