// TimelineView's drawing: lanes (folded into pixel runs), group headers, the ruler and its step row, the
// highlighted collective, the overlay and the selections (flow arrows: TimelineViewFlows.cpp).
#include "views/Colors.h"
#include "views/Explain.h"
#include "views/TimelineView.h"
#include "views/Units.h"

#include <QLocale>
#include <QPainter>
#include <QPainterPath>
#include <QScrollBar>

#include <cmath>
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

// Whether every legend kind drawn in mix band `k` of a lane is hidden: then the band is left out of folded
// runs too.
bool mixHidden(std::uint32_t hidden, trace::Lane lane, int k)
{
    const auto all = [hidden](std::initializer_list<LegendKind> kinds) {
        for (LegendKind l : kinds)
            if (!((hidden >> int(l)) & 1u))
                return false;
        return true;
    };
    if (hidden == 0)
        return false;
    if (lane == trace::Lane::Compute)
        return k == 0 ? all({ LegendKind::Forward, LegendKind::Recompute })
            : k == 1  ? all({ LegendKind::Backward, LegendKind::Weight })
            : k == 2  ? all({ LegendKind::Optimizer })
                      : all({ LegendKind::Wait, LegendKind::Other, LegendKind::Launch });
    return k == 0 ? all({ LegendKind::TensorComm })
        : k == 1  ? all({ LegendKind::PipelineComm, LegendKind::ContextComm })
        : k == 2  ? all({ LegendKind::DataComm, LegendKind::AllToAll })
                  : all({ LegendKind::Other });
}

QString percent(double f)
{
    return QLocale().toString(100 * f, 'f', 0);
}
} // namespace

void TimelineView::paintRuler(QPainter& p)
{
    const QRect ruler(0, 0, viewport()->width(), kRulerHeight);
    p.fillRect(ruler, palette().color(QPalette::Window));
    p.setPen(palette().color(QPalette::Mid));
    p.drawLine(ruler.bottomLeft(), ruler.bottomRight());
    p.drawLine(QPoint(labelWidth(), kTickBand), QPoint(ruler.right(), kTickBand));
    const double span = double(m_t1 - m_t0);
    const double target = span / std::max(1.0, double(viewport()->width() - labelWidth()) / 110.0);
    double step = std::pow(10.0, std::floor(std::log10(target)));
    for (double m : { 2.0, 5.0, 10.0 })
        if (step < target)
            step = std::pow(10.0, std::floor(std::log10(target))) * m;
    p.setPen(palette().color(QPalette::Text));
    const double origin = double(data().beginNs());
    for (double t = origin + std::ceil((double(m_t0) - origin) / step) * step; t <= double(m_t1); t += step) {
        const double x = xOf(std::int64_t(t));
        p.drawLine(QPointF(x, kTickBand - 6), QPointF(x, kTickBand));
        // As many decimals as the tick step needs, so neighbouring ticks never read the same.
        const double seconds = (t - origin) * 1e-9;
        const int decimals = std::clamp(int(std::ceil(-std::log10(step * 1e-9))), 0, 9);
        const QString text = std::abs(seconds) >= 1 || decimals <= 3
            ? QLocale().toString(seconds, 'f', decimals) + QStringLiteral(" s")
            : QLocale().toString(seconds * 1e3, 'f', std::max(0, decimals - 3)) + QStringLiteral(" ms");
        p.drawText(QRectF(x + 3, 1, 120, kTickBand - 4), Qt::AlignLeft | Qt::AlignVCenter, text);
    }
    // The step row: each step's extent, alternately shaded, with its number where it fits.
    p.drawText(QRect(6, kTickBand, labelWidth() - 8, kRulerHeight - kTickBand), Qt::AlignVCenter, tr("steps"));
    const QColor shades[] = { palette().color(QPalette::AlternateBase), palette().color(QPalette::Base) };
    const QFontMetrics fm(p.font());
    double lastBoundary = -10;
    for (const auto& s : stepsInView()) {
        const double x0 = std::max(double(labelWidth()), xOf(s.startNs)),
                     x1 = std::min(double(viewport()->width()), xOf(s.endNs));
        if (x1 - x0 < 3) {
            // Steps a few pixels wide: their boundaries only, one a pixel run at most.
            if (x0 - lastBoundary >= 3) {
                p.setPen(palette().color(QPalette::Mid));
                p.drawLine(QPointF(x0, kTickBand + 2), QPointF(x0, kRulerHeight - 2));
                lastBoundary = x0;
            }
            continue;
        }
        lastBoundary = x0;
        const QRectF box(x0, kTickBand + 2, x1 - x0, kRulerHeight - kTickBand - 4);
        p.fillRect(box, shades[s.step % 2].darker(106));
        p.setPen(palette().color(QPalette::Mid));
        p.drawLine(QPointF(x0, kTickBand), QPointF(x0, kRulerHeight));
        if (box.width() < 12)
            continue; // no room for a number
        const QString label = tr("step %1").arg(s.step);
        if (fm.horizontalAdvance(label) + 6 <= box.width()) {
            p.setPen(palette().color(QPalette::Text));
            p.drawText(box.adjusted(3, 0, 0, 0), Qt::AlignLeft | Qt::AlignVCenter, label);
        } else if (fm.horizontalAdvance(QString::number(s.step)) + 2 <= box.width()) {
            p.setPen(palette().color(QPalette::Text));
            p.drawText(box, Qt::AlignCenter, QString::number(s.step));
        }
    }
}

void TimelineView::paintLane(QPainter& p, const TimelineData::Row& row, int top, int h, std::size_t& boxes)
{
    const int width = viewport()->width();
    const QPalette& pal = palette();
    const QFontMetrics fm(p.font());
    const int digitWidth = fm.horizontalAdvance(QLatin1Char('0'));
    if (row.lane == trace::Lane::Compute) {
        // Idle time is what is left visible between events: the pipeline bubble and waits.
        const double x0 = std::max(double(labelWidth()), xOf(data().beginNs()));
        const double x1 = std::min(double(width), xOf(data().endNs()));
        if (x1 > x0) {
            p.fillRect(QRectF(x0, top, x1 - x0, h), colors::idle.lighter(108));
            p.fillRect(QRectF(x0, top, x1 - x0, h), QBrush(colors::misc, Qt::BDiagPattern));
        }
    }
    const double left = labelWidth(), right = width;
    const double scale = (right - left) / double(m_t1 - m_t0);
    TimelineData::Hidden hidden;
    if (m_hidden)
        hidden = [this](const trace::TraceEvent& e) {
            return kindHidden(legendKindOf(e.kind, e.group >= 0 ? data().groupKindOf(e) : trace::GroupKind::Other));
        };
    data().fold(row, m_t0, m_t1, left, right, hidden, m_boxes);
    std::unordered_map<std::uint64_t, std::pair<QString, int>> labels;
    for (const TimelineData::Box& b : m_boxes) {
        ++boxes;
        if (b.folded()) {
            paintMix(p, row, b, top, h, scale);
            continue;
        }
        const auto& e = data().event(row.events[b.first]);
        const QColor c = eventColor(e.kind, e.group >= 0 ? data().groupKindOf(e) : trace::GroupKind::Other);
        if (b.run) { // a lone tiny event: a pixel-wide box of its colour
            p.fillRect(QRectF(b.x0, top, std::max(1.0, b.x1 - b.x0), h), c);
            continue;
        }
        const QRectF box(b.x0, top, b.x1 - b.x0, h);
        p.fillRect(box, c);
        if (std::int64_t(row.events[b.first]) == m_selected) {
            p.setPen(QPen(pal.color(QPalette::Highlight), 2));
            p.drawRect(box.adjusted(1, 1, -1, -1));
        } else if (box.width() > 8) {
            p.setPen(QPen(c.darker(140), 0));
            p.drawLine(box.topRight(), box.bottomRight());
        }
        if (e.microBatch >= 0 && box.width() > 3 * digitWidth && row.lane == trace::Lane::Compute)
            paintPassLabel(p, e, box, fm, labels);
    }
}

void TimelineView::paintMix(
    QPainter& p, const TimelineData::Row& row, const TimelineData::Box& b, int top, int h, double scale)
{
    // A folded run shows the mix it hides: bands of each kind's share of the busy time, as tall together as
    // the run is busy (the hatched idle background shows above them).
    const QRectF box(b.x0, top, std::max(1.0, b.x1 - b.x0), h);
    const TimelineData::Mix m = data().mix(row, b.first, b.last + 1);
    double busy = 0;
    for (auto d : m)
        busy += double(d);
    const double span = std::max(1.0, box.width() / scale);
    double y = box.bottom();
    const double height = h * std::min(1.0, busy / span);
    for (int k = 0; k < TimelineData::kMixKinds && busy > 0; ++k) {
        const double part = height * double(m[std::size_t(k)]) / busy;
        if (part <= 0 || mixHidden(m_hidden, row.lane, k))
            continue;
        p.fillRect(QRectF(box.left(), y - part, box.width(), part), mixColor(row.lane, k));
        y -= part;
    }
}

void TimelineView::paintPassLabel(QPainter& p, const trace::TraceEvent& e, const QRectF& box, const QFontMetrics& fm,
    std::unordered_map<std::uint64_t, std::pair<QString, int>>& labels)
{
    // Labels are cached per lane: thousands of boxes share a few dozen texts.
    const auto key = (std::uint64_t(std::uint8_t(e.kind)) << 48) | (std::uint64_t(std::uint32_t(e.chunk)) << 32)
        | std::uint32_t(e.microBatch);
    auto it = labels.find(key);
    if (it == labels.end()) {
        QString text = (e.kind == trace::EventKind::Forward           ? QStringLiteral("F")
                               : e.kind == trace::EventKind::Backward ? QStringLiteral("B")
                               : e.kind == trace::EventKind::Weight   ? QStringLiteral("W")
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

void TimelineView::paintOverlay(QPainter& p, const TimelineData::Row& row, int top, int h)
{
    // The simulated step of the same rank, as dashed outlines over the lower half of its compute lane, its
    // times mapped onto the measured step (aligned on the start, scaled by the overlay's scale).
    const int o = m_overlay.rowIndex(row.rank, trace::Lane::Compute);
    if (o < 0)
        return;
    const auto& orow = m_overlay.rows()[std::size_t(o)];
    const auto map = [this](std::int64_t t) {
        return m_overlayOffset + std::int64_t(double(t - m_overlay.beginNs()) * m_overlayScale);
    };
    const auto unmap = [this](std::int64_t t) {
        return m_overlay.beginNs() + std::int64_t(double(t - m_overlayOffset) / m_overlayScale);
    };
    const auto [a, b] = m_overlay.visible(orow, unmap(m_t0), unmap(m_t1));
    p.setBrush(Qt::NoBrush);
    const double left = labelWidth(), right = viewport()->width();
    for (std::size_t i = a; i < b; ++i) {
        const double x0 = std::max(left, xOf(map(orow.start[i])));
        const double x1 = std::min(right, xOf(map(orow.end[i])));
        if (x1 - x0 < 1)
            continue;
        const auto& e = m_overlay.event(orow.events[i]);
        QColor fill = eventColor(e.kind);
        fill.setAlpha(70);
        p.fillRect(QRectF(x0, top + h / 2.0, x1 - x0, h / 2.0 - 1), fill);
        p.setPen(QPen(eventColor(e.kind).darker(150), 1.5, Qt::DashLine));
        p.drawRect(QRectF(x0, top + h / 2.0, x1 - x0, h / 2.0 - 1));
    }
}

void TimelineView::paintHeader(QPainter& p, const Track& t)
{
    const QPalette& pal = palette();
    const int top = trackY(t);
    const bool shut = collapsed(t.group);
    p.fillRect(QRect(0, top, viewport()->width(), t.height), pal.color(QPalette::AlternateBase));
    // Collapsed: the group's first lane stands for it beside its figures.
    if (shut && t.row >= 0) {
        std::size_t boxes = 0;
        paintLane(p, data().rows()[std::size_t(t.row)], top + 1, t.height - 2, boxes);
        m_lastBoxes += boxes;
    }
    const trace::TrackSummary s = groupSummary(t.group);
    p.fillRect(QRect(0, top, labelWidth(), t.height), pal.color(QPalette::AlternateBase));
    p.setPen(pal.color(QPalette::Mid));
    p.drawLine(0, top + t.height - 1, viewport()->width(), top + t.height - 1);
    p.setPen(pal.color(QPalette::Text));
    const QString text = tr("%1 %2 (%3) busy %4 · bubble %5 · comm %6 %")
                             .arg(shut ? QStringLiteral("▸") : QStringLiteral("▾"), groupName(t.group))
                             .arg(s.members)
                             .arg(percent(s.busy), percent(s.bubble), percent(s.comm));
    p.drawText(QRect(4, top, labelWidth() - 6, t.height), Qt::AlignLeft | Qt::AlignVCenter, text);
}

void TimelineView::paintLabel(QPainter& p, const Track& t)
{
    const QPalette& pal = palette();
    const auto& row = data().rows()[std::size_t(t.row)];
    const int top = trackY(t);
    const QRectF labelBox(0, top, labelWidth() - 4, t.height);
    p.fillRect(QRectF(0, top, labelWidth(), t.height + 2), pal.color(QPalette::Window));
    p.setPen(pal.color(QPalette::Text));
    QString label = row.stream >= 0 ? tr("rank %1 · stream %2").arg(row.rank).arg(row.stream)
        : row.lane == trace::Lane::Compute
        ? (row.stage >= 0 ? tr("%1 · stage %2").arg(rankName(row.rank)).arg(row.stage) : rankName(row.rank))
        : tr("comm");
    if (t.pin)
        label = QStringLiteral("📌 ") + (row.lane == trace::Lane::Compute ? label : tr("rank %1 comm").arg(row.rank));
    p.drawText(labelBox.adjusted(m_grouping == Grouping::None ? 6 : 14, 0, 0, 0),
        Qt::AlignVCenter | (row.lane == trace::Lane::Compute || t.pin ? Qt::AlignLeft : Qt::AlignRight), label);
}

void TimelineView::paintSelectionInfo(QPainter& p)
{
    const QPalette& pal = palette();
    const QFontMetrics fm(p.font());
    // The members of the selected collective: outlined on every rank.
    if (m_members.size() > 1) {
        p.setPen(QPen(pal.color(QPalette::Highlight), 2));
        p.setBrush(Qt::NoBrush);
        for (std::uint32_t i : m_members) {
            const auto& e = data().event(i);
            const QRect r = rowRect(data().rowOf(e));
            if (r.isEmpty())
                continue;
            const double x0 = xOf(e.startNs), x1 = std::max(xOf(e.endNs), x0 + 3);
            p.drawRect(QRectF(x0, r.top(), x1 - x0, r.height()).adjusted(-1, -1, 1, 1));
        }
    }
    if (m_selectingArea && m_dragging) {
        QColor shade = pal.color(QPalette::Highlight);
        shade.setAlpha(40);
        const QRect r = QRect(m_dragFrom, m_dragTo).normalized();
        p.fillRect(r, shade);
        p.setPen(QPen(pal.color(QPalette::Highlight), 1, Qt::DashLine));
        p.drawRect(r);
    }
    if (m_area.t1 > m_area.t0 && !m_areaLanes.empty()) {
        // The selected area: its lanes shaded over its time range.
        QColor shade = pal.color(QPalette::Highlight);
        shade.setAlpha(45);
        const double x0 = std::max(double(labelWidth()), xOf(m_area.t0)),
                     x1 = std::min(double(viewport()->width()), xOf(m_area.t1));
        for (const auto& [rank, lane] : m_areaLanes) {
            const QRect r = rowRect(data().rowIndex(rank, lane));
            if (!r.isEmpty() && x1 > x0)
                p.fillRect(QRectF(x0, r.top() - 1, x1 - x0, r.height() + 2), shade);
        }
    }
    if (m_selection.t1 <= m_selection.t0)
        return;
    const double x0 = std::max(double(labelWidth()), xOf(m_selection.t0)),
                 x1 = std::min(double(viewport()->width()), xOf(m_selection.t1));
    QColor shade = pal.color(QPalette::Highlight);
    shade.setAlpha(50);
    p.fillRect(QRectF(x0, 0, std::max(1.0, x1 - x0), viewport()->height()), shade);
    const RangeStats& r = m_selection;
    const QString text
        = tr("%1 selected: compute busy %2 %, waiting %3 %, comm busy %4 %, %5 moved (%6 while communicating), "
             "%7 events")
              .arg(formatSeconds(double(r.t1 - r.t0) * 1e-9))
              .arg(QLocale().toString(100 * r.computeBusy, 'f', 1))
              .arg(QLocale().toString(100 * r.waitFraction, 'f', 1))
              .arg(QLocale().toString(100 * r.commBusy, 'f', 1))
              .arg(memoryText(r.bytes))
              .arg(rateText(r.gbPerSecond * 1e9))
              .arg(r.events);
    const QRect box(labelWidth() + 4, kRulerHeight + 4, fm.horizontalAdvance(text) + 12, fm.height() + 6);
    p.fillRect(box, pal.color(QPalette::ToolTipBase));
    p.setPen(pal.color(QPalette::ToolTipText));
    p.drawText(box, Qt::AlignCenter, text);
}

void TimelineView::paintEvent(QPaintEvent*)
{
    QPainter p(viewport());
    const QPalette& pal = palette();
    const int width = viewport()->width(), height = viewport()->height();
    m_lastBoxes = 0;
    if (data().events().empty()) {
        p.setPen(pal.color(QPalette::PlaceholderText));
        p.drawText(viewport()->rect(), Qt::AlignCenter, tr("No events to show yet."));
        m_lastFlows = 0;
        return;
    }
    QFont small = font();
    small.setPointSizeF(std::max(7.0, small.pointSizeF() - 1.5));
    p.setFont(small);
    const int pinned = pinnedHeight();
    std::size_t boxes = 0;
    // The scrolled tracks under the pinned band, then the pinned ones over it.
    for (bool pinPass : { false, true }) {
        p.setClipRect(pinPass ? QRect(0, kRulerHeight, width, pinned)
                              : QRect(0, kRulerHeight + pinned, width, height - kRulerHeight - pinned));
        for (const Track& t : tracks()) {
            if (t.pin != pinPass)
                continue;
            const int top = trackY(t);
            if (top > height)
                break;
            if (top + t.height < kRulerHeight + (pinPass ? 0 : pinned))
                continue;
            if (t.header) {
                paintHeader(p, t);
                continue;
            }
            const auto& row = data().rows()[std::size_t(t.row)];
            paintLane(p, row, top, t.height, boxes);
            if (row.lane == trace::Lane::Compute && !m_overlay.events().empty())
                paintOverlay(p, row, top, t.height);
            // The row's label, over a plain background so long timelines never run under it.
            paintLabel(p, t);
        }
    }
    if (pinned > 0) {
        p.setClipping(false);
        p.setPen(QPen(pal.color(QPalette::Mid), 2));
        p.drawLine(0, kRulerHeight + pinned - 1, width, kRulerHeight + pinned - 1);
    }
    p.setClipRect(labelWidth(), kRulerHeight, width - labelWidth(), height - kRulerHeight);
    paintFlows(p);
    p.setClipping(false);
    paintRuler(p);
    paintSelectionInfo(p);
    m_lastBoxes += boxes;
}

} // namespace loom::views
