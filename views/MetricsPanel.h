#pragma once

#include <QWidget>

class QCustomPlot;

namespace loom::views {

class RunMonitor;

// A run's plots (QCustomPlot), updating live: loss and tokens/s per step; bubble fraction per pipeline stage,
// measured beside the planner's prediction and the closed form; bus bandwidth per kind of collective per
// step; bytes per second over each link class per step. Each plot exports as PNG, SVG or PDF.
class MetricsPanel : public QWidget {
    Q_OBJECT
public:
    explicit MetricsPanel(RunMonitor* monitor, QWidget* parent = nullptr);

    QCustomPlot* lossPlot() const { return m_loss; }
    QCustomPlot* bubblePlot() const { return m_bubble; }
    QCustomPlot* collectivePlot() const { return m_collectives; }
    QCustomPlot* linkPlot() const { return m_links; }
    // Redraws everything from the monitor.
    void refresh();

private:
    void refreshLoss();
    void refreshBubble();
    void refreshBandwidth();

    RunMonitor* m_monitor;
    QCustomPlot *m_loss, *m_bubble, *m_collectives, *m_links;
};

// Saves a plot as PNG, SVG or PDF by the file's extension; false with the reason otherwise.
bool exportPlot(QCustomPlot* plot, const QString& path, QString* error);
// Saves a widget (the timeline) as PNG, SVG or PDF by the file's extension.
bool exportWidget(QWidget* widget, const QString& path, QString* error);

} // namespace loom::views
