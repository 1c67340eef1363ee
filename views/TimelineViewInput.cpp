// TimelineView's input: wheel and keys (accelerating when held), clicks, drags (pan, ruler range, area),
// headers collapsing, tracks pinning, tooltips.
#include "views/TimelineView.h"

#include <QHelpEvent>
#include <QKeyEvent>
#include <QScrollBar>
#include <QToolTip>

#include <cmath>

namespace loom::views {

void TimelineView::navigated()
{
    m_following = false;
}

void TimelineView::wheelEvent(QWheelEvent* event)
{
    if (event->modifiers() & Qt::ShiftModifier) {
        QAbstractScrollArea::wheelEvent(event); // scroll the rows
        return;
    }
    // A burst of wheel turns is one step of the history.
    if (!m_lastWheel.isValid() || m_lastWheel.elapsed() > 600)
        pushHistory();
    m_lastWheel.start();
    navigated();
    // Ctrl+wheel: 2× a notch, so 45 s to 0.5 s is 7 notches, not 25.
    const double base = event->modifiers() & Qt::ControlModifier ? std::pow(2.0, 1.0 / 120) : 1.0015;
    zoomAt(std::pow(base, event->angleDelta().y()), int(event->position().x()));
    event->accept();
}

void TimelineView::mousePressEvent(QMouseEvent* event)
{
    if (event->button() == Qt::BackButton || event->button() == Qt::ForwardButton) {
        event->button() == Qt::BackButton ? goBack() : goForward();
        return;
    }
    if (event->button() != Qt::LeftButton)
        return;
    m_dragFrom = m_dragTo = event->pos();
    m_dragT0 = m_t0;
    m_dragging = false;
    // A drag that starts on the ruler selects a time range; with Shift on the tracks an area; else it pans.
    m_selectingRange = event->pos().y() < kRulerHeight && event->pos().x() >= labelWidth();
    m_selectingArea = !m_selectingRange && (event->modifiers() & Qt::ShiftModifier) && event->pos().x() >= labelWidth();
}

void TimelineView::mouseMoveEvent(QMouseEvent* event)
{
    if (!(event->buttons() & Qt::LeftButton))
        return;
    const int dx = event->pos().x() - m_dragFrom.x();
    if (!m_dragging && std::abs(dx) < 4)
        return;
    if (!m_dragging && !m_selectingRange && !m_selectingArea)
        pushHistory();
    m_dragging = true;
    m_dragTo = event->pos();
    if (m_selectingRange) {
        setSelection(timeAt(m_dragFrom.x()), timeAt(event->pos().x()));
        return;
    }
    if (m_selectingArea) {
        viewport()->update();
        return;
    }
    navigated();
    const double nsPerPixel = double(m_t1 - m_t0) / std::max(1, viewport()->width() - labelWidth());
    const std::int64_t span = m_t1 - m_t0;
    const auto t0 = m_dragT0 - std::int64_t(dx * nsPerPixel);
    setWindow(t0, t0 + span);
}

void TimelineView::selectAreaBetween(int y0, int y1, std::int64_t t0, std::int64_t t1)
{
    // Every lane a track between y0 and y1 draws: a collapsed header stands for all its members.
    std::vector<std::pair<std::int32_t, trace::Lane>> lanes;
    const int lo = std::min(y0, y1), hi = std::max(y0, y1);
    tracks();
    for (std::size_t r = 0; r < data().rows().size(); ++r) {
        const int t = m_rowTrack[r];
        if (t < 0)
            continue;
        const Track& track = m_tracks[std::size_t(t)];
        const int top = trackY(track);
        if (top + track.height > lo && top < hi)
            lanes.emplace_back(data().rows()[r].rank, data().rows()[r].lane);
    }
    m_selection = {};
    if (lanes.empty())
        m_area = {};
    else
        setArea(t0, t1, std::move(lanes));
    viewport()->update();
}

void TimelineView::mouseReleaseEvent(QMouseEvent* event)
{
    if (event->button() != Qt::LeftButton)
        return;
    if (m_dragging) {
        if (m_selectingArea)
            selectAreaBetween(m_dragFrom.y(), event->pos().y(), timeAt(m_dragFrom.x()), timeAt(event->pos().x()));
        m_dragging = m_selectingRange = m_selectingArea = false;
        return;
    }
    m_selectingArea = false;
    if (m_selectingRange) { // a click on the ruler clears the range
        m_selectingRange = false;
        setSelection(0, 0);
        return;
    }
    const Track* t = trackAtY(event->pos().y());
    if (t && event->pos().x() < labelWidth()) {
        // The names column: a header folds its group; Ctrl pins or unpins a lane.
        if (t->header)
            setCollapsed(t->group, !collapsed(t->group));
        else if (event->modifiers() & Qt::ControlModifier)
            setPinned(t->row, !pinned(t->row));
        return;
    }
    selectEvent(eventAt(event->pos()));
}

void TimelineView::keyPressEvent(QKeyEvent* event)
{
    const int mouseX = viewport()->mapFromGlobal(QCursor::pos()).x();
    const int x
        = mouseX >= labelWidth() && mouseX < viewport()->width() ? mouseX : (labelWidth() + viewport()->width()) / 2;
    const int key = event->key();
    if ((event->modifiers() & Qt::AltModifier) && (key == Qt::Key_Left || key == Qt::Key_Right)) {
        key == Qt::Key_Left ? goBack() : goForward();
        return;
    }
    const bool wasd = key == Qt::Key_W || key == Qt::Key_S || key == Qt::Key_A || key == Qt::Key_D;
    if (wasd) {
        navigated();
        // Held keys accelerate, as in Perfetto: each repeat moves further, up to 4× the first step.
        m_keyRepeat = event->isAutoRepeat() ? std::min(m_keyRepeat + 1, 12) : 0;
        if (!event->isAutoRepeat())
            pushHistory();
    }
    const double speed = 1.0 + 0.25 * m_keyRepeat;
    switch (key) {
    case Qt::Key_W:
        zoomAt(std::pow(1.25, speed), x);
        return;
    case Qt::Key_S:
        zoomAt(std::pow(0.8, speed), x);
        return;
    case Qt::Key_A:
        panBy(-0.2 * speed);
        return;
    case Qt::Key_D:
        panBy(0.2 * speed);
        return;
    case Qt::Key_F:
        pushHistory();
        navigated();
        if (m_selection.t1 > m_selection.t0) {
            setWindow(m_selection.t0, m_selection.t1);
        } else if (m_area.t1 > m_area.t0) {
            setWindow(m_area.t0, m_area.t1);
        } else if (m_selected >= 0) {
            const auto& e = data().event(std::uint32_t(m_selected));
            const std::int64_t pad = std::max<std::int64_t>(e.durationNs() / 4, 100);
            setWindow(e.startNs - pad, e.endNs + pad);
        } else {
            fit();
        }
        return;
    case Qt::Key_Escape:
        if (m_dragging) {
            m_dragging = m_selectingArea = m_selectingRange = false;
            viewport()->update();
            return;
        }
        break;
    default:
        break;
    }
    QAbstractScrollArea::keyPressEvent(event);
}

bool TimelineView::viewportEvent(QEvent* event)
{
    if (event->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(event);
        const Track* t = trackAtY(help->pos().y());
        if (t && t->header && help->pos().x() < labelWidth()) {
            const auto s = groupSummary(t->group);
            QToolTip::showText(help->globalPos(),
                tr("<b>%1</b>, %2 ranks: compute busy %3 % of the run, the rest idle or waiting (bubble %4 %); "
                   "comm lanes busy %5 %. Click to %6.")
                    .arg(groupName(t->group))
                    .arg(s.members)
                    .arg(100 * s.busy, 0, 'f', 1)
                    .arg(100 * s.bubble, 0, 'f', 1)
                    .arg(100 * s.comm, 0, 'f', 1)
                    .arg(collapsed(t->group) ? tr("expand") : tr("collapse")),
                viewport());
            return true;
        }
        const std::int64_t e = eventAt(help->pos());
        if (e >= 0)
            QToolTip::showText(help->globalPos(), eventDescription(e), viewport());
        else
            QToolTip::hideText();
        return true;
    }
    return QAbstractScrollArea::viewportEvent(event);
}

} // namespace loom::views
