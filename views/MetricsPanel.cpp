#include "views/MetricsPanel.h"
#include "views/FileDialogs.h"

#include "views/Colors.h"
#include "views/RunMonitor.h"

#include <QGridLayout>
#include <QMenu>
#include <QPdfWriter>
#include <QSvgGenerator>
#include <qcustomplot.h>

namespace loom::views {

namespace {

const QColor kSeries[] = { QColor(0x00, 0x72, 0xB2), QColor(0xD5, 0x5E, 0x00), QColor(0x00, 0x9E, 0x73),
    QColor(0xCC, 0x79, 0xA7), QColor(0xE6, 0x9F, 0x00), QColor(0x56, 0xB4, 0xE9), QColor(0x99, 0x99, 0x99) };

QCustomPlot* makePlot(const QString& title, const QString& xLabel, const QString& yLabel)
{
    auto* plot = new QCustomPlot;
    plot->setMinimumSize(280, 200);
    plot->plotLayout()->insertRow(0);
    auto* t = new QCPTextElement(plot, title, QFont(plot->font().family(), 10, QFont::Bold));
    plot->plotLayout()->addElement(0, 0, t);
    plot->xAxis->setLabel(xLabel);
    plot->yAxis->setLabel(yLabel);
    plot->legend->setVisible(true);
    QFont small = plot->font();
    small.setPointSizeF(8);
    plot->legend->setFont(small);
    plot->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
    plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    plot->setContextMenuPolicy(Qt::CustomContextMenu);
    QObject::connect(plot, &QWidget::customContextMenuRequested, plot, [plot](const QPoint& pos) {
        QMenu menu;
        menu.addAction(QObject::tr("Save as PNG, SVG or PDF…"), plot, [plot] {
            const QString path = saveFileName(plot, QObject::tr("Export plot"), QStringLiteral("plot.png"),
                QObject::tr("PNG (*.png);;SVG (*.svg);;PDF (*.pdf)"));
            QString error;
            if (!path.isEmpty() && !exportPlot(plot, path, &error))
                QMessageBox::warning(plot, QObject::tr("Export plot"), error);
        });
        menu.addActions(plot->actions()); // e.g. the workbench's "Explain this number"
        menu.exec(plot->mapToGlobal(pos));
    });
    return plot;
}

} // namespace

MetricsPanel::MetricsPanel(RunMonitor* monitor, QWidget* parent)
    : QWidget(parent)
    , m_monitor(monitor)
{
    auto* grid = new QGridLayout(this);
    grid->setContentsMargins(4, 4, 4, 4);
    m_loss = makePlot(tr("Loss and throughput"), tr("step"), tr("loss"));
    m_loss->yAxis2->setVisible(true);
    m_loss->yAxis2->setLabel(tr("tokens/s"));
    m_bubble = makePlot(tr("Bubble per pipeline stage"), tr("stage"), tr("fraction of the step"));
    m_collectives = makePlot(tr("Bus bandwidth per collective"), tr("step"), tr("GB/s"));
    m_links = makePlot(tr("Traffic per link class"), tr("step"), tr("GB/s"));
    grid->addWidget(m_loss, 0, 0);
    grid->addWidget(m_bubble, 0, 1);
    grid->addWidget(m_collectives, 1, 0);
    grid->addWidget(m_links, 1, 1);
    connect(monitor, &RunMonitor::reset, this, &MetricsPanel::refresh);
    connect(monitor, &RunMonitor::stepAdded, this, [this] {
        refreshLoss();
        refreshBandwidth();
    });
    // A run opened from the store resets before its events arrive: the bandwidth series fills after the
    // reset, so the plots redraw with the statistics (which follow the events) as well as per live step.
    connect(monitor, &RunMonitor::statsChanged, this, [this] {
        refreshBubble();
        refreshBandwidth();
    });
    connect(monitor, &RunMonitor::finished, this, &MetricsPanel::refresh);
    refresh();
}

void MetricsPanel::refresh()
{
    refreshLoss();
    refreshBubble();
    refreshBandwidth();
}

void MetricsPanel::refreshLoss()
{
    m_loss->clearGraphs();
    QVector<double> x, loss, tps;
    for (const auto& s : m_monitor->steps()) {
        x << double(s.step);
        loss << s.loss;
        tps << s.tokensPerSecond;
    }
    auto* l = m_loss->addGraph();
    l->setName(tr("loss"));
    l->setPen(QPen(kSeries[0], 2));
    l->setData(x, loss, true);
    auto* t = m_loss->addGraph(m_loss->xAxis, m_loss->yAxis2);
    t->setName(tr("tokens/s"));
    t->setPen(QPen(kSeries[1], 1.5, Qt::DashLine));
    t->setData(x, tps, true);
    m_loss->xAxis->setRange(0, std::max<double>(double(m_monitor->totalSteps()), x.isEmpty() ? 1.0 : x.back()) + 1);
    l->rescaleValueAxis(false, true);
    t->rescaleValueAxis(false, true);
    m_loss->yAxis->setRangeLower(0);
    m_loss->yAxis2->setRangeLower(0);
    m_loss->replot(QCustomPlot::rpQueuedReplot);
}

void MetricsPanel::refreshBubble()
{
    m_bubble->clearPlottables();
    const auto& stats = m_monitor->stats();
    QVector<double> ticks, measured, theory;
    for (const auto& s : stats.stages) {
        ticks << double(s.stage);
        measured << s.bubbleFraction;
        theory << s.bubbleTheory;
    }
    auto* group = new QCPBarsGroup(m_bubble);
    auto bars = [&](const QString& name, const QVector<double>& values, const QColor& color) {
        auto* b = new QCPBars(m_bubble->xAxis, m_bubble->yAxis);
        b->setName(name);
        b->setWidth(0.25);
        b->setBrush(color);
        b->setPen(QPen(color.darker(130)));
        b->setData(ticks, values, true);
        b->setBarsGroup(group);
    };
    bars(tr("measured"), measured, colors::idle.darker(150));
    const auto& prediction = m_monitor->prediction();
    if (prediction && !ticks.isEmpty()) {
        // The planner's replay: the busiest stage's bubble; the same schedule gives every stage that figure.
        QVector<double> predicted(ticks.size(), prediction->bubbleFraction);
        bars(tr("predicted (simulated)"), predicted, colors::forward);
    }
    bars(tr("closed form (p−1)/(m+p−1)"), theory, colors::optimizer);
    m_bubble->xAxis->setRange(-0.6, std::max(0.6, double(ticks.size()) - 0.4));
    QSharedPointer<QCPAxisTickerFixed> ticker(new QCPAxisTickerFixed);
    ticker->setTickStep(1);
    m_bubble->xAxis->setTicker(ticker);
    m_bubble->yAxis->setRange(0, 1);
    m_bubble->replot(QCustomPlot::rpQueuedReplot);
}

void MetricsPanel::refreshBandwidth()
{
    auto fill = [](QCustomPlot* plot, const std::vector<RunMonitor::BandwidthPoint>& points, bool collectives) {
        plot->clearGraphs();
        std::map<QString, std::pair<QVector<double>, QVector<double>>> series;
        for (const auto& p : points)
            for (const auto& [name, value] : collectives ? p.perCollective : p.perLinkClass) {
                series[QString::fromStdString(name)].first << double(p.step);
                series[QString::fromStdString(name)].second << value;
            }
        int i = 0;
        double top = 0;
        for (auto& [name, xy] : series) {
            auto* g = plot->addGraph();
            g->setName(name);
            g->setPen(QPen(kSeries[std::size_t(i++) % std::size(kSeries)], 1.8));
            g->setLineStyle(QCPGraph::lsLine);
            g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 4));
            g->setData(xy.first, xy.second, true);
            for (double v : xy.second)
                top = std::max(top, v);
        }
        plot->xAxis->setRange(0, points.empty() ? 1.0 : double(points.back().step) + 1);
        plot->yAxis->setRange(0, top > 0 ? top * 1.15 : 1.0);
        plot->replot(QCustomPlot::rpQueuedReplot);
    };
    fill(m_collectives, m_monitor->bandwidth(), true);
    fill(m_links, m_monitor->bandwidth(), false);
}

bool exportPlot(QCustomPlot* plot, const QString& path, QString* error)
{
    const QString ext = QFileInfo(path).suffix().toLower();
    bool ok = false;
    if (ext == QLatin1String("png"))
        ok = plot->savePng(path, plot->width(), plot->height(), 2.0);
    else if (ext == QLatin1String("pdf"))
        ok = plot->savePdf(path);
    else if (ext == QLatin1String("svg")) {
        QSvgGenerator svg;
        svg.setFileName(path);
        svg.setSize(plot->size());
        svg.setViewBox(QRect(QPoint(0, 0), plot->size()));
        svg.setTitle(QStringLiteral("Loom plot"));
        QCPPainter painter;
        ok = painter.begin(&svg);
        if (ok) {
            plot->toPainter(&painter, plot->width(), plot->height());
            painter.end();
        }
    } else {
        if (error)
            *error = QObject::tr("%1: choose a file name ending in .png, .svg or .pdf").arg(path);
        return false;
    }
    if (!ok && error)
        *error = QObject::tr("Cannot write %1; choose a folder you may write to.").arg(path);
    return ok && QFileInfo::exists(path);
}

bool exportWidget(QWidget* widget, const QString& path, QString* error)
{
    const QString ext = QFileInfo(path).suffix().toLower();
    bool ok = false;
    if (ext == QLatin1String("png")) {
        ok = widget->grab().save(path);
    } else if (ext == QLatin1String("svg")) {
        QSvgGenerator svg;
        svg.setFileName(path);
        svg.setSize(widget->size());
        svg.setViewBox(widget->rect());
        QPainter p;
        ok = p.begin(&svg);
        if (ok) {
            widget->render(&p);
            p.end();
        }
    } else if (ext == QLatin1String("pdf")) {
        QPdfWriter pdf(path);
        pdf.setPageSize(QPageSize(QSizeF(widget->width(), widget->height()), QPageSize::Point));
        pdf.setPageMargins(QMarginsF(0, 0, 0, 0));
        pdf.setResolution(72);
        QPainter p;
        ok = p.begin(&pdf);
        if (ok) {
            widget->render(&p);
            p.end();
        }
    } else {
        if (error)
            *error = QObject::tr("%1: choose a file name ending in .png, .svg or .pdf").arg(path);
        return false;
    }
    if (!ok && error)
        *error = QObject::tr("Cannot write %1; choose a folder you may write to.").arg(path);
    return ok && QFileInfo::exists(path);
}

} // namespace loom::views
