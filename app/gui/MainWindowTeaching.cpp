// The workbench's teaching side: the Lessons dock (resources/lessons), the all-reduce stepper on the map
// and the Explain dock ("Explain this number" on every figure of the Prediction panel).

#include "app/gui/MainWindow.h"

#include "views/Explain.h"
#include "views/ExplainDock.h"
#include "views/LayerPalette.h"
#include "views/LayoutAnalysis.h"
#include "views/LayoutDocument.h"
#include "views/MetricsPanel.h"
#include "views/teaching/AllReduceStepper.h"
#include "views/teaching/LessonActions.h"
#include "views/teaching/LessonDock.h"

#include "views/PredictionPanel.h"
#include "views/RunMonitor.h"
#include "views/RunPanel.h"
#include "views/TopologyView.h"
#include <qcustomplot.h>

#include <QAction>
#include <QDockWidget>
#include <QLabel>
#include <QMenu>
#include <QPushButton>
#include <QScrollArea>
#include <QSpinBox>

namespace loom::app {

using namespace loom::views;

void MainWindow::buildTeaching()
{
    m_map->setObjectName(QStringLiteral("topologyMap"));
    m_palette->setObjectName(QStringLiteral("layerTable"));
    m_runPanel->runButton()->setObjectName(QStringLiteral("runButton"));
    m_runPanel->stepsBox()->setObjectName(QStringLiteral("runSteps"));
    m_prediction->recommendButton()->setObjectName(QStringLiteral("recommendButton"));

    m_stepper = new AllReduceStepper(m_scene);
    m_explain = new ExplainDock([this](const QString& key) { return explainText(key); });
    m_lessonContext = std::make_shared<LessonContext>();
    LessonContext& c = *m_lessonContext;
    c.window = this;
    c.document = m_doc;
    c.analysis = m_runner;
    c.strategy = m_strategy;
    c.runPanel = m_runPanel;
    c.monitor = m_monitor;
    c.map = m_map;
    c.stepper = m_stepper;
    c.explain = m_explain;
    c.recommend = [this] { recommend(); };

    QStringList problems;
    std::vector<Lesson> lessons = loadLessons(m_profiles, &problems);
    for (const QString& p : problems)
        qWarning("loom: lesson refused: %s", qPrintable(p));
    LessonDock::Hooks hooks;
    // The hooks share the context, so that they stay valid while the window's children are torn down.
    const std::shared_ptr<LessonContext> context = m_lessonContext;
    hooks.facts = [context] { return gatherFacts(*context); };
    hooks.widget = [context](const QString& name) { return lessonWidget(*context, name); };
    hooks.perform = [context](const LessonAction& a, QString* why) { return performLessonAction(*context, a, why); };
    hooks.start = [this](const Lesson& lesson) {
        // The lesson's layout as one undoable edit (the learner's own layout is one Ctrl+Z away); runs shown
        // so far belong to before the lesson.
        m_lessonContext->runBaseline = std::max(m_monitor->runId(), m_lessonContext->runBaseline);
        plan::Layout l = lesson.layout;
        l.name = lesson.id.toStdString();
        m_doc->edit(l, tr("Start the lesson “%1”").arg(lesson.title));
        m_doc->forgetFile(); // Save (and the quit prompt's Save) then asks for a new file
        m_stepper->reset();
        m_explain->showTopic(QString());
        findChild<QDockWidget*>(QStringLiteral("scheduleDock"))->raise();
        m_map->fitAll();
    };
    m_lessons = new LessonDock(std::move(lessons), hooks);

    // Below the Layers and Run tabs (a row of its own, so that the lesson stays in view while a step raises
    // either of them).
    auto* lessonsDock = new QDockWidget(tr("Lessons"), this);
    lessonsDock->setObjectName(QStringLiteral("lessonsDock"));
    auto* scroll = new QScrollArea; // so that the lesson never makes the window taller than the screen
    scroll->setWidget(m_lessons);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    lessonsDock->setWidget(scroll);
    addDockWidget(Qt::LeftDockWidgetArea, lessonsDock, Qt::Vertical);
    lessonsDock->hide(); // View ▸ Lessons, or loom --lesson ID
    connect(lessonsDock, &QDockWidget::visibilityChanged, this,
        [this, lessonsDock](bool visible) { lessonsShown(lessonsDock, visible); });
    connect(m_lessons, &LessonDock::stepChanged, this, [this, lessonsDock] {
        // After the step's widgets have their texts and sizes.
        QMetaObject::invokeMethod(
            this, [this, lessonsDock] { lessonsWideEnough(lessonsDock); }, Qt::QueuedConnection);
    });
    auto* stepperDock = dock(tr("All-reduce, step by step"), "allreduceDock", m_stepper, Qt::BottomDockWidgetArea);
    auto* explainDock = dock(tr("Explain"), "explainDock", m_explain, Qt::BottomDockWidgetArea);
    tabifyDockWidget(findChild<QDockWidget*>(QStringLiteral("runsDock")), stepperDock);
    tabifyDockWidget(stepperDock, explainDock);
    findChild<QDockWidget*>(QStringLiteral("scheduleDock"))->raise();

    // Every check is evaluated again when something it may read changes.
    auto refresh = [this] { m_lessons->refresh(); };
    connect(m_monitor, &RunMonitor::finished, m_lessons, refresh);
    connect(m_monitor, &RunMonitor::statsChanged, m_lessons, refresh);
    connect(m_monitor, &RunMonitor::stepAdded, m_lessons, refresh);
    connect(m_monitor, &RunMonitor::reset, m_lessons, refresh);
    connect(m_stepper, &AllReduceStepper::stepChanged, m_lessons, refresh);
    connect(m_explain, &ExplainDock::topicChanged, m_lessons, refresh);
    for (auto* d : findChildren<QDockWidget*>())
        connect(d, &QDockWidget::visibilityChanged, m_lessons, refresh);
    connect(m_monitor, &RunMonitor::statsChanged, m_explain, &ExplainDock::refresh);

    addMeasuredExplanations();
    // "Explain this number" on every figure of the Prediction panel.
    const QStringList figures { "step", "tokens", "tflops", "mfu", "bubble", "memory" };
    for (const auto& [key, caption] : ExplainDock::topics()) {
        QLabel* label = m_prediction->label(key);
        if (!label)
            continue;
        if (figures.contains(key))
            label->setObjectName(QStringLiteral("figure.") + key);
        label->setContextMenuPolicy(Qt::CustomContextMenu);
        connect(label, &QWidget::customContextMenuRequested, this, [this, label, key = key](const QPoint& pos) {
            QMenu menu;
            menu.addAction(tr("Explain this number"), this, [this, key] {
                auto* d = findChild<QDockWidget*>(QStringLiteral("explainDock"));
                d->show();
                d->raise();
                m_explain->showTopic(key);
            });
            menu.exec(label->mapToGlobal(pos));
        });
    }
}

void MainWindow::addMeasuredExplanations()
{
    // ... and on the measured figures: the metrics plots' context menus.
    const std::pair<QWidget*, const char*> plots[] = { { m_metrics->lossPlot(), "measured.tokens" },
        { m_metrics->bubblePlot(), "measured.bubble" }, { m_metrics->collectivePlot(), "measured.busbw" } };
    for (const auto& [plot, key] : plots) {
        auto* action = new QAction(tr("Explain this number"), plot);
        connect(action, &QAction::triggered, this, [this, topic = QString::fromLatin1(key)] {
            auto* d = findChild<QDockWidget*>(QStringLiteral("explainDock"));
            d->show();
            d->raise();
            m_explain->showTopic(topic);
        });
        plot->addAction(action);
    }
}

QString MainWindow::explainText(const QString& key) const
{
    if (key == QLatin1String("measured.bubble"))
        return explain::measuredBubble(m_monitor->layout(), m_monitor->stats());
    if (key == QLatin1String("measured.busbw"))
        return explain::busBandwidth(m_monitor->stats());
    if (key == QLatin1String("measured.tokens"))
        return explain::measuredTokens(m_monitor->layout(), m_monitor->stats());
    // Memory at length: by kind and by pipeline stage (its tooltip leaves the stages out).
    const LayoutAnalysis& a = m_runner->latest();
    if (key == QLatin1String("memory") && a.prediction && a.layout == m_doc->layout())
        return explain::memoryBreakdown(a.layout, *a.prediction);
    const QLabel* label = m_prediction->label(key);
    return label ? label->toolTip() : QString();
}

bool MainWindow::startLesson(const QString& id, QString* error)
{
    auto* d = findChild<QDockWidget*>(QStringLiteral("lessonsDock"));
    d->show();
    d->raise();
    if (m_lessons->startLesson(id))
        return true;
    QStringList ids;
    for (const auto& l : m_lessons->lessons())
        ids << l.id;
    if (error)
        *error = tr("no lesson \"%1\"; the lessons are: %2").arg(id, ids.join(QStringLiteral(", ")));
    return false;
}

} // namespace loom::app
