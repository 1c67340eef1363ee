// TimelineView's flow arrows: from each pipeline send to its receive (or the work it feeds), and in imported GPU
// traces from each launch on the host row to its kernel on a device-stream row; the flows come from engine/trace.
#include "views/Explain.h"
#include "views/TimelineView.h"

#include <QPainter>

#include <cmath>

namespace loom::views {

const std::vector<trace::Flow>& TimelineView::flowList() const
{
    if (m_flowsDirty) {
        m_flows = trace::allFlows(data().events()); // once per change of the events, not per paint
        m_flowsDirty = false;
        m_maxFlowSpan = 0;
        for (const auto& f : m_flows)
            m_maxFlowSpan = std::max(m_maxFlowSpan, data().event(f.to).endNs - data().event(f.from).startNs);
    }
    return m_flows;
}

void TimelineView::paintFlows(QPainter& p)
{
    m_lastFlows = 0;
    if (m_flowMode != Flows::All && m_selected < 0)
        return;
    const auto& flows = flowList();
    if (flows.empty())
        return;
    // Flows are ordered by their origin's start: those in view are found from the window's start, less the
    // longest flow, so a paint walks only the flows near the window.
    constexpr std::size_t kMaxFlows = 6000; // more arrows than this read as noise: zoom in to see them
    std::vector<const trace::Flow*> drawn;
    const auto& ev = data().events();
    if (m_flowMode == Flows::All) {
        const std::int64_t slack = m_maxFlowSpan; // a flow ending in view started at most this long before
        const auto first = std::lower_bound(flows.begin(), flows.end(), m_t0 - slack,
            [&ev](const trace::Flow& f, std::int64_t t) { return ev[f.from].startNs < t; });
        for (auto it = first; it != flows.end() && ev[it->from].startNs <= m_t1; ++it) {
            if (ev[it->to].endNs < m_t0 && ev[it->from].endNs < m_t0)
                continue;
            drawn.push_back(&*it);
            if (drawn.size() > kMaxFlows)
                break;
        }
        if (drawn.size() > kMaxFlows)
            drawn.clear();
    }
    if (drawn.empty() && m_selected >= 0)
        for (const auto& f : flows)
            if (std::int64_t(f.from) == m_selected || std::int64_t(f.to) == m_selected)
                drawn.push_back(&f);
    if (drawn.empty())
        return;
    // Every row's centre once, then all arrows as two batches of lines (plain and selected): one draw call
    // each, so thousands of arrows cost little more than their pixels.
    tracks();
    std::vector<int> centre(data().rows().size(), -1);
    for (std::size_t r = 0; r < centre.size(); ++r)
        if (m_rowTrack[r] >= 0) {
            const Track& t = m_tracks[std::size_t(m_rowTrack[r])];
            centre[r] = trackY(t) + t.height / 2;
        }
    const auto yOf = [&](const trace::TraceEvent& e) {
        const int row = data().rowOf(e); // a device stream's own row for a kernel
        return row < 0 ? -1 : centre[std::size_t(row)];
    };
    const auto hiddenEvent = [this](const trace::TraceEvent& e) {
        return kindHidden(legendKindOf(e.kind, e.group >= 0 ? data().groupKindOf(e) : trace::GroupKind::Other));
    };
    QVector<QLineF> plain, chosen;
    plain.reserve(qsizetype(drawn.size() * 3));
    for (const trace::Flow* f : drawn) {
        const auto& from = data().event(f->from);
        const auto& to = data().event(f->to);
        const int y0 = yOf(from), y1 = yOf(to);
        if (y0 < 0 || y1 < 0 || (m_hidden && (hiddenEvent(from) || hiddenEvent(to))))
            continue; // an end not drawn (collapsed away, or its kind hidden by the legend)
        // From where the data leaves (the send's start) to where it has arrived (the receive's end, or the
        // start of the work it feeds); a launch's arrow spans its launch delay, from the call's return to the
        // start of its device work.
        const bool launch = from.kind == trace::EventKind::Launch;
        const QPointF a(xOf(launch ? from.endNs : from.startNs), y0);
        const QPointF b(xOf(to.kind == trace::EventKind::Recv ? to.endNs : to.startNs), y1);
        if (std::max(a.x(), b.x()) < labelWidth() || std::min(a.x(), b.x()) > viewport()->width())
            continue; // wholly outside the window
        auto& lines = std::int64_t(f->from) == m_selected || std::int64_t(f->to) == m_selected ? chosen : plain;
        lines.append(QLineF(a, b));
        const double angle = std::atan2(b.y() - a.y(), b.x() - a.x());
        for (double side : { -0.45, 0.45 })
            lines.append(QLineF(b, b - QPointF(7 * std::cos(angle + side), 7 * std::sin(angle + side))));
        ++m_lastFlows;
    }
    p.setRenderHint(QPainter::Antialiasing, m_lastFlows <= 200); // smooth lines only while they are few
    p.setPen(QPen(palette().color(QPalette::Text), 1));
    p.drawLines(plain);
    p.setPen(QPen(palette().color(QPalette::Highlight), 2));
    p.drawLines(chosen);
    p.setRenderHint(QPainter::Antialiasing, false);
}

QString TimelineView::launchDescription(std::int64_t index) const
{
    // A launch: the device work it queued and its launch delay; device work: the call that launched it.
    QString s;
    const auto& e = data().event(std::uint32_t(index));
    if (e.correlation < 0)
        return s;
    int kernels = 0;
    for (const auto& f : flowList()) {
        const auto& from = data().event(f.from);
        const auto& to = data().event(f.to);
        if (std::int64_t(f.to) == index)
            s += tr("<br>launched by the host call at %1 (correlation %2); launch delay %3")
                     .arg(formatSeconds(double(from.startNs - data().beginNs()) * 1e-9))
                     .arg(e.correlation)
                     .arg(formatSeconds(double(to.startNs - from.endNs) * 1e-9));
        else if (std::int64_t(f.from) == index && kernels++ == 0)
            s += tr("<br>launched %1 on stream %2 (correlation %3); launch delay %4")
                     .arg(QString::fromStdString(std::string(trace::toString(to.kind))))
                     .arg(to.stream)
                     .arg(e.correlation)
                     .arg(formatSeconds(double(to.startNs - from.endNs) * 1e-9));
    }
    if (kernels > 1)
        s += tr(" (and %n more device event(s))", nullptr, kernels - 1);
    return s;
}

} // namespace loom::views
