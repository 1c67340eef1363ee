#pragma once

#include "engine/trace/PredictedMeasured.h"

#include <QWidget>

class QCheckBox;
class QLabel;
class QPushButton;
class QTableWidget;

namespace loom::views {

class CalibrateDialog;
class RunMonitor;
class TimelinePane;
class TimelineView;

// The measured timeline of the monitor's run, live: every rank's compute and comm lanes, in a TimelinePane
// (search, groups, flows, legend, details); "Follow" keeps the newest steps in view while the run goes on
// and names them; "Overlay prediction" draws the planner's simulated step of the same layout over the last
// complete measured step, aligned on its start and (with "Scale to measured") stretched to its length, and
// lists predicted against measured time per kind with their ratio; "Calibrate from this run" fits the cluster
// profile to the run's events (CalibrateDialog); Export saves the view as PNG, SVG or PDF.
class RunTimelinePanel : public QWidget {
    Q_OBJECT
public:
    explicit RunTimelinePanel(RunMonitor* monitor, QWidget* parent = nullptr);
    TimelineView* view() const { return m_view; }
    TimelinePane* pane() const { return m_pane; }
    QCheckBox* overlayBox() const { return m_overlay; }
    QCheckBox* scaleBox() const { return m_scale; }
    QCheckBox* followBox() const { return m_follow; }
    QTableWidget* comparisonTable() const { return m_table; }
    QLabel* comparisonSummary() const { return m_summary; }
    QPushButton* calibrateButton() const { return m_calibrate; }
    // The dialog the last click on calibrateButton() opened (null before any).
    CalibrateDialog* calibrateDialog() const { return m_calibration; }
    const trace::StepComparison& comparison() const { return m_comparison; }
    // Where the overlay starts: the first event of the last step every rank has finished.
    std::int64_t overlayOffset() const;

private:
    void updateOverlay();
    void updateFollowLabel();
    void calibrateFromRun();

    RunMonitor* m_monitor;
    TimelinePane* m_pane;
    TimelineView* m_view;
    QCheckBox *m_follow, *m_overlay, *m_scale;
    QLabel *m_info, *m_summary;
    QTableWidget* m_table;
    QPushButton* m_calibrate;
    CalibrateDialog* m_calibration = nullptr;
    trace::StepComparison m_comparison;
};

} // namespace loom::views
