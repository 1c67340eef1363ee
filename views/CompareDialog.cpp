#include "views/CompareDialog.h"

#include "views/MetricsPanel.h"
#include "views/RunMonitor.h"
#include "views/RunTimelinePanel.h"

#include <QLabel>
#include <QLocale>
#include <QSplitter>
#include <QVBoxLayout>
#include <qcustomplot.h>

namespace loom::views {

namespace {

QString summary(const RunMonitor* m)
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
    if (!m->steps().empty())
        s += QObject::tr("<br>final loss %1 after %2 steps, %3 tokens/s, bubble %4 %")
                 .arg(m->steps().back().loss, 0, 'f', 4)
                 .arg(m->steps().back().step)
                 .arg(QLocale().toString(m->steps().back().tokensPerSecond, 'f', 0))
                 .arg(QLocale().toString(
                     m->stats().stages.empty() ? 0.0 : 100 * m->stats().stages.front().bubbleFraction, 'f', 1));
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
    auto* sides = new QSplitter(Qt::Horizontal);
    std::vector<MetricsPanel*> panels;
    for (RunMonitor* m : { m_left, m_right }) {
        auto* column = new QSplitter(Qt::Vertical);
        auto* head = new QLabel(tr("Loading…"));
        head->setTextFormat(Qt::RichText);
        head->setWordWrap(true);
        column->addWidget(head);
        auto* metrics = new MetricsPanel(m);
        panels.push_back(metrics);
        column->addWidget(metrics);
        auto* timeline = new RunTimelinePanel(m);
        column->addWidget(timeline);
        column->setStretchFactor(1, 2);
        column->setStretchFactor(2, 2);
        sides->addWidget(column);
        connect(m, &RunMonitor::statsChanged, head, [head, m] { head->setText(summary(m)); });
        connect(m, &RunMonitor::openFailed, this, [this, head](const QString& why) {
            m_error = why;
            head->setText(why.toHtmlEscaped());
        });
    }
    for (RunMonitor* m : { m_left, m_right })
        connect(
            m, &RunMonitor::statsChanged, this, [this, panels] { sameScales(panels); }, Qt::QueuedConnection);
    layout->addWidget(sides, 1);
    // Both runs load on worker threads; the columns fill in as they arrive.
    m_left->openInBackground(left);
    m_right->openInBackground(right);
    resize(1500, 950);
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
