#pragma once

#include <QWidget>

class QTableView;

namespace loom::profiles {
class Store;
}

namespace loom::views {

class RunHistoryModel;

// The run history from the store: open a run (its metrics and timeline replace the live view), delete
// it, compare two side by side, export one as a Chrome trace (Perfetto).
class RunsPanel : public QWidget {
    Q_OBJECT
public:
    explicit RunsPanel(profiles::Store* store, QWidget* parent = nullptr);
    RunHistoryModel* model() const { return m_model; }
    QTableView* table() const { return m_table; }
    // The selected runs' ids, in list order.
    QList<qint64> selectedRuns() const;
    // Writes a stored run as a Chrome trace; false with the reason.
    bool exportChrome(qint64 runId, const QString& path, QString* error) const;

signals:
    void openRequested(qint64 runId);
    void compareRequested(qint64 left, qint64 right);

private:
    profiles::Store* m_store;
    RunHistoryModel* m_model;
    QTableView* m_table;
};

} // namespace loom::views
