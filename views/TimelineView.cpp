#include "views/TimelineView.h"

#include "views/Colors.h"
#include "views/Explain.h"

#include <QHelpEvent>
#include <QKeyEvent>
#include <QLocale>
#include <QPainter>
#include <QScrollBar>
#include <QToolTip>

#include <cmath>
#include <unordered_map>

namespace loom::views {

TimelineView::TimelineView(QWidget* parent)
    : QAbstractScrollArea(parent)
{
    setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    setFocusPolicy(Qt::StrongFocus);
    viewport()->setMouseTracking(true);
    viewport()->setBackgroundRole(QPalette::Base);
    connect(verticalScrollBar(), &QScrollBar::valueChanged, viewport(), qOverload<>(&QWidget::update));
}

void TimelineView::setTimeline(TimelineData data)
{
    const bool sameSpan = data.beginNs() == m_data.beginNs() && data.endNs() == m_data.endNs();
    m_data = std::move(data);
    m_selected = -1;
    if (!sameSpan || m_t1 <= m_t0)
        fit();
    updateScrollBars();
    viewport()->update();
}

void TimelineView::fit()
{
    const std::int64_t span = std::max<std::int64_t>(m_data.endNs() - m_data.beginNs(), 1000);
    setWindow(m_data.beginNs() - span / 50, m_data.endNs() + span / 50);
}

void TimelineView::setWindow(std::int64_t t0, std::int64_t t1)
{
    if (t1 <= t0)
        t1 = t0 + 1;
    m_t0 = t0;
    m_t1 = t1;
    viewport()->update();
}

double TimelineView::xOf(std::int64_t t) const
{
    const double w = std::max(1, viewport()->width() - kLabelWidth);
    return kLabelWidth + double(t - m_t0) / double(m_t1 - m_t0) * w;
}

std::int64_t TimelineView::timeAt(double x) const
{
    const double w = std::max(1, viewport()->width() - kLabelWidth);
    return m_t0 + std::int64_t((x - kLabelWidth) / w * double(m_t1 - m_t0));
}

void TimelineView::zoomAt(double factor, int x)
{
    const std::int64_t anchor = timeAt(std::max(x, kLabelWidth));
    const double span = std::clamp(double(m_t1 - m_t0) / factor, 100.0, 1e15);
    const double left = double(anchor - m_t0) / double(m_t1 - m_t0);
    const auto t0 = anchor - std::int64_t(left * span);
    setWindow(t0, t0 + std::int64_t(span));
}

void TimelineView::panBy(double fraction)
{
    const auto d = std::int64_t(fraction * double(m_t1 - m_t0));
    setWindow(m_t0 + d, m_t1 + d);
}

int TimelineView::rowHeight(const TimelineData::Row& row) const
{
    return row.lane == trace::Lane::Compute ? kComputeRow : kCommRow;
}

int TimelineView::contentHeight() const
{
    int h = 0;
    for (const auto& r : m_data.rows())
        h += rowHeight(r) + 2;
    return h;
}

void TimelineView::updateScrollBars()
{
    const int visible = viewport()->height() - kRulerHeight;
    verticalScrollBar()->setRange(0, std::max(0, contentHeight() - visible));
    verticalScrollBar()->setPageStep(std::max(1, visible));
    verticalScrollBar()->setSingleStep(kComputeRow);
}

void TimelineView::resizeEvent(QResizeEvent* event)
{
    QAbstractScrollArea::resizeEvent(event);
    updateScrollBars();
}

int TimelineView::rowAtY(int y) const
{
    int top = kRulerHeight - verticalScrollBar()->value();
    const auto& rows = m_data.rows();
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const int h = rowHeight(rows[i]);
        if (y >= top && y < top + h)
            return int(i);
        top += h + 2;
    }
    return -1;
}

std::int64_t TimelineView::eventAt(const QPoint& pos) const
{
    const int row = rowAtY(pos.y());
    if (row < 0 || pos.x() < kLabelWidth)
        return -1;
    // Accept a hit within a pixel either side, so very short events can be picked.
    const auto& r = m_data.rows()[std::size_t(row)];
    const std::int64_t t = timeAt(pos.x());
    const std::int64_t slack = std::max<std::int64_t>(1, timeAt(pos.x() + 1) - t);
    for (std::int64_t probe : {t, t - slack, t + slack}) {
        const std::int64_t e = m_data.eventAt(r, probe);
        if (e >= 0)
            return e;
    }
    return -1;
}

QString TimelineView::eventDescription(std::int64_t index) const
{
    if (index < 0 || std::size_t(index) >= m_data.events().size())
        return {};
    const auto& e = m_data.event(std::uint32_t(index));
    QString s = QStringLiteral("<b>%1</b> — rank %2").arg(QString::fromLatin1(trace::toString(e.kind).data()), QString::number(e.rank));
    if (e.stage >= 0)
        s += tr(", stage %1").arg(e.stage);
    if (e.microBatch >= 0)
        s += tr(", micro-batch %1").arg(e.microBatch);
    if (e.chunk > 0)
        s += tr(", chunk %1").arg(e.chunk);
    if (e.step >= 0)
        s += tr(", step %1").arg(e.step);
    s += tr("<br>start %1, duration %2").arg(formatSeconds(double(e.startNs - m_data.beginNs()) * 1e-9),
        formatSeconds(double(e.durationNs()) * 1e-9));
    if (e.bytes > 0) {
        s += tr("<br>%1 bytes").arg(QLocale().toString(qulonglong(e.bytes)));
        if (e.durationNs() > 0)
            s += tr(", %1 GB/s").arg(QLocale().toString(double(e.bytes) / double(e.durationNs()), 'f', 2));
    }
    if (e.peer >= 0)
        s += tr("<br>peer rank %1").arg(e.peer);
    if (!e.codec.empty())
        s += tr("<br>codec %1").arg(QString::fromStdString(e.codec));
    s += e.source == trace::EventSource::Simulated ? tr("<br><i>simulated</i>") : tr("<br><i>measured</i>");
    return s;
}

void TimelineView::paintRuler(QPainter& p)
{
    const QRect ruler(0, 0, viewport()->width(), kRulerHeight);
    p.fillRect(ruler, palette().color(QPalette::Window));
    p.setPen(palette().color(QPalette::Mid));
    p.drawLine(ruler.bottomLeft(), ruler.bottomRight());
    const double span = double(m_t1 - m_t0);
    const double target = span / std::max(1.0, double(viewport()->width() - kLabelWidth) / 110.0);
    double step = std::pow(10.0, std::floor(std::log10(target)));
    for (double m : {2.0, 5.0, 10.0})
        if (step < target)
            step = std::pow(10.0, std::floor(std::log10(target))) * m;
    p.setPen(palette().color(QPalette::Text));
    const double origin = double(m_data.beginNs());
    for (double t = origin + std::ceil((double(m_t0) - origin) / step) * step; t <= double(m_t1); t += step) {
        const double x = xOf(std::int64_t(t));
        p.drawLine(QPointF(x, kRulerHeight - 6), QPointF(x, kRulerHeight));
        p.drawText(QRectF(x + 3, 2, 100, kRulerHeight - 6), Qt::AlignLeft | Qt::AlignVCenter, formatSeconds((t - origin) * 1e-9));
    }
}

void TimelineView::paintEvent(QPaintEvent*)
{
    QPainter p(viewport());
    const QPalette& pal = palette();
    const int width = viewport()->width();
    std::size_t boxes = 0;
    if (m_data.events().empty()) {
        p.setPen(pal.color(QPalette::PlaceholderText));
        p.drawText(viewport()->rect(), Qt::AlignCenter, tr("No events to show yet."));
        m_lastBoxes = 0;
        return;
    }
    p.setClipRect(0, kRulerHeight, width, viewport()->height() - kRulerHeight);
    QFont small = font();
    small.setPointSizeF(std::max(7.0, small.pointSizeF() - 1.5));
    p.setFont(small);
    const QFontMetrics fm(small);
    const int digitWidth = fm.horizontalAdvance(QLatin1Char('0'));
    std::unordered_map<std::uint64_t, std::pair<QString, int>> labels;
    const QBrush hatch(colors::misc, Qt::BDiagPattern);
    int top = kRulerHeight - verticalScrollBar()->value();
    const auto& rows = m_data.rows();
    for (std::size_t ri = 0; ri < rows.size(); ++ri) {
        const auto& row = rows[ri];
        const int h = rowHeight(row);
        if (top > viewport()->height())
            break;
        if (top + h < kRulerHeight) {
            top += h + 2;
            continue;
        }
        const QRectF band(kLabelWidth, top, width - kLabelWidth, h);
        if (row.lane == trace::Lane::Compute) {
            // Idle time is what is left visible between events: the pipeline bubble and waits.
            const double x0 = std::max(double(kLabelWidth), xOf(m_data.beginNs()));
            const double x1 = std::min(double(width), xOf(m_data.endNs()));
            if (x1 > x0) {
                p.fillRect(QRectF(x0, top, x1 - x0, h), colors::idle.lighter(108));
                p.fillRect(QRectF(x0, top, x1 - x0, h), hatch);
            }
        }
        const auto [first, last] = m_data.visible(row, m_t0, m_t1);
        double runStart = -1, runEnd = -1;
        QColor runColor;
        auto flush = [&] {
            if (runStart < 0)
                return;
            p.fillRect(QRectF(runStart, top, std::max(1.0, runEnd - runStart), h), runColor);
            ++boxes;
            runStart = -1;
        };
        const double left = band.left(), right = band.right();
        const double scale = (right - left) / double(m_t1 - m_t0);
        const auto px = [&](std::int64_t t) { return left + double(t - m_t0) * scale; };
        // When every event of the row is under two pixels wide, whole pixel runs can be skipped unseen.
        const bool allTiny = double(row.maxDuration) * scale < 2;
        std::int64_t nextJump = INT64_MIN;
        for (std::size_t i = first; i < last; ++i) {
            const double x0 = std::max(left, px(row.start[i]));
            const double x1 = std::min(right, px(row.end[i]));
            if (x1 < left || x0 > right)
                continue;
            if (x1 - x0 < 2) {
                // Tiny events: extend the current pixel run instead of drawing each.
                if (runStart >= 0 && x0 <= runEnd + 1) {
                    runEnd = std::max(runEnd, x1);
                } else {
                    flush();
                    const auto& e = m_data.event(row.events[i]);
                    runStart = x0;
                    runEnd = x1;
                    runColor = eventColor(e.kind, e.group >= 0 ? m_data.groupKindOf(e) : trace::GroupKind::Other);
                }
                // Skip, by binary search, the later events that start within the run's next two pixels: they
                // can only extend it when all are tiny, or when the running maximum of ends proves none sticks
                // out. One search per two pixels at most, so the cost follows the pixels, not the events.
                if (row.start[i] < nextJump)
                    continue;
                const auto tNext = m_t0 + std::int64_t((runEnd + 2 - left) / scale);
                nextJump = tNext;
                const auto j = std::size_t(
                    std::lower_bound(row.start.begin() + std::ptrdiff_t(i + 1), row.start.begin() + std::ptrdiff_t(last), tNext)
                    - row.start.begin());
                if (j > i + 1 && (allTiny || row.maxEnd[j - 1] <= tNext)) {
                    runEnd = std::max(runEnd, std::min(right, px(row.maxEnd[j - 1])));
                    i = j - 1;
                }
                continue;
            }
            flush();
            const auto& e = m_data.event(row.events[i]);
            const QColor c = eventColor(e.kind, e.group >= 0 ? m_data.groupKindOf(e) : trace::GroupKind::Other);
            const QRectF box(x0, top, x1 - x0, h);
            p.fillRect(box, c);
            ++boxes;
            if (std::int64_t(row.events[i]) == m_selected) {
                p.setPen(QPen(pal.color(QPalette::Highlight), 2));
                p.drawRect(box.adjusted(1, 1, -1, -1));
            } else if (box.width() > 8) {
                p.setPen(QPen(c.darker(140), 0));
                p.drawLine(box.topRight(), box.bottomRight());
            }
            if (e.microBatch >= 0 && box.width() > 3 * digitWidth && row.lane == trace::Lane::Compute) {
                // Labels are cached per paint: thousands of boxes share a few dozen texts.
                const auto key = (std::uint64_t(std::uint8_t(e.kind)) << 48) | (std::uint64_t(std::uint32_t(e.chunk)) << 32)
                    | std::uint32_t(e.microBatch);
                auto it = labels.find(key);
                if (it == labels.end()) {
                    QString text = (e.kind == trace::EventKind::Forward ? QStringLiteral("F")
                                        : e.kind == trace::EventKind::Backward ? QStringLiteral("B")
                                                                               : QString())
                        + QString::number(e.microBatch);
                    if (e.chunk > 0)
                        text += QStringLiteral(".%1").arg(e.chunk);
                    it = labels.emplace(key, std::pair{text, fm.horizontalAdvance(text)}).first;
                }
                if (it->second.second + 4 <= box.width()) {
                    p.setPen(e.kind == trace::EventKind::Optimizer ? QColor(0x11, 0x11, 0x11) : QColor(Qt::white));
                    p.drawText(box, Qt::AlignCenter, it->second.first);
                }
            }
        }
        flush();
        // The row's label, over a plain background so long timelines never run under it.
        const QRectF labelBox(0, top, kLabelWidth - 4, h);
        p.fillRect(QRectF(0, top, kLabelWidth, h + 2), pal.color(QPalette::Window));
        p.setPen(pal.color(QPalette::Text));
        const QString label = row.lane == trace::Lane::Compute
            ? (row.stage >= 0 ? tr("rank %1 · stage %2").arg(row.rank).arg(row.stage) : tr("rank %1").arg(row.rank))
            : tr("comm");
        p.drawText(labelBox.adjusted(6, 0, 0, 0), Qt::AlignVCenter | (row.lane == trace::Lane::Compute ? Qt::AlignLeft : Qt::AlignRight),
            label);
        top += h + 2;
    }
    p.setClipping(false);
    paintRuler(p);
    m_lastBoxes = boxes;
}

void TimelineView::wheelEvent(QWheelEvent* event)
{
    if (event->modifiers() & Qt::ShiftModifier) {
        QAbstractScrollArea::wheelEvent(event); // scroll the rows
        return;
    }
    zoomAt(std::pow(1.0015, event->angleDelta().y()), int(event->position().x()));
    event->accept();
}

void TimelineView::mousePressEvent(QMouseEvent* event)
{
    if (event->button() != Qt::LeftButton)
        return;
    m_dragFrom = event->pos();
    m_dragT0 = m_t0;
    m_dragging = false;
}

void TimelineView::mouseMoveEvent(QMouseEvent* event)
{
    if (!(event->buttons() & Qt::LeftButton))
        return;
    const int dx = event->pos().x() - m_dragFrom.x();
    if (!m_dragging && std::abs(dx) < 4)
        return;
    m_dragging = true;
    const double nsPerPixel = double(m_t1 - m_t0) / std::max(1, viewport()->width() - kLabelWidth);
    const std::int64_t span = m_t1 - m_t0;
    const auto t0 = m_dragT0 - std::int64_t(dx * nsPerPixel);
    setWindow(t0, t0 + span);
}

void TimelineView::mouseReleaseEvent(QMouseEvent* event)
{
    if (event->button() != Qt::LeftButton || m_dragging) {
        m_dragging = false;
        return;
    }
    m_selected = eventAt(event->pos());
    viewport()->update();
    emit eventSelected(m_selected);
}

void TimelineView::keyPressEvent(QKeyEvent* event)
{
    const int mouseX = viewport()->mapFromGlobal(QCursor::pos()).x();
    const int x = mouseX >= kLabelWidth && mouseX < viewport()->width() ? mouseX : (kLabelWidth + viewport()->width()) / 2;
    switch (event->key()) {
    case Qt::Key_W: zoomAt(1.25, x); return;
    case Qt::Key_S: zoomAt(0.8, x); return;
    case Qt::Key_A: panBy(-0.2); return;
    case Qt::Key_D: panBy(0.2); return;
    case Qt::Key_F:
        if (m_selected >= 0) {
            const auto& e = m_data.event(std::uint32_t(m_selected));
            const std::int64_t pad = std::max<std::int64_t>(e.durationNs() / 4, 100);
            setWindow(e.startNs - pad, e.endNs + pad);
        } else {
            fit();
        }
        return;
    default: QAbstractScrollArea::keyPressEvent(event);
    }
}

bool TimelineView::viewportEvent(QEvent* event)
{
    if (event->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(event);
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
