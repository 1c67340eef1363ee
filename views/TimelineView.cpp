#include "views/TimelineView.h"

#include "views/Explain.h"

#include <QLocale>
#include <QScrollBar>

#include <map>
#include <tuple>

namespace loom::views {

TimelineView::TimelineView(QWidget* parent)
    : QAbstractScrollArea(parent)
    , m_ownModel(new TimelineModel(this))
    , m_model(m_ownModel)
{
    connect(m_model, &TimelineModel::timelineChanged, this, &TimelineView::modelChanged);
    connect(m_model, &QAbstractItemModel::modelReset, this, &TimelineView::modelReset);
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
    m_members.clear();
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
    connect(m_model, &QAbstractItemModel::modelReset, this, &TimelineView::modelReset);
    m_selected = -1;
    m_members.clear();
    m_selection = {};
    m_area = {};
    modelReset();
    fit();
    modelChanged();
}

void TimelineView::modelReset()
{
    // The events may have been replaced, not only extended: every cache starts again.
    m_steps.clear();
    m_stepsCounted = 0;
}

void TimelineView::modelChanged()
{
    if (m_selected >= 0 && std::size_t(m_selected) >= data().events().size()) {
        m_selected = -1;
        m_members.clear();
    }
    invalidateLayout();
    m_flowsDirty = m_summariesDirty = true;
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

const std::vector<trace::StepRange>& TimelineView::steps() const
{
    // Live runs only add events: fold the new ones into the ranges instead of starting over.
    const auto& events = data().events();
    if (m_stepsCounted > events.size()) {
        m_steps.clear();
        m_stepsCounted = 0;
    }
    if (m_stepsCounted < events.size()) {
        const std::vector<trace::TraceEvent> more(events.begin() + std::ptrdiff_t(m_stepsCounted), events.end());
        auto ranges = trace::stepRanges(more);
        for (const auto& r : m_steps)
            ranges.push_back(r);
        std::map<std::int32_t, trace::StepRange> merged;
        for (const auto& r : ranges) {
            auto [it, fresh] = merged.try_emplace(r.step, r);
            if (!fresh) {
                it->second.startNs = std::min(it->second.startNs, r.startNs);
                it->second.endNs = std::max(it->second.endNs, r.endNs);
            }
        }
        m_steps.clear();
        for (const auto& [step, r] : merged)
            m_steps.push_back(r);
        m_stepsCounted = events.size();
    }
    return m_steps;
}

std::vector<trace::StepRange> TimelineView::stepsInView() const
{
    return trace::stepsIn(steps(), m_t0, m_t1);
}

void TimelineView::setOverlay(TimelineData overlay, std::int64_t offsetNs, double scale)
{
    m_overlay = std::move(overlay);
    m_overlayOffset = offsetNs;
    m_overlayScale = scale > 0 ? scale : 1.0;
    viewport()->update();
}

void TimelineView::setSelection(std::int64_t t0, std::int64_t t1)
{
    m_selection = t0 == t1 ? RangeStats {} : rangeStats(data(), t0, t1);
    if (t0 == t1)
        m_area = {};
    else
        setArea(t0, t1, {});
    viewport()->update();
    emit rangeSelected(m_selection);
}

void TimelineView::setArea(std::int64_t t0, std::int64_t t1, std::vector<std::pair<std::int32_t, trace::Lane>> lanes)
{
    m_areaLanes = lanes;
    m_area = trace::aggregateArea(data().events(), data().groups(), { t0, t1, std::move(lanes) });
    viewport()->update();
    emit areaSelected();
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
    if (t0 == m_t0 && t1 == m_t1)
        return;
    m_t0 = t0;
    m_t1 = t1;
    viewport()->update();
    emit windowChanged();
}

void TimelineView::pushHistory()
{
    if (m_back.empty() || m_back.back() != window())
        m_back.push_back(window());
    m_forward.clear(); // navigating after going back drops the views ahead, as a browser does
}

bool TimelineView::goBack()
{
    if (m_back.empty())
        return false;
    m_forward.push_back(window());
    m_following = false;
    const auto w = m_back.back();
    m_back.pop_back();
    setWindow(w.first, w.second);
    return true;
}

bool TimelineView::goForward()
{
    if (m_forward.empty())
        return false;
    m_back.push_back(window());
    const auto w = m_forward.back();
    m_forward.pop_back();
    setWindow(w.first, w.second);
    return true;
}

double TimelineView::xOf(std::int64_t t) const
{
    const double w = std::max(1, viewport()->width() - labelWidth());
    return labelWidth() + double(t - m_t0) / double(m_t1 - m_t0) * w;
}

std::int64_t TimelineView::timeAt(double x) const
{
    const double w = std::max(1, viewport()->width() - labelWidth());
    return m_t0 + std::int64_t((x - labelWidth()) / w * double(m_t1 - m_t0));
}

void TimelineView::zoomAt(double factor, int x)
{
    const std::int64_t anchor = timeAt(std::max(x, labelWidth()));
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

void TimelineView::selectEvent(std::int64_t index, bool reveal)
{
    m_selected = index >= 0 && std::size_t(index) < data().events().size() ? index : -1;
    m_members = m_selected >= 0 ? trace::collectiveMembers(data().events(), std::uint32_t(m_selected))
                                : std::vector<std::uint32_t> {};
    if (reveal && m_selected >= 0) {
        const auto& e = data().event(std::uint32_t(m_selected));
        pushHistory();
        m_following = false;
        const std::int64_t span = m_t1 - m_t0;
        if (e.durationNs() > span)
            setWindow(e.startNs - e.durationNs() / 4, e.endNs + e.durationNs() / 4);
        else if (e.startNs < m_t0 || e.endNs > m_t1)
            setWindow((e.startNs + e.endNs) / 2 - span / 2, (e.startNs + e.endNs) / 2 + span / 2);
        const int row = data().rowIndex(e.rank, e.lane);
        const int g = groupOfRow(row);
        if (g >= 0 && collapsed(g))
            setCollapsed(g, false);
        const QRect r = rowRect(row);
        if (!r.isEmpty() && (r.top() < kRulerHeight + pinnedHeight() || r.bottom() > viewport()->height()))
            verticalScrollBar()->setValue(verticalScrollBar()->value() + r.top() - kRulerHeight - pinnedHeight()
                - (viewport()->height() - kRulerHeight - pinnedHeight()) / 3);
    }
    viewport()->update();
    emit eventSelected(m_selected);
}

void TimelineView::updateScrollBars()
{
    const int visible = viewport()->height() - kRulerHeight - pinnedHeight();
    verticalScrollBar()->setRange(0, std::max(0, contentHeight() - visible));
    verticalScrollBar()->setPageStep(std::max(1, visible));
    verticalScrollBar()->setSingleStep(kComputeRow);
}

void TimelineView::resizeEvent(QResizeEvent* event)
{
    QAbstractScrollArea::resizeEvent(event);
    updateScrollBars();
}

std::int64_t TimelineView::eventAt(const QPoint& pos) const
{
    const Track* t = trackAtY(pos.y());
    if (!t || t->row < 0 || pos.x() < labelWidth())
        return -1;
    // Accept a hit within a pixel either side, so very short events can be picked.
    const auto& r = data().rows()[std::size_t(t->row)];
    const std::int64_t time = timeAt(pos.x());
    const std::int64_t slack = std::max<std::int64_t>(1, timeAt(pos.x() + 1) - time);
    for (std::int64_t probe : { time, time - slack, time + slack }) {
        const std::int64_t e = data().eventAt(r, probe);
        if (e < 0)
            continue;
        const auto& ev = data().event(std::uint32_t(e));
        if (!kindHidden(legendKindOf(ev.kind, ev.group >= 0 ? data().groupKindOf(ev) : trace::GroupKind::Other)))
            return e;
    }
    return -1;
}

QString TimelineView::eventDescription(std::int64_t index) const
{
    if (index < 0 || std::size_t(index) >= data().events().size())
        return {};
    const auto& e = data().event(std::uint32_t(index));
    const auto groupKind = e.group >= 0 ? data().groupKindOf(e) : trace::GroupKind::Other;
    QString s = QStringLiteral("<b>%1</b> — rank %2")
                    .arg(QString::fromStdString(trace::kindLabel(e.kind, groupKind)), QString::number(e.rank));
    if (e.stream >= 0)
        s += tr(", stream %1").arg(e.stream);
    if (e.stage >= 0) {
        // Events carry the virtual stage; the row is the rank's pipeline (physical) stage. With interleaving
        // name both, so that "rank 0 · stage 0" is not contradicted by a bare "stage 16".
        const int row = data().rowOf(e);
        const std::int32_t physical = row >= 0 ? data().rows()[std::size_t(row)].stage : -1;
        if (physical >= 0 && physical != e.stage)
            s += tr(", stage %1 (virtual stage %2)").arg(physical).arg(e.stage);
        else
            s += tr(", stage %1").arg(e.stage);
    }
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
        if (e.durationNs() > 0) {
            const double algbw = double(e.bytes) / double(e.durationNs());
            s += tr(", %1 GB/s").arg(QLocale().toString(algbw, 'f', 2));
            if (trace::laneOf(e.kind) == trace::Lane::Comm && e.kind != trace::EventKind::Send
                && e.kind != trace::EventKind::Recv)
                s += tr(" algbw, %1 GB/s busbw")
                         .arg(QLocale().toString(algbw * trace::busBandwidthFactor(e.kind, e.groupSize), 'f', 2));
        }
    }
    if (e.peer >= 0)
        s += tr("<br>peer rank %1").arg(e.peer);
    if (e.group >= 0) {
        QString name = tr("group %1").arg(e.group);
        for (const auto& g : data().groups())
            if (g.id == e.group && !g.name.empty())
                name = QString::fromStdString(g.name).toHtmlEscaped();
        s += tr("<br>%1").arg(name) + (e.groupSize > 0 ? tr(" (%1 ranks)").arg(e.groupSize) : QString());
    }
    if (!e.codec.empty())
        s += tr("<br>codec %1").arg(QString::fromStdString(e.codec).toHtmlEscaped());
    s += launchDescription(index);
    s += e.source == trace::EventSource::Simulated ? tr("<br><i>simulated</i>") : tr("<br><i>measured</i>");
    return s;
}

} // namespace loom::views
