#pragma once

#include "profiles/RunStore.h"

#include <QAbstractTableModel>

#include <optional>
#include <vector>

namespace loom::views {

// The runs in the store, newest first: id, name, state (with the cause when it did not finish), steps, the
// layout's degrees (tp/pp/dp) and gradient codec, the last step's loss and tokens/s, start and end.
class RunHistoryModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column {
        Id,
        Name,
        State,
        Steps,
        Degrees,
        Codec,
        FinalLoss,
        TokensPerSecond,
        Started,
        Ended,
        Cause,
        ColumnCount
    };
    // StateRole: the run's profiles::RunState, as an int.
    enum Role { RunIdRole = Qt::UserRole + 1, StateRole };

    // `store` may be null (an empty list); it must outlive the model.
    explicit RunHistoryModel(profiles::Store* store, QObject* parent = nullptr);

    // Re-reads the store; false with the reason when it cannot.
    bool refresh(QString* error = nullptr);
    qint64 runIdAt(int row) const;
    // Deletes a run, its steps and events from the store.
    bool remove(qint64 runId, QString* error);

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    // A run with what its columns show beyond the record: read once in refresh(), not per paint.
    struct Row {
        profiles::RunRecord record;
        QString degrees, codec; // empty when the stored layout cannot be read
        std::optional<profiles::StepRecord> last;
    };
    static std::vector<Row> readRows(profiles::Store& store);
    QVariant display(const Row& row, int column) const;

    profiles::Store* m_store;
    std::vector<Row> m_runs;
};

} // namespace loom::views
