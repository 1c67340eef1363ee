#include "views/RunTimelinePanel.h"

#include "views/MetricsPanel.h"
#include "views/RunMonitor.h"
#include "views/TimelineView.h"

#include <QCheckBox>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QMessageBox>
#include <QPushButton>
#include <QVBoxLayout>

namespace loom::views {

RunTimelinePanel::RunTimelinePanel(RunMonitor* monitor, QWidget* parent)
    : QWidget(parent)
    , m_monitor(monitor)
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->setSpacing(2);
    auto* bar = new QHBoxLayout;
    bar->setContentsMargins(6, 2, 6, 0);
    m_follow = new QCheckBox(tr("Follow"));
    m_follow->setChecked(true);
    m_follow->setToolTip(tr("Keep the newest events in view while the run goes on (zooming or panning stops it)."));
    m_overlay = new QCheckBox(tr("Overlay prediction"));
    m_overlay->setToolTip(tr("Draw the planner's simulated step of this layout (dashed outlines) under the measured "
                             "events of the same ranks, from the start of the last complete step."));
    auto* exportButton = new QPushButton(tr("Export…"));
    exportButton->setToolTip(tr("Save the timeline as PNG, SVG or PDF."));
    m_info = new QLabel;
    bar->addWidget(m_follow);
    bar->addWidget(m_overlay);
    bar->addWidget(m_info, 1);
    bar->addWidget(exportButton);
    layout->addLayout(bar);
    m_view = new TimelineView;
    m_view->setModel(monitor->timeline());
    m_view->setFollowing(true);
    layout->addWidget(m_view, 1);

    connect(m_follow, &QCheckBox::toggled, m_view, [this](bool on) {
        m_view->setFollowing(on);
        if (on)
            m_view->fit();
    });
    connect(m_overlay, &QCheckBox::toggled, this, &RunTimelinePanel::updateOverlay);
    connect(monitor, &RunMonitor::eventsAdded, this, [this] {
        m_follow->setChecked(m_view->following());
        m_info->setText(tr("%1 events from %2 lanes")
                            .arg(QLocale().toString(qulonglong(m_view->timeline().events().size())))
                            .arg(m_view->timeline().rows().size()));
        if (m_overlay->isChecked())
            updateOverlay();
    });
    connect(monitor, &RunMonitor::reset, this, [this] {
        m_view->setModel(m_monitor->timeline());
        m_view->setFollowing(m_monitor->running() || m_follow->isChecked());
        m_view->fit();
        updateOverlay();
    });
    connect(exportButton, &QPushButton::clicked, this, [this] {
        const QString path = QFileDialog::getSaveFileName(
            this, tr("Export timeline"), QStringLiteral("timeline.png"), tr("PNG (*.png);;SVG (*.svg);;PDF (*.pdf)"));
        QString error;
        if (!path.isEmpty() && !exportWidget(m_view, path, &error))
            QMessageBox::warning(this, tr("Export timeline"), error);
    });
}

std::int64_t RunTimelinePanel::overlayOffset() const
{
    const auto& events = m_view->timeline().events();
    std::int32_t lastStep = -1;
    for (const auto& e : events)
        if (e.kind == trace::EventKind::Optimizer)
            lastStep = std::max(lastStep, e.step);
    std::int64_t start = INT64_MAX;
    for (const auto& e : events)
        if (e.step == lastStep)
            start = std::min(start, e.startNs);
    return start == INT64_MAX ? m_view->timeline().beginNs() : start;
}

void RunTimelinePanel::updateOverlay()
{
    const auto& prediction = m_monitor->prediction();
    if (!m_overlay->isChecked() || !prediction) {
        m_view->setOverlay({}, 0);
        return;
    }
    TimelineData simulated;
    simulated.setEvents(prediction->events);
    m_view->setOverlay(std::move(simulated), overlayOffset());
}

} // namespace loom::views
