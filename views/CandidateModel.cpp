#include "views/CandidateModel.h"

#include "views/Explain.h"

#include <QLocale>

namespace loom::views {

CandidateModel::CandidateModel(QObject* parent)
    : QAbstractTableModel(parent)
{
}

void CandidateModel::setCandidates(std::vector<plan::SearchCandidate> candidates)
{
    beginResetModel();
    m_candidates = std::move(candidates);
    endResetModel();
}

int CandidateModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(m_candidates.size());
}
int CandidateModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant CandidateModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const auto& c = m_candidates[std::size_t(index.row())];
    const auto& l = c.layout;
    const auto& p = c.prediction;
    if (role == Qt::TextAlignmentRole)
        return int(Qt::AlignRight | Qt::AlignVCenter);
    if (role != Qt::DisplayRole && role != Qt::UserRole)
        return {};
    const bool sortKey = role == Qt::UserRole;
    switch (index.column()) {
    case Rank:
        return index.row() + 1;
    case Tp:
        return qlonglong(l.parallel.tp);
    case Pp:
        return qlonglong(l.parallel.pp);
    case Dp:
        return qlonglong(l.parallel.dp);
    case Vpp:
        return qlonglong(l.parallel.vpp);
    case MicroBatch:
        return qlonglong(l.parallel.microBatch);
    case Schedule:
        return QString::fromLatin1(plan::toString(l.parallel.schedule).data());
    case Zero:
        return l.memory.zero;
    case Recompute:
        return QString::fromLatin1(plan::toString(l.memory.recompute).data());
    case StepTime:
        return sortKey ? QVariant(p.stepTime) : QVariant(formatSeconds(p.stepTime));
    case TokensPerS:
        return sortKey ? QVariant(p.tokensPerSecond) : QVariant(QLocale().toString(p.tokensPerSecond, 'f', 0));
    case Tflops:
        return sortKey ? QVariant(p.tflopsPerGpu) : QVariant(QLocale().toString(p.tflopsPerGpu, 'f', 1));
    case MemoryGB:
        return sortKey ? QVariant(p.memory.total()) : QVariant(QLocale().toString(p.memory.total(), 'f', 1));
    case Cp:
        return qlonglong(l.parallel.cp);
    }
    return {};
}

QVariant CandidateModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return QAbstractTableModel::headerData(section, orientation, role);
    static const char* names[] = { "#", "tp", "pp", "dp", "vpp", "mb", "schedule", "ZeRO", "recompute", "step",
        "tokens/s", "TFLOP/s/GPU", "memory GB", "cp" };
    return section >= 0 && section < ColumnCount ? QVariant(tr(names[section])) : QVariant();
}

} // namespace loom::views
