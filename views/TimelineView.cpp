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
#include <tuple>
#include <unordered_map>

namespace loom::views {

namespace {
// The colour of a mix kind (TimelineData::mixKind) on a lane.
QColor mixColor(trace::Lane lane, int kind)
{
    static const QColor compute[] = { colors::forward, colors::backward, colors::optimizer, colors::misc };
    static const QColor comm[] = { colors::tensorComm, colors::pipelineComm, colors::dataComm, colors::misc };
    const int last = TimelineData::kMixKinds - 1; // not std::clamp: GCC 12 warns on its temporaries here
    const int index = kind < 0 ? 0 : (kind > last ? last : kind);
    return (lane == trace::Lane::Compute ? compute : comm)[index];
}
} // namespace

TimelineView::TimelineView(QWidget* parent)
    : QAbstractScrollArea(parent)
    , m_ownModel(new TimelineModel(this))
    , m_model(m_ownModel)
{
    connect(m_model, &TimelineModel::timelineChanged, this, &TimelineView::modelChanged);
    setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    setFocusPolicy(Qt::StrongFocus);
    viewport()->setMouseTracking(true);
    viewport()->setBackgroundRole(QPalette::Base);
    connect(verticalScrollBar(), &QScrollBar::valueChanged, viewport(), qOverload<>(&QWidget::update));
}

void TimelineView::setTimeline(TimelineData data)
{
    setModel(m_ownModel);
    const bool sameSpan = data.beginNs() == this->data().beginNs() && data.endNs() == this->data().endNs();
    m_selected = -1;
    m_model->setTimeline(std::move(data));
    if (!sameSpan || m_t1 <= m_t0)
        fit();
}

void TimelineView::setModel(TimelineModel* model)
{
    if (model == m_model)
        return;
    disconnect(m_model, nullptr, this, nullptr);
    m_model = model ? model : m_ownModel;
    connect(m_model, &TimelineModel::timelineChanged, this, &TimelineView::modelChanged);
    m_selected = -1;
    m_selection = {};
    fit();
    modelChanged();
}

void TimelineView::modelChanged()
{
    if (m_selected >= 0 && std::size_t(m_selected) >= data().events().size())
        m_selected = -1;
    if (m_following && !data().events().empty()) {
        // The newest three steps (the whole run while it is shorter), ending at the newest event.
        const std::int64_t total = data().endNs() - data().beginNs();
        const std::int32_t steps = data().firstStep() >= 0 ? data().lastStep() - data().firstStep() + 1 : 1;
        const std::int64_t span = steps > 3 ? total / steps * 3 : total;
        if (span >= total)
            fit();
        else
            setWindow(data().endNs() - span - span / 50, data().endNs() + span / 50);
    }
    updateScrollBars();
    viewport()->update();
}

void TimelineView::setOverlay(TimelineData overlay, std::int64_t offsetNs)
{
    m_overlay = std::move(overlay);
    m_overlayOffset = offsetNs;
    viewport()->update();
}

void TimelineView::setSelection(std::int64_t t0, std::int64_t t1)
{
    m_selection = t0 == t1 ? RangeStats {} : rangeStats(data(), t0, t1);
    viewport()->update();
    emit rangeSelected(m_selection);
}

void TimelineView::fit()
{
    const std::int64_t span = std::max<std::int64_t>(data().endNs() - data().beginNs(), 1000);
    setWindow(data().beginNs() - span / 50, data().endNs() + span / 50);
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
    for (const auto& r : data().rows())
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

std::vector<std::size_t> TimelineView::displayOrder() const
{
    // Grouped by pipeline stage (ranks without one last), then by rank, the compute lane above the comm lane.
    const auto& rows = data().rows();
    std::vector<std::size_t> order(rows.size());
    for (std::size_t i = 0; i < order.size(); ++i)
        order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&rows](std::size_t a, std::size_t b) {
        const auto key = [](const TimelineData::Row& r) {
            return std::tuple(r.stage < 0 ? INT32_MAX : r.stage, r.rank, r.stream >= 0 ? 2 + r.stream : int(r.lane));
        };
        return key(rows[a]) < key(rows[b]);
    });
    return order;
}

int TimelineView::rowAtY(int y) const
{
    int top = kRulerHeight - verticalScrollBar()->value();
    const auto& rows = data().rows();
    for (std::size_t i : displayOrder()) {
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
    const auto& r = data().rows()[std::size_t(row)];
    const std::int64_t t = timeAt(pos.x());
    const std::int64_t slack = std::max<std::int64_t>(1, timeAt(pos.x() + 1) - t);
    for (std::int64_t probe : { t, t - slack, t + slack }) {
        const std::int64_t e = data().eventAt(r, probe);
        if (e >= 0)
            return e;
    }
    return -1;
}

QString TimelineView::eventDescription(std::int64_t index) const
{
    if (index < 0 || std::size_t(index) >= data().events().size())
        return {};
    const auto& e = data().event(std::uint32_t(index));
    QString s = QStringLiteral("<b>%1</b> — rank %2")
                    .arg(QString::fromLatin1(trace::toString(e.kind).data()), QString::number(e.rank));
    if (e.stage >= 0)
        s += tr(", stage %1").arg(e.stage);
    if (e.microBatch >= 0)
        s += tr(", micro-batch %1").arg(e.microBatch);
    if (e.chunk > 0)
        s += tr(", chunk %1").arg(e.chunk);
    if (e.step >= 0)
        s += tr(", step %1").arg(e.step);
    s += tr("<br>start %1, duration %2")
             .arg(formatSeconds(double(e.startNs - data().beginNs()) * 1e-9),
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
    for (double m : { 2.0, 5.0, 10.0 })
        if (step < target)
            step = std::pow(10.0, std::floor(std::log10(target))) * m;
    p.setPen(palette().color(QPalette::Text));
    const double origin = double(data().beginNs());
    for (double t = origin + std::ceil((double(m_t0) - origin) / step) * step; t <= double(m_t1); t += step) {
        const double x = xOf(std::int64_t(t));
        p.drawLine(QPointF(x, kRulerHeight - 6), QPointF(x, kRulerHeight));
        // As many decimals as the tick step needs, so neighbouring ticks never read the same.
        const double seconds = (t - origin) * 1e-9;
        const int decimals = std::clamp(int(std::ceil(-std::log10(step * 1e-9))), 0, 9);
        const QString text = std::abs(seconds) >= 1 || decimals <= 3
            ? QLocale().toString(seconds, 'f', decimals) + QStringLiteral(" s")
            : QLocale().toString(seconds * 1e3, 'f', std::max(0, decimals - 3)) + QStringLiteral(" ms");
        p.drawText(QRectF(x + 3, 2, 120, kRulerHeight - 6), Qt::AlignLeft | Qt::AlignVCenter, text);
    }
}

void TimelineView::paintEvent(QPaintEvent*)
{
    QPainter p(viewport());
    const QPalette& pal = palette();
    const int width = viewport()->width();
    std::size_t boxes = 0;
    if (data().events().empty()) {
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
    const auto& rows = data().rows();
    for (std::size_t ri : displayOrder()) {
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
            const double x0 = std::max(double(kLabelWidth), xOf(data().beginNs()));
            const double x1 = std::min(double(width), xOf(data().endNs()));
            if (x1 > x0) {
                p.fillRect(QRectF(x0, top, x1 - x0, h), colors::idle.lighter(108));
                p.fillRect(QRectF(x0, top, x1 - x0, h), hatch);
            }
        }
        const auto [first, last] = data().visible(row, m_t0, m_t1);
        double runStart = -1, runEnd = -1;
        QColor runColor;
        std::size_t runFirst = 0, runLast = 0; // the row positions a run of tiny events covers
        const double left = band.left(), right = band.right();
        const double scale = (right - left) / double(m_t1 - m_t0);
        auto flush = [&] {
            if (runStart < 0)
                return;
            const QRectF box(runStart, top, std::max(1.0, runEnd - runStart), h);
            if (runLast > runFirst) {
                // A folded run shows the mix it hides: bands of each kind's share of the busy time, as tall
                // together as the run is busy (the hatched idle background shows above them).
                const TimelineData::Mix m = data().mix(row, runFirst, runLast + 1);
                double busy = 0;
                for (auto d : m)
                    busy += double(d);
                const double span = std::max(1.0, box.width() / scale);
                double y = box.bottom();
                const double height = h * std::min(1.0, busy / span);
                for (int k = 0; k < TimelineData::kMixKinds && busy > 0; ++k) {
                    const double part = height * double(m[std::size_t(k)]) / busy;
                    if (part <= 0)
                        continue;
                    p.fillRect(QRectF(box.left(), y - part, box.width(), part), mixColor(row.lane, k));
                    y -= part;
                }
            } else {
                p.fillRect(box, runColor);
            }
            ++boxes;
            runStart = -1;
        };
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
                    runLast = i;
                } else {
                    flush();
                    const auto& e = data().event(row.events[i]);
                    runStart = x0;
                    runEnd = x1;
                    runFirst = runLast = i;
                    runColor = eventColor(e.kind, e.group >= 0 ? data().groupKindOf(e) : trace::GroupKind::Other);
                }
                // Skip, by binary search, the later events that start within the run's next two pixels: they
                // can only extend it when all are tiny, or when the running maximum of ends proves none sticks
                // out. One search per two pixels at most, so the cost follows the pixels, not the events.
                if (row.start[i] < nextJump)
                    continue;
                const auto tNext = m_t0 + std::int64_t((runEnd + 2 - left) / scale);
                nextJump = tNext;
                const auto j = std::size_t(std::lower_bound(row.start.begin() + std::ptrdiff_t(i + 1),
                                               row.start.begin() + std::ptrdiff_t(last), tNext)
                    - row.start.begin());
                if (j > i + 1 && (allTiny || row.maxEnd[j - 1] <= tNext)) {
                    runEnd = std::max(runEnd, std::min(right, px(row.maxEnd[j - 1])));
                    i = j - 1;
                    runLast = i;
                }
                continue;
            }
            flush();
            const auto& e = data().event(row.events[i]);
            const QColor c = eventColor(e.kind, e.group >= 0 ? data().groupKindOf(e) : trace::GroupKind::Other);
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
                const auto key = (std::uint64_t(std::uint8_t(e.kind)) << 48)
                    | (std::uint64_t(std::uint32_t(e.chunk)) << 32) | std::uint32_t(e.microBatch);
                auto it = labels.find(key);
                if (it == labels.end()) {
                    QString text = (e.kind == trace::EventKind::Forward           ? QStringLiteral("F")
                                           : e.kind == trace::EventKind::Backward ? QStringLiteral("B")
                                           : e.kind == trace::EventKind::Wait     ? QStringLiteral("wait ")
                                                                                  : QString())
                        + QString::number(e.microBatch);
                    if (e.chunk > 0)
                        text += QStringLiteral(".%1").arg(e.chunk);
                    it = labels.emplace(key, std::pair { text, fm.horizontalAdvance(text) }).first;
                }
                if (it->second.second + 4 <= box.width()) {
                    const bool light = e.kind == trace::EventKind::Optimizer || e.kind == trace::EventKind::Wait;
                    p.setPen(light ? QColor(0x11, 0x11, 0x11) : QColor(Qt::white));
                    p.drawText(box, Qt::AlignCenter, it->second.first);
                }
            }
        }
        flush();
        // The simulated step of the same rank, as outlines along the bottom of its compute lane.
        if (row.lane == trace::Lane::Compute && !m_overlay.events().empty()) {
            const int o = m_overlay.rowIndex(row.rank, trace::Lane::Compute);
            if (o >= 0) {
                const auto& orow = m_overlay.rows()[std::size_t(o)];
                const auto [a, b] = m_overlay.visible(orow, m_t0 - m_overlayOffset, m_t1 - m_overlayOffset);
                p.setBrush(Qt::NoBrush);
                for (std::size_t i = a; i < b; ++i) {
                    const double x0 = std::max(left, px(orow.start[i] + m_overlayOffset));
                    const double x1 = std::min(right, px(orow.end[i] + m_overlayOffset));
                    if (x1 - x0 < 1)
                        continue;
                    const auto& e = m_overlay.event(orow.events[i]);
                    p.setPen(QPen(eventColor(e.kind).darker(150), 1.5, Qt::DashLine));
                    p.drawRect(QRectF(x0, top + h - 6, x1 - x0, 5));
                }
            }
        }
        // The row's label, over a plain background so long timelines never run under it.
        const QRectF labelBox(0, top, kLabelWidth - 4, h);
        p.fillRect(QRectF(0, top, kLabelWidth, h + 2), pal.color(QPalette::Window));
        p.setPen(pal.color(QPalette::Text));
        const QString label = row.stream >= 0 ? tr("rank %1 · stream %2").arg(row.rank).arg(row.stream)
            : row.lane == trace::Lane::Compute
            ? (row.stage >= 0 ? tr("rank %1 · stage %2").arg(row.rank).arg(row.stage) : tr("rank %1").arg(row.rank))
            : tr("comm");
        p.drawText(labelBox.adjusted(6, 0, 0, 0),
            Qt::AlignVCenter | (row.lane == trace::Lane::Compute ? Qt::AlignLeft : Qt::AlignRight), label);
        top += h + 2;
    }
    p.setClipping(false);
    paintRuler(p);
    if (m_selection.t1 > m_selection.t0) {
        const double x0 = std::max(double(kLabelWidth), xOf(m_selection.t0)),
                     x1 = std::min(double(width), xOf(m_selection.t1));
        QColor shade = pal.color(QPalette::Highlight);
        shade.setAlpha(50);
        p.fillRect(QRectF(x0, 0, std::max(1.0, x1 - x0), viewport()->height()), shade);
        const RangeStats& r = m_selection;
        const QString text
            = tr("%1 selected: compute busy %2 %, waiting %3 %, comm busy %4 %, %5 MB moved (%6 GB/s), %7 events")
                  .arg(formatSeconds(double(r.t1 - r.t0) * 1e-9))
                  .arg(QLocale().toString(100 * r.computeBusy, 'f', 1))
                  .arg(QLocale().toString(100 * r.waitFraction, 'f', 1))
                  .arg(QLocale().toString(100 * r.commBusy, 'f', 1))
                  .arg(QLocale().toString(r.bytes / 1e6, 'f', 2))
                  .arg(QLocale().toString(r.gbPerSecond, 'f', 2))
                  .arg(r.events);
        const QRect box(kLabelWidth + 4, kRulerHeight + 4, fm.horizontalAdvance(text) + 12, fm.height() + 6);
        p.fillRect(box, pal.color(QPalette::ToolTipBase));
        p.setPen(pal.color(QPalette::ToolTipText));
        p.drawText(box, Qt::AlignCenter, text);
    }
    m_lastBoxes = boxes;
}

void TimelineView::wheelEvent(QWheelEvent* event)
{
    if (event->modifiers() & Qt::ShiftModifier) {
        QAbstractScrollArea::wheelEvent(event); // scroll the rows
        return;
    }
    m_following = false;
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
    // A drag that starts on the ruler selects a time range; elsewhere it pans.
    m_selectingRange = event->pos().y() < kRulerHeight && event->pos().x() >= kLabelWidth;
}

void TimelineView::mouseMoveEvent(QMouseEvent* event)
{
    if (!(event->buttons() & Qt::LeftButton))
        return;
    const int dx = event->pos().x() - m_dragFrom.x();
    if (!m_dragging && std::abs(dx) < 4)
        return;
    m_dragging = true;
    if (m_selectingRange) {
        setSelection(timeAt(m_dragFrom.x()), timeAt(event->pos().x()));
        return;
    }
    m_following = false;
    const double nsPerPixel = double(m_t1 - m_t0) / std::max(1, viewport()->width() - kLabelWidth);
    const std::int64_t span = m_t1 - m_t0;
    const auto t0 = m_dragT0 - std::int64_t(dx * nsPerPixel);
    setWindow(t0, t0 + span);
}

void TimelineView::mouseReleaseEvent(QMouseEvent* event)
{
    if (event->button() != Qt::LeftButton || m_dragging) {
        m_dragging = false;
        m_selectingRange = false;
        return;
    }
    if (m_selectingRange) { // a click on the ruler clears the range
        m_selectingRange = false;
        setSelection(0, 0);
        return;
    }
    m_selected = eventAt(event->pos());
    viewport()->update();
    emit eventSelected(m_selected);
}

void TimelineView::keyPressEvent(QKeyEvent* event)
{
    const int mouseX = viewport()->mapFromGlobal(QCursor::pos()).x();
    const int x
        = mouseX >= kLabelWidth && mouseX < viewport()->width() ? mouseX : (kLabelWidth + viewport()->width()) / 2;
    if (event->key() == Qt::Key_W || event->key() == Qt::Key_S || event->key() == Qt::Key_A
        || event->key() == Qt::Key_D)
        m_following = false;
    switch (event->key()) {
    case Qt::Key_W:
        zoomAt(1.25, x);
        return;
    case Qt::Key_S:
        zoomAt(0.8, x);
        return;
    case Qt::Key_A:
        panBy(-0.2);
        return;
    case Qt::Key_D:
        panBy(0.2);
        return;
    case Qt::Key_F:
        if (m_selection.t1 > m_selection.t0) {
            setWindow(m_selection.t0, m_selection.t1);
        } else if (m_selected >= 0) {
            const auto& e = data().event(std::uint32_t(m_selected));
            const std::int64_t pad = std::max<std::int64_t>(e.durationNs() / 4, 100);
            setWindow(e.startNs - pad, e.endNs + pad);
        } else {
            fit();
        }
        return;
    default:
        QAbstractScrollArea::keyPressEvent(event);
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
