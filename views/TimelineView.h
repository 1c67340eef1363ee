#pragma once

#include "views/TimelineModel.h"

#include <QAbstractScrollArea>

namespace loom::views {

// Per-rank timeline, ranks grouped by pipeline stage: one row per rank's compute lane (forward, backward, optimizer,
// with idle time hatched as bubble) and one for its communication lane; micro-batches numbered in the boxes. Navigation
// as in Perfetto: wheel or W/S zoom at the mouse, A/D or dragging pans, F fits; hovering an event shows its details and
// clicking selects it. Events narrower than 2 pixels are merged into one box per pixel run, so drawing cost follows the
// pixels, not the events; a merged box shows the mix it hides (bands of forward, backward, optimizer or TP, PP, DP
// colours in proportion to their busy time, as tall as the run is busy), never one event's colour for all of them.
class TimelineView : public QAbstractScrollArea {
    Q_OBJECT
public:
    explicit TimelineView(QWidget* parent = nullptr);

    // Shows `data` (in the view's own model).
    void setTimeline(TimelineData data);
    const TimelineData& timeline() const { return m_model->timeline(); }
    // Draws another model's timeline (a live run's); it must outlive the view or be replaced first.
    void setModel(TimelineModel* model);
    TimelineModel* model() const { return m_model; }
    // Follow the newest events as they arrive (the window slides to the end), until the user navigates.
    void setFollowing(bool follow) { m_following = follow; }
    bool following() const { return m_following; }
    // A second timeline (the simulated step of the same layout) drawn as outlines under the measured events
    // of the same rank, shifted by `offsetNs`; empty data removes it.
    void setOverlay(TimelineData overlay, std::int64_t offsetNs);
    const TimelineData& overlay() const { return m_overlay; }
    // The selected time range (drag on the ruler) and what it holds; t0 == t1 when none.
    void setSelection(std::int64_t t0, std::int64_t t1);
    RangeStats selection() const { return m_selection; }
    // The visible time window, ns.
    void setWindow(std::int64_t t0, std::int64_t t1);
    std::pair<std::int64_t, std::int64_t> window() const { return { m_t0, m_t1 }; }
    void fit();
    void zoomAt(double factor, int x);
    void panBy(double fractionOfWindow);
    // The event under a viewport position, or -1.
    std::int64_t eventAt(const QPoint& pos) const;
    std::int64_t selectedEvent() const { return m_selected; }
    QString eventDescription(std::int64_t index) const;
    // Boxes drawn by the last paint (after merging), for the benchmark and tests.
    std::size_t lastPaintBoxes() const { return m_lastBoxes; }

    static constexpr int kLabelWidth = 150, kRulerHeight = 22, kComputeRow = 22, kCommRow = 14;

signals:
    void eventSelected(std::int64_t index);
    void rangeSelected(const loom::views::RangeStats& stats);

protected:
    void paintEvent(QPaintEvent* event) override;
    void wheelEvent(QWheelEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    void keyPressEvent(QKeyEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;
    bool viewportEvent(QEvent* event) override;

private:
    int rowHeight(const TimelineData::Row& row) const;
    int contentHeight() const;
    int rowAtY(int y) const; // -1 when none
    std::vector<std::size_t> displayOrder() const;
    double xOf(std::int64_t t) const;
    std::int64_t timeAt(double x) const;
    void updateScrollBars();
    void paintRuler(class QPainter& p);

    void modelChanged();
    const TimelineData& data() const { return m_model->timeline(); }

    TimelineModel* m_ownModel;
    TimelineModel* m_model;
    TimelineData m_overlay;
    std::int64_t m_overlayOffset = 0;
    RangeStats m_selection;
    bool m_selectingRange = false;
    bool m_following = false;
    std::int64_t m_t0 = 0, m_t1 = 1;
    std::int64_t m_selected = -1;
    QPoint m_dragFrom;
    std::int64_t m_dragT0 = 0;
    bool m_dragging = false;
    std::size_t m_lastBoxes = 0;
};

} // namespace loom::views
