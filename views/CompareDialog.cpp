#include "views/CompareDialog.h"

#include "engine/plan/LayoutParser.h"
#include "engine/trace/PredictedMeasured.h"
#include "views/LayoutDiff.h"
#include "views/MetricsPanel.h"
#include "views/RunMonitor.h"
#include "views/RunTimelinePanel.h"
#include "views/TimelineView.h"

#include <QLabel>
#include <QLocale>
#include <QSplitter>
#include <QVBoxLayout>
#include <qcustomplot.h>

namespace loom::views {

namespace {

// The run's bubble is the idle share of its busiest stage (the one that sets the step's pace); the other
// stages wait longer because of it, so stage 0's idle time overstates the run's.
const trace::StageStats* busiestStage(const trace::TraceStats& stats)
{
    const auto it = std::min_element(stats.stages.begin(), stats.stages.end(),
        [](const auto& a, const auto& b) { return a.bubbleFraction < b.bubbleFraction; });
    return it == stats.stages.end() ? nullptr : &*it;
}

QString summaryText(const RunMonitor* m)
{
    QString s = QObject::tr("<b>Run %1</b> — %2, %3")
                    .arg(m->runId())
                    .arg(QString::fromStdString(m->layout().name).toHtmlEscaped(), profiles::toString(m->state()));
    const auto& p = m->layout().parallel;
    s += QObject::tr("<br>tp %1 · pp %2 · dp %3, %4, micro-batch %5, global batch %6")
             .arg(p.tp)
             .arg(p.pp)
             .arg(p.dp)
             .arg(QString::fromLatin1(plan::toString(p.schedule).data()))
             .arg(p.microBatch)
             .arg(p.globalBatch);
    s += QObject::tr(", codec %1").arg(QString::fromStdString(m->layout().comm.dpCodec.toString()));
    if (!m->steps().empty())
        s += QObject::tr("<br>final loss %1 after %2 steps, %3 tokens/s")
                 .arg(profiles::lossText(m->steps().back().loss))
                 .arg(m->steps().back().step)
                 .arg(QLocale().toString(m->steps().back().tokensPerSecond, 'f', 0));
    if (const auto* bottleneck = busiestStage(m->stats()))
        s += QObject::tr(", bubble %1 % (stage %2, the busiest)")
                 .arg(QLocale().toString(100 * bottleneck->bubbleFraction, 'f', 1))
                 .arg(bottleneck->stage);
    return s;
}

} // namespace

CompareDialog::CompareDialog(profiles::Store* store, qint64 left, qint64 right, QWidget* parent)
    : QDialog(parent)
    , m_left(new RunMonitor(store, this))
    , m_right(new RunMonitor(store, this))
{
    setWindowTitle(tr("Compare runs %1 and %2").arg(left).arg(right));
    auto* layout = new QVBoxLayout(this);
    auto* page = new QSplitter(Qt::Vertical);
    auto* sides = new QSplitter(Qt::Horizontal);
    auto* timelines = new QSplitter(Qt::Vertical);
    std::vector<MetricsPanel*> panels;
    for (RunMonitor* m : { m_left, m_right }) {
        auto* column = new QSplitter(Qt::Vertical);
        auto* head = new QLabel(tr("Loading…"));
        head->setTextFormat(Qt::RichText);
        head->setWordWrap(true);
        m_heads.push_back(head);
        column->addWidget(head);
        auto* metrics = new MetricsPanel(m);
        panels.push_back(metrics);
        column->addWidget(metrics);
        column->setStretchFactor(1, 2);
        sides->addWidget(column);
        // The timelines one above the other, so the same moment of a step is at the same x in both.
        auto* timeline = new RunTimelinePanel(m);
        timeline->followBox()->setChecked(false);
        m_timelines.push_back(timeline->view());
        timelines->addWidget(timeline);
        connect(m, &RunMonitor::statsChanged, head, [head, m] { head->setText(summaryText(m)); });
        connect(m, &RunMonitor::openFailed, this, [this, head](const QString& why) {
            m_error = why;
            head->setText(why.toHtmlEscaped());
        });
    }
    m_difference = new QLabel(tr("Loading…"));
    m_difference->setTextFormat(Qt::RichText);
    m_difference->setWordWrap(true);
    m_difference->setTextInteractionFlags(Qt::TextSelectableByMouse);
    for (RunMonitor* m : { m_left, m_right }) {
        connect(
            m, &RunMonitor::statsChanged, this, [this, panels] { sameScales(panels); }, Qt::QueuedConnection);
        connect(m, &RunMonitor::reset, this, &CompareDialog::align, Qt::QueuedConnection);
        connect(m, &RunMonitor::statsChanged, this, &CompareDialog::align, Qt::QueuedConnection);
    }
    for (int side = 0; side < 2; ++side)
        connect(m_timelines[std::size_t(side)], &TimelineView::windowChanged, this, [this, side] { follow(side); });
    page->addWidget(m_difference);
    page->addWidget(sides);
    page->addWidget(timelines);
    page->setStretchFactor(1, 2);
    page->setStretchFactor(2, 3);
    layout->addWidget(page, 1);
    // Both runs load on worker threads; the columns fill in as they arrive.
    m_left->openInBackground(left);
    m_right->openInBackground(right);
    resize(1500, 950);
}

std::int64_t CompareDialog::stepStart(int side) const
{
    const auto& events = m_timelines[std::size_t(side)]->timeline().events();
    const std::int32_t step = trace::lastCompleteStep(events);
    std::int64_t start = INT64_MAX;
    for (const auto& e : events)
        if (e.step == step)
            start = std::min(start, e.startNs);
    return start == INT64_MAX ? m_timelines[std::size_t(side)]->timeline().beginNs() : start;
}

void CompareDialog::align()
{
    if (m_left->loading() || m_right->loading())
        return;
    // The configuration difference, every path whose value differs.
    const auto diff = layoutDifference(plan::writeLayout(m_left->layout()), plan::writeLayout(m_right->layout()));
    QString text = diff.empty()
        ? tr("<b>Same configuration.</b>")
        : tr("<b>Configuration difference</b> (run %1 → run %2):").arg(m_left->runId()).arg(m_right->runId());
    for (const auto& d : diff)
        text += QStringLiteral("<br>&nbsp;%1: %2 → %3")
                    .arg(QString::fromStdString(d.path).toHtmlEscaped(), QString::fromStdString(d.left).toHtmlEscaped(),
                        QString::fromStdString(d.right).toHtmlEscaped());
    m_difference->setText(text);
    // Both timelines from the start of their last complete step, over the longer of the two steps.
    std::int64_t span = 0;
    for (int side = 0; side < 2; ++side) {
        const auto steps = m_timelines[std::size_t(side)]->steps();
        const std::int32_t last = trace::lastCompleteStep(m_timelines[std::size_t(side)]->timeline().events());
        for (const auto& s : steps)
            if (s.step == last)
                span = std::max(span, s.endNs - s.startNs);
    }
    if (span <= 0)
        return;
    m_aligning = true;
    for (int side = 0; side < 2; ++side)
        m_timelines[std::size_t(side)]->setWindow(stepStart(side) - span / 50, stepStart(side) + span + span / 50);
    m_aligning = false;
}

void CompareDialog::follow(int side)
{
    // Panning or zooming one timeline moves the other by the same, relative to its step start.
    if (m_aligning)
        return;
    m_aligning = true;
    const auto [t0, t1] = m_timelines[std::size_t(side)]->window();
    const std::int64_t shift = stepStart(1 - side) - stepStart(side);
    m_timelines[std::size_t(1 - side)]->setWindow(t0 + shift, t1 + shift);
    m_aligning = false;
}

void CompareDialog::sameScales(const std::vector<MetricsPanel*>& panels)
{
    if (panels.size() != 2)
        return;
    // One scale for the steps and the loss, so the two curves can be compared by eye.
    auto* a = panels[0]->lossPlot();
    auto* b = panels[1]->lossPlot();
    const double steps = std::max(a->xAxis->range().upper, b->xAxis->range().upper);
    const double loss = std::max(a->yAxis->range().upper, b->yAxis->range().upper);
    for (auto* p : { a, b }) {
        p->xAxis->setRangeUpper(steps);
        p->yAxis->setRangeUpper(loss);
        p->replot();
    }
}

bool CompareDialog::loaded() const
{
    return !m_left->loading() && !m_right->loading();
}

bool CompareDialog::ok(QString* error) const
{
    if (error)
        *error = m_error;
    return m_error.isEmpty();
}

} // namespace loom::views
