#pragma once

#include <QDialog>

#include <cstdint>
#include <vector>

class QLabel;

namespace loom::profiles {
class Store;
}

namespace loom::views {

class RunMonitor;
class TimelineView;

// Two stored runs compared: their configuration difference (every layout value that differs), for each a
// summary line (layout, state, codec, final loss, tokens/s, bubble) and its plots side by side, on the same scales
// where they share an axis (steps, loss), and their timelines one above the other, aligned on the start of their last
// complete step and panned and zoomed together, so differences show.
class CompareDialog : public QDialog {
    Q_OBJECT
public:
    CompareDialog(profiles::Store* store, qint64 left, qint64 right, QWidget* parent = nullptr);
    // False with the reason when either run could not be read.
    bool ok(QString* error = nullptr) const;
    // Both runs have been read (or have failed); they load on worker threads.
    bool loaded() const;
    RunMonitor* monitor(int side) const { return side == 0 ? m_left : m_right; }
    TimelineView* timeline(int side) const { return m_timelines[std::size_t(side)]; }
    QLabel* difference() const { return m_difference; }
    // A run's summary: layout, degrees, codec, final loss, tokens/s, and its bubble (the busiest stage's).
    QLabel* summary(int side) const { return m_heads[std::size_t(side)]; }

private:
    void sameScales(const std::vector<class MetricsPanel*>& panels);
    void align();
    void follow(int side);
    std::int64_t stepStart(int side) const;

    RunMonitor *m_left, *m_right;
    QString m_error;
    std::vector<TimelineView*> m_timelines;
    std::vector<QLabel*> m_heads;
    QLabel* m_difference = nullptr;
    bool m_aligning = false;
};

} // namespace loom::views
