#pragma once

#include <QWidget>

class QCheckBox;
class QLabel;

namespace loom::views {

class RunMonitor;
class TimelineView;

// The measured timeline of the monitor's run, live: every rank's compute and comm lanes; "Follow" keeps
// the newest events in view while the run goes on; "Overlay prediction" draws the planner's simulated step
// of the same layout under the measured one (aligned to the start of the last complete step); a range
// dragged on the ruler shows its statistics; Export saves the view as PNG, SVG or PDF.
class RunTimelinePanel : public QWidget {
    Q_OBJECT
public:
    explicit RunTimelinePanel(RunMonitor* monitor, QWidget* parent = nullptr);
    TimelineView* view() const { return m_view; }
    QCheckBox* overlayBox() const { return m_overlay; }
    // Where the overlay starts: the first event of the last step every rank has finished.
    std::int64_t overlayOffset() const;

private:
    void updateOverlay();

    RunMonitor* m_monitor;
    TimelineView* m_view;
    QCheckBox *m_follow, *m_overlay;
    QLabel* m_info;
};

} // namespace loom::views
