#pragma once

#include "engine/plan/Search.h"

#include <QAbstractTableModel>

namespace loom::views {

// The planner's ranked layouts, best first: degrees, schedule, memory options and the predicted figures.
class CandidateModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column {
        Rank,
        Tp,
        Pp,
        Dp,
        Vpp,
        MicroBatch,
        Schedule,
        Zero,
        Recompute,
        StepTime,
        TokensPerS,
        Tflops,
        MemoryGB,
        Cp, // context parallelism (last, so the other columns keep their places)
        ColumnCount
    };

    explicit CandidateModel(QObject* parent = nullptr);
    void setCandidates(std::vector<plan::SearchCandidate> candidates);
    const plan::SearchCandidate& candidate(int row) const { return m_candidates.at(std::size_t(row)); }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    std::vector<plan::SearchCandidate> m_candidates;
};

} // namespace loom::views
