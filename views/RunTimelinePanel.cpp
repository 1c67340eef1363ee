#include "views/RunTimelinePanel.h"
#include "views/CalibrateDialog.h"
#include "views/FileDialogs.h"

#include "views/Explain.h"
#include "views/MetricsPanel.h"
#include "views/RunMonitor.h"
#include "views/TimelinePane.h"
#include "views/TimelineView.h"

#include <QCheckBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QMessageBox>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>

namespace loom::views {

namespace {
// The hosts of a run over ssh (its hostfile lists the cluster's first `nodes` hosts, each with world ÷ nodes
// consecutive ranks); other methods name no hosts before they run (Slurm chooses the nodes).
QStringList hostsOfRun(const plan::Layout& layout)
{
    QStringList hosts;
    if (layout.cluster.launch.method != "ssh")
        return hosts;
    const std::int64_t nodes = std::max<std::int64_t>(1, layout.nodes);
    for (std::size_t i = 0; i < layout.cluster.hosts.size() && std::int64_t(i) < nodes; ++i)
        hosts << QString::fromStdString(layout.cluster.hosts[i]);
    return hosts;
}

int ranksPerHost(const plan::Layout& layout)
{
    return int(std::max<std::int64_t>(1, layout.parallel.worldSize() / std::max<std::int64_t>(1, layout.nodes)));
}
} // namespace

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
    m_follow->setToolTip(tr("Keep the newest three steps in view while the run goes on (zooming or panning stops "
                            "it); the label names the steps kept."));
    m_overlay = new QCheckBox(tr("Overlay prediction"));
    m_overlay->setToolTip(tr("Draw the planner's simulated step of this layout (dashed outlines) over the measured "
                             "events of the same ranks, from the start of the last complete step, and compare them "
                             "kind by kind."));
    m_scale = new QCheckBox(tr("Scale to measured"));
    m_scale->setChecked(true);
    m_scale->setToolTip(tr("Stretch the simulated step to the measured step's length, so its shape can be compared "
                           "even when the prediction is far off (the ratio is in the table)."));
    m_calibrate = new QPushButton(tr("Calibrate from this run…"));
    m_calibrate->setToolTip(tr("Fit the cluster profile's efficiencies and link figures to this run's measured "
                               "events (as loom plan calibrate does), see how the prediction changes, and save the "
                               "calibrated profile."));
    m_calibrate->setEnabled(false);
    auto* exportButton = new QPushButton(tr("Export…"));
    exportButton->setToolTip(tr("Save the timeline as PNG, SVG or PDF."));
    m_info = new QLabel;
    bar->addWidget(m_follow);
    bar->addWidget(m_overlay);
    bar->addWidget(m_scale);
    bar->addWidget(m_info, 1);
    bar->addWidget(m_calibrate);
    bar->addWidget(exportButton);
    layout->addLayout(bar);
    m_view = new TimelineView;
    m_pane = new TimelinePane(m_view);
    m_view->setModel(monitor->timeline());
    m_view->setFollowing(true);
    layout->addWidget(m_pane, 1);
    m_summary = new QLabel;
    m_summary->setTextFormat(Qt::RichText);
    m_table = new QTableWidget(3, 0);
    m_table->setVerticalHeaderLabels({ tr("predicted"), tr("measured"), tr("measured ÷ predicted") });
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_table->setMaximumHeight(4 * m_table->verticalHeader()->defaultSectionSize() + 8);
    layout->addWidget(m_summary);
    layout->addWidget(m_table);
    m_summary->hide();
    m_table->hide();

    connect(m_follow, &QCheckBox::toggled, m_view, [this](bool on) {
        m_view->setFollowing(on);
        if (on)
            m_view->fit();
        updateFollowLabel();
    });
    connect(m_view, &TimelineView::windowChanged, this, &RunTimelinePanel::updateFollowLabel);
    connect(m_overlay, &QCheckBox::toggled, this, &RunTimelinePanel::updateOverlay);
    connect(m_scale, &QCheckBox::toggled, this, &RunTimelinePanel::updateOverlay);
    connect(monitor, &RunMonitor::eventsAdded, this, [this] {
        m_follow->setChecked(m_view->following());
        m_calibrate->setEnabled(true);
        m_info->setText(tr("%1 events from %2 lanes")
                            .arg(QLocale().toString(qulonglong(m_view->timeline().events().size())))
                            .arg(m_view->timeline().rows().size()));
        if (m_overlay->isChecked())
            updateOverlay();
        updateFollowLabel();
    });
    connect(monitor, &RunMonitor::reset, this, [this] {
        m_view->setModel(m_monitor->timeline());
        const auto& cluster = m_monitor->layout().cluster;
        m_view->setRanksPerNode(cluster.autoDevices() ? 1 << 30 : int(cluster.devicesPerNode));
        m_view->setHosts(hostsOfRun(m_monitor->layout()), ranksPerHost(m_monitor->layout()));
        m_view->setFollowing(m_monitor->running() || m_follow->isChecked());
        m_view->fit();
        m_calibrate->setEnabled(!m_view->timeline().events().empty());
        updateOverlay();
    });
    connect(m_calibrate, &QPushButton::clicked, this, &RunTimelinePanel::calibrateFromRun);
    connect(exportButton, &QPushButton::clicked, this, [this] {
        const QString path = saveFileName(
            this, tr("Export timeline"), QStringLiteral("timeline.png"), tr("PNG (*.png);;SVG (*.svg);;PDF (*.pdf)"));
        QString error;
        if (!path.isEmpty() && !exportWidget(m_view, path, &error))
            QMessageBox::warning(this, tr("Export timeline"), error);
    });
}

void RunTimelinePanel::calibrateFromRun()
{
    // A fresh fit on each click: a live run has more steps by now.
    delete m_calibration;
    m_calibration
        = new CalibrateDialog(m_monitor->layout(), m_view->timeline(), m_monitor->store(), m_monitor->runId(), this);
    m_calibration->open();
}

void RunTimelinePanel::updateFollowLabel()
{
    const auto steps = m_view->stepsInView();
    if (!m_view->following() || steps.empty()) {
        m_follow->setText(tr("Follow"));
        return;
    }
    m_follow->setText(steps.size() == 1 ? tr("Follow (step %1)").arg(steps.front().step)
                                        : tr("Follow (steps %1–%2)").arg(steps.front().step).arg(steps.back().step));
}

std::int64_t RunTimelinePanel::overlayOffset() const
{
    const auto& events = m_view->timeline().events();
    const std::int32_t lastStep = trace::lastCompleteStep(events);
    std::int64_t start = INT64_MAX;
    for (const auto& e : events)
        if (e.step == lastStep)
            start = std::min(start, e.startNs);
    return start == INT64_MAX ? m_view->timeline().beginNs() : start;
}

void RunTimelinePanel::updateOverlay()
{
    const auto& prediction = m_monitor->prediction();
    const bool on = m_overlay->isChecked() && prediction && !m_view->timeline().events().empty();
    m_table->setVisible(on);
    m_summary->setVisible(on);
    if (!on) {
        m_view->setOverlay({}, 0);
        return;
    }
    const auto& measured = m_view->timeline();
    m_comparison = trace::compareStep(
        prediction->events, {}, measured.events(), measured.groups(), trace::lastCompleteStep(measured.events()));
    TimelineData simulated;
    simulated.setEvents(prediction->events);
    m_view->setOverlay(std::move(simulated), overlayOffset(), m_scale->isChecked() ? m_comparison.scale : 1.0);
    // Predicted against measured, kind by kind (kinds neither side has are left out).
    const QLocale l;
    int column = 0;
    m_table->setColumnCount(0);
    for (const auto& k : m_comparison.kinds) {
        if (k.predicted <= 0 && k.measured <= 0)
            continue;
        m_table->insertColumn(column);
        m_table->setHorizontalHeaderItem(column, new QTableWidgetItem(QString::fromStdString(k.kind)));
        m_table->setItem(0, column, new QTableWidgetItem(formatSeconds(k.predicted)));
        m_table->setItem(1, column, new QTableWidgetItem(formatSeconds(k.measured)));
        m_table->setItem(2, column,
            new QTableWidgetItem(k.predicted > 0 ? QStringLiteral("× ") + l.toString(k.ratio, 'f', 2) : tr("–")));
        ++column;
    }
    const auto& step = m_comparison.kinds.back();
    m_summary->setText(
        tr("Step %1: predicted %2, measured %3 (× %4); the overlay is %5.")
            .arg(m_comparison.step)
            .arg(formatSeconds(step.predicted), formatSeconds(step.measured), l.toString(step.ratio, 'f', 2),
                m_scale->isChecked()
                    ? tr("stretched × %1 to the measured step").arg(l.toString(m_comparison.scale, 'f', 2))
                    : tr("drawn to scale from the step's start")));
}

} // namespace loom::views
