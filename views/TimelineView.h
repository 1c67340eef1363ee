#pragma once

#include "views/TimelineData.h"

#include <QAbstractScrollArea>

namespace loom::views {

// Per-rank timeline: one row per rank's compute lane (forward, backward, optimizer, with idle time hatched
// as bubble) and one for its communication lane; micro-batches numbered in the boxes. Navigation as in
// Perfetto: wheel or W/S zoom at the mouse, A/D or dragging pans, F fits; hovering an event shows its
// details and clicking selects it. Events narrower than 2 pixels are merged into one box per pixel run,
// so drawing cost follows the pixels, not the events.
class TimelineView : public QAbstractScrollArea {
    Q_OBJECT
public:
    explicit TimelineView(QWidget* parent = nullptr);

    void setTimeline(TimelineData data);
    const TimelineData& timeline() const { return m_data; }
    // The visible time window, ns.
    void setWindow(std::int64_t t0, std::int64_t t1);
    std::pair<std::int64_t, std::int64_t> window() const { return {m_t0, m_t1}; }
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
    double xOf(std::int64_t t) const;
    std::int64_t timeAt(double x) const;
    void updateScrollBars();
    void paintRuler(class QPainter& p);

    TimelineData m_data;
    std::int64_t m_t0 = 0, m_t1 = 1;
    std::int64_t m_selected = -1;
    QPoint m_dragFrom;
    std::int64_t m_dragT0 = 0;
    bool m_dragging = false;
    std::size_t m_lastBoxes = 0;
};

} // namespace loom::views
