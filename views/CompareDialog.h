#pragma once

#include <QDialog>

#include <vector>

namespace loom::profiles {
class Store;
}

namespace loom::views {

class RunMonitor;

// Two stored runs side by side: for each, a summary line (layout, state, final loss, tokens/s), its plots
// and its timeline, on the same scales where they share an axis (steps, loss), so differences show.
class CompareDialog : public QDialog {
    Q_OBJECT
public:
    CompareDialog(profiles::Store* store, qint64 left, qint64 right, QWidget* parent = nullptr);
    // False with the reason when either run could not be read.
    bool ok(QString* error = nullptr) const;
    // Both runs have been read (or have failed); they load on worker threads.
    bool loaded() const;
    RunMonitor* monitor(int side) const { return side == 0 ? m_left : m_right; }

private:
    void sameScales(const std::vector<class MetricsPanel*>& panels);

    RunMonitor *m_left, *m_right;
    QString m_error;
};

} // namespace loom::views
