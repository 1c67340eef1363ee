#pragma once

#include "profiles/RunStore.h"

#include <QAbstractTableModel>

namespace loom::views {

// The runs in the store, newest first: id, name, state (with the cause when it did not finish), steps,
// start and end.
class RunHistoryModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Id, Name, State, Steps, Started, Ended, Cause, ColumnCount };
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
    profiles::Store* m_store;
    std::vector<profiles::RunRecord> m_runs;
};

} // namespace loom::views
