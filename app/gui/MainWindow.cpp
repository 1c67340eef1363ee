#include "app/gui/MainWindow.h"
#include "app/gui/Bridges.h"
#include "views/FileDialogs.h"
#include "views/FocusedInput.h"
#include "views/Units.h"

#include "engine/profiles/BuiltinProfiles.h"
#include "views/CompareDialog.h"
#include "views/Explain.h"
#include "views/ExplainDock.h"
#include "views/LayerModel.h"
#include "views/LayerPalette.h"
#include "views/LayoutAnalysis.h"
#include "views/LayoutDocument.h"
#include "views/LayoutEdits.h"
#include "views/MapLegend.h"
#include "views/MetricsPanel.h"
#include "views/PredictionPanel.h"
#include "views/RecommendDialog.h"
#include "views/RunHistoryModel.h"
#include "views/RunMonitor.h"
#include "views/RunPanel.h"
#include "views/RunTimelinePanel.h"
#include "views/RunsPanel.h"
#include "views/StrategyPanel.h"
#include "views/TimelinePane.h"
#include "views/TimelineView.h"
#include "views/TopologyScene.h"
#include "views/TopologyView.h"
#include "views/teaching/AllReduceStepper.h"
#include "views/teaching/LessonActions.h"
#include "views/teaching/LessonDock.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDockWidget>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QScrollArea>
#include <QSettings>
#include <QStatusBar>
#include <QToolBar>
#include <QUndoStack>
#include <QVBoxLayout>

namespace loom::app {

using namespace loom::views;

namespace {
constexpr int kMaxRecent = 8;

QScrollArea* scrolled(QWidget* w)
{
    auto* area = new QScrollArea;
    area->setWidget(w);
    area->setWidgetResizable(true);
    area->setFrameShape(QFrame::NoFrame);
    return area;
}
} // namespace

MainWindow::MainWindow(const plan::ProfileResolver& profiles, profiles::Store* store, QWidget* parent)
    : QMainWindow(parent)
    , m_profiles(profiles)
    , m_doc(new LayoutDocument(this))
    , m_runner(new AnalysisRunner(this))
    , m_layers(new LayerModel(this))
    , m_scene(new TopologyScene(this))
{
    setObjectName(QStringLiteral("LoomMainWindow"));
    setWindowIcon(QIcon::fromTheme(QStringLiteral("loom"), QIcon(QStringLiteral(":/icons/loom.svg"))));
    m_map = new TopologyView(m_scene);
    m_legend = new MapLegend;
    auto* central = new QWidget;
    auto* centralLayout = new QVBoxLayout(central);
    centralLayout->setContentsMargins(0, 0, 0, 0);
    centralLayout->setSpacing(0);
    centralLayout->addWidget(m_map, 1);
    centralLayout->addWidget(m_legend);
    setCentralWidget(central);
    m_palette = new LayerPalette(m_layers);
    m_strategy = new StrategyPanel(&m_profiles);
    m_prediction = new PredictionPanel;
    m_schedule = new TimelineView;
    m_store = store;
    buildDocks();
    buildRunSide();
    buildTeaching();
    guardInputs(this); // wheels change a box only with focus; Ctrl+Z in a box undoes the layout
    buildActions();

    m_validation = new QLabel;
    m_validation->setTextFormat(Qt::RichText);
    m_timing = new QLabel;
    statusBar()->addPermanentWidget(m_timing);
    statusBar()->addPermanentWidget(m_validation);

    connect(m_doc, &LayoutDocument::layoutChanged, this, &MainWindow::layoutChanged);
    connect(m_doc, &LayoutDocument::modifiedChanged, this, &MainWindow::updateTitle);
    connect(m_doc, &LayoutDocument::filePathChanged, this, &MainWindow::updateTitle);
    connect(m_runner, &AnalysisRunner::analysisReady, this, &MainWindow::showAnalysis);
    connect(m_strategy, &StrategyPanel::editRequested, this,
        [this](const plan::Layout& next, const QString& text, int mergeId) { m_doc->edit(next, text, mergeId); });
    connect(
        m_map, &TopologyView::blocksDropped, this, [this](std::int64_t rank, std::int64_t first, std::int64_t last) {
            const EditResult r = dropBlocksOnRank(m_doc->layout(), rank, first, last);
            if (!r.ok()) {
                statusBar()->showMessage(
                    tr("Cannot move %1 there: %2").arg(blocksText(first, last)).arg(QString::fromStdString(r.refusal)),
                    10000);
                return;
            }
            m_doc->edit(*r.layout, tr("Move %1 to rank %2's stage").arg(blocksText(first, last)).arg(rank));
        });
    connect(
        m_map, &TopologyView::dropRefused, this, [this](const QString& why) { statusBar()->showMessage(why, 8000); });
    connect(m_prediction, &PredictionPanel::recommendRequested, this, &MainWindow::recommend);

    QSettings settings;
    restoreGeometry(settings.value(QStringLiteral("window/geometry")).toByteArray());
    m_stateRestored = restoreState(settings.value(QStringLiteral("window/state")).toByteArray());
    if (!m_stateRestored)
        sizeToScreen();
    fillRecentMenu();
}

MainWindow::~MainWindow() = default;

QDockWidget* MainWindow::dock(const QString& title, const char* name, QWidget* widget, Qt::DockWidgetArea area)
{
    auto* d = new QDockWidget(title, this);
    d->setObjectName(QString::fromLatin1(name)); // saveState() finds docks by name
    // A bottom panel scrolls inside its own dock rather than setting the dock's minimum: the metrics' plots
    // and the timeline's tool row held the bottom area at ~440 px tall and the window at ~1390 px wide.
    d->setWidget(area == Qt::BottomDockWidgetArea ? scrolled(widget) : widget);
    addDockWidget(area, d);
    return d;
}

void MainWindow::buildDocks()
{
    // Strategy and Prediction take the window's whole height on the right; the bottom panels span the rest.
    setCorner(Qt::BottomRightCorner, Qt::RightDockWidgetArea);
    dock(tr("Layers"), "layersDock", m_palette, Qt::LeftDockWidgetArea);
    auto* strategy = dock(tr("Strategy"), "strategyDock", scrolled(m_strategy), Qt::RightDockWidgetArea);
    auto* prediction = dock(tr("Prediction"), "predictionDock", scrolled(m_prediction), Qt::RightDockWidgetArea);
    auto* schedulePane = new TimelinePane(m_schedule);
    m_scheduleNote = new QLabel; // which micro-batches a long step's timeline shows (showAnalysis)
    m_scheduleNote->setObjectName(QStringLiteral("scheduleNote"));
    schedulePane->bar()->insertWidget(0, m_scheduleNote); // first: the bar's far end is cut off in a narrow dock
    dock(tr("Schedule (simulated)"), "scheduleDock", schedulePane, Qt::BottomDockWidgetArea);
    splitDockWidget(strategy, prediction, Qt::Vertical); // their sizes: placeDocks, at the first show
}

void MainWindow::buildRunSide()
{
    m_monitor = new RunMonitor(m_store, this);
    m_runPanel = new RunPanel(m_monitor);
    m_runTimeline = new RunTimelinePanel(m_monitor);
    m_metrics = new MetricsPanel(m_monitor);
    m_runs = new RunsPanel(m_store);
    auto* schedule = findChild<QDockWidget*>(QStringLiteral("scheduleDock"));
    // Scrolled, so that the Run panel's form does not hold the left side tall when Lessons opens below it.
    auto* run = dock(tr("Run"), "runDock", scrolled(m_runPanel), Qt::LeftDockWidgetArea);
    tabifyDockWidget(findChild<QDockWidget*>(QStringLiteral("layersDock")), run);
    findChild<QDockWidget*>(QStringLiteral("layersDock"))->raise();
    auto* timeline = dock(tr("Timeline (measured)"), "timelineDock", m_runTimeline, Qt::BottomDockWidgetArea);
    auto* metrics = dock(tr("Metrics"), "metricsDock", m_metrics, Qt::BottomDockWidgetArea);
    auto* runs = dock(tr("Runs"), "runsDock", m_runs, Qt::BottomDockWidgetArea);
    tabifyDockWidget(schedule, timeline);
    tabifyDockWidget(timeline, metrics);
    tabifyDockWidget(metrics, runs);
    schedule->raise();
    connect(m_monitor, &RunMonitor::started, this, [this, timeline] {
        timeline->raise();
        m_runs->model()->refresh();
    });
    connect(
        m_monitor, &RunMonitor::finished, this, [this](profiles::RunState state, const QString& cause, const QString&) {
            m_runs->model()->refresh();
            statusBar()->showMessage(tr("Run %1 %2%3")
                                         .arg(m_monitor->runId())
                                         .arg(profiles::toString(state))
                                         .arg(cause.isEmpty() ? QString() : QStringLiteral(": ") + cause),
                15000);
        });
    connect(m_runs, &RunsPanel::openRequested, this, [this](qint64 id) {
        statusBar()->showMessage(tr("Loading run %1…").arg(id));
        m_monitor->openInBackground(id);
    });
    connect(m_monitor, &RunMonitor::openFailed, this,
        [this](const QString& why) { statusBar()->showMessage(tr("Cannot open the run: %1").arg(why), 15000); });
    connect(m_monitor, &RunMonitor::reset, this, [this] {
        if (!m_monitor->running() && m_monitor->runId() > 0) {
            findChild<QDockWidget*>(QStringLiteral("metricsDock"))->raise();
            statusBar()->showMessage(
                tr("Showing run %1 (%2)").arg(m_monitor->runId()).arg(profiles::toString(m_monitor->state())), 8000);
        }
    });
    connect(m_runs, &RunsPanel::compareRequested, this, &MainWindow::compareRuns);
}

bool MainWindow::openRun(qint64 runId, QString* error)
{
    QString why;
    if (!m_monitor->open(runId, &why)) {
        if (error)
            *error = why;
        else
            QMessageBox::warning(this, tr("Open run"), why);
        return false;
    }
    findChild<QDockWidget*>(QStringLiteral("metricsDock"))->raise();
    statusBar()->showMessage(tr("Showing run %1 (%2)").arg(runId).arg(profiles::toString(m_monitor->state())), 8000);
    return true;
}

void MainWindow::compareRuns(qint64 left, qint64 right)
{
    auto* dialog = new CompareDialog(m_store, left, right, this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    dialog->show();
}

void MainWindow::buildActions()
{
    auto* file = menuBar()->addMenu(tr("&File"));
    auto* newAct = file->addAction(QIcon::fromTheme(QStringLiteral("document-new")), tr("&New"), this, [this] {
        if (maybeSave())
            newLayout();
    });
    newAct->setShortcut(QKeySequence::New);
    auto* openAct
        = file->addAction(QIcon::fromTheme(QStringLiteral("document-open")), tr("&Open…"), this, &MainWindow::open);
    openAct->setShortcut(QKeySequence::Open);
    m_recentMenu = file->addMenu(tr("Open &Recent"));
    buildExamplesMenu(file, m_recentMenu->menuAction());
    auto* saveAct
        = file->addAction(QIcon::fromTheme(QStringLiteral("document-save")), tr("&Save"), this, &MainWindow::save);
    saveAct->setShortcut(QKeySequence::Save);
    auto* saveAsAct = file->addAction(tr("Save &As…"), this, &MainWindow::saveAs);
    saveAsAct->setShortcut(QKeySequence(QStringLiteral("Ctrl+Shift+S")));
    file->addSeparator();
    auto* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
    quit->setShortcut(QKeySequence::Quit);
    m_bridges = new Bridges(this, m_doc); // File → Export To, File → Open Trace
    m_bridges->addActions(file, quit);

    auto* edit = menuBar()->addMenu(tr("&Edit"));
    QAction* undo = m_doc->undoStack()->createUndoAction(this, tr("&Undo"));
    undo->setShortcut(QKeySequence(QStringLiteral("Ctrl+Z")));
    undo->setIcon(QIcon::fromTheme(QStringLiteral("edit-undo")));
    QAction* redo = m_doc->undoStack()->createRedoAction(this, tr("&Redo"));
    redo->setShortcuts({ QKeySequence(QStringLiteral("Ctrl+Shift+Z")), QKeySequence(QStringLiteral("Ctrl+Y")) });
    redo->setIcon(QIcon::fromTheme(QStringLiteral("edit-redo")));
    // The menu says what would be undone; the toolbar's buttons keep one short label, so that the buttons
    // after them do not move as the undo text grows.
    undo->setIconText(tr("Undo"));
    redo->setIconText(tr("Redo"));
    edit->addAction(undo);
    edit->addAction(redo);

    m_viewMenu = menuBar()->addMenu(tr("&View"));
    for (auto* d : findChildren<QDockWidget*>())
        m_viewMenu->addAction(d->toggleViewAction());
    m_viewMenu->addSeparator();
    m_viewMenu->addAction(tr("&Fit the map"), m_map, &TopologyView::fitAll);

    auto* tools = menuBar()->addMenu(tr("&Plan"));
    auto* recommendAct = tools->addAction(tr("&Recommend a layout…"), this, &MainWindow::recommend);

    auto* runMenu = menuBar()->addMenu(tr("&Run"));
    auto* runAct
        = runMenu->addAction(QIcon::fromTheme(QStringLiteral("media-playback-start")), tr("&Run"), this, [this] {
              findChild<QDockWidget*>(QStringLiteral("runDock"))->raise();
              m_runPanel->run();
          });
    runAct->setShortcut(QKeySequence(QStringLiteral("Ctrl+R")));
    auto* cancelAct = runMenu->addAction(
        QIcon::fromTheme(QStringLiteral("process-stop")), tr("&Cancel the run"), m_monitor, &RunMonitor::cancel);
    cancelAct->setEnabled(false);
    connect(m_monitor, &RunMonitor::started, cancelAct, [cancelAct] { cancelAct->setEnabled(true); });
    connect(m_monitor, &RunMonitor::finished, cancelAct, [cancelAct] { cancelAct->setEnabled(false); });

    auto* bar = addToolBar(tr("Main"));
    bar->setObjectName(QStringLiteral("mainToolBar"));
    bar->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    bar->addAction(newAct);
    bar->addAction(openAct);
    bar->addAction(saveAct);
    bar->addSeparator();
    bar->addAction(undo);
    bar->addAction(redo);
    bar->addSeparator();
    bar->addAction(recommendAct);
    bar->addSeparator();
    bar->addAction(runAct);
    bar->addAction(cancelAct);
}

void MainWindow::newLayout()
{
    if (!m_doc->open(QString::fromLatin1(kExample), m_profiles, nullptr))
        return;
    plan::Layout l = m_doc->layout();
    l.name = "untitled";
    m_doc->reset(l);
}

bool MainWindow::openFile(const QString& path, QString* error)
{
    QString why;
    if (!m_doc->open(path, m_profiles, &why)) {
        if (error)
            *error = why;
        else
            QMessageBox::warning(this, tr("Open layout"), why);
        return false;
    }
    if (!path.startsWith(QLatin1Char(':')))
        addRecent(QFileInfo(path).absoluteFilePath());
    const auto errors = m_doc->readDiagnostics().errors();
    if (!errors.empty())
        statusBar()->showMessage(tr("Opened with %1 problem(s) to fix; see the status bar.").arg(errors.size()), 10000);
    m_map->fitAll();
    return true;
}

bool MainWindow::saveTo(const QString& path, QString* error)
{
    QString why;
    if (!m_doc->save(path, &why)) {
        if (error)
            *error = why;
        else
            QMessageBox::warning(this, tr("Save layout"), why);
        return false;
    }
    addRecent(QFileInfo(path).absoluteFilePath());
    statusBar()->showMessage(tr("Saved %1").arg(path), 5000);
    return true;
}

void MainWindow::open()
{
    if (!maybeSave())
        return;
    const QString path = views::openFileName(this, tr("Open layout"), QString(), tr("Layouts (*.json);;All files (*)"));
    if (!path.isEmpty())
        openFile(path);
}

bool MainWindow::save()
{
    if (m_doc->filePath().isEmpty())
        return saveAs();
    return saveTo(m_doc->filePath());
}

bool MainWindow::saveAs()
{
    QString suggested = m_doc->filePath();
    if (suggested.isEmpty())
        suggested = QString::fromStdString(m_doc->layout().name) + QStringLiteral(".json");
    const QString path = views::saveFileName(this, tr("Save layout"), suggested, tr("Layouts (*.json)"));
    return !path.isEmpty() && saveTo(path);
}

bool MainWindow::maybeSave()
{
    if (!m_doc->isModified())
        return true;
    const auto answer = QMessageBox::warning(this, tr("Unsaved changes"),
        tr("%1 has changes that are not saved. Save them?").arg(m_doc->displayName()),
        QMessageBox::Save | QMessageBox::Discard | QMessageBox::Cancel);
    if (answer == QMessageBox::Save)
        return save();
    return answer == QMessageBox::Discard;
}

void MainWindow::closeEvent(QCloseEvent* event)
{
    if (m_monitor->running()
        && QMessageBox::question(this, tr("A run is in progress"),
               tr("Run %1 is still training. Cancel it and quit?").arg(m_monitor->runId()))
            != QMessageBox::Yes) {
        event->ignore();
        return;
    }
    m_monitor->cancel();
    if (!maybeSave()) {
        event->ignore();
        return;
    }
    QSettings settings;
    settings.setValue(QStringLiteral("window/geometry"), saveGeometry());
    settings.setValue(QStringLiteral("window/state"), saveState());
    event->accept();
}

void MainWindow::layoutChanged()
{
    const plan::Layout& l = m_doc->layout();
    m_strategy->setLayout(l);
    m_layers->setLayout(l);
    // Until the new prediction arrives, keep the last memory bars when they describe the same stages.
    const auto& last = m_runner->latest();
    const bool samePipeline = last.prediction && last.layout.parallel.pp == l.parallel.pp;
    m_scene->show(l, samePipeline ? &*last.prediction : nullptr);
    m_legend->setLayout(l, m_scene->nodeCount());
    m_stepper->setLayout(l); // after the scene: a new shape rebuilds it, and the stepper redraws its arrows
    m_validation->setText(tr("checking…"));
    m_runner->request(l);
    updateTitle();
}

void MainWindow::showAnalysis(const LayoutAnalysis& a)
{
    if (!(a.layout == m_doc->layout()))
        return; // an older edit's analysis; the current one is on its way
    m_prediction->setAnalysis(a);
    m_scene->show(a.layout, a.prediction ? &*a.prediction : nullptr);
    TimelineData timeline;
    if (a.prediction)
        timeline.setEvents(a.prediction->events);
    m_schedule->setTimeline(std::move(timeline));
    // A long step's timeline holds its first micro-batches only (a shortened step; the figures are the whole
    // step's): say which, so that the picture is not read as the step.
    const std::int64_t m = a.layout.parallel.microBatches();
    const std::int64_t shown = a.prediction ? a.prediction->eventMicroBatches : m;
    m_scheduleNote->setVisible(shown > 0 && shown < m);
    m_scheduleNote->setText(tr("showing micro-batches 1–%1 of %2").arg(shown).arg(m));
    m_scheduleNote->setToolTip(tr("The timeline replays a shortened step of the first %1 micro-batches, ending with "
                                  "its DP and optimizer work; the step time and the figures are the whole step's "
                                  "(%2 micro-batches).")
                                   .arg(shown)
                                   .arg(m));
    m_schedule->setRanksPerNode(a.layout.cluster.autoDevices() ? 1 << 30 : int(a.layout.cluster.devicesPerNode));
    const auto errors = a.diagnostics.errors();
    const auto warnings = a.diagnostics.warnings();
    QStringList all;
    for (const auto& p : a.diagnostics.problems())
        all << QString::fromStdString((p.severity == plan::Severity::Error ? "error: " : "warning: ") + p.message)
                   .toHtmlEscaped();
    if (!errors.empty())
        m_validation->setText(tr("<span style=\"color:#C01F1F\">✗ %1 problem(s)</span>").arg(errors.size()));
    else if (!warnings.empty())
        m_validation->setText(tr("<span style=\"color:#B06000\">✓ valid, %1 warning(s)</span>").arg(warnings.size()));
    else
        m_validation->setText(tr("<span style=\"color:#2E7D32\">✓ valid</span>"));
    // Always rich text: with one problem and no <br>, Qt would show the escaped "dp &gt; 1" as it is.
    m_validation->setToolTip(
        all.isEmpty() ? tr("No problems.") : QStringLiteral("<p>%1</p>").arg(all.join(QStringLiteral("<br>"))));
    if (!errors.empty())
        statusBar()->showMessage(QString::fromStdString(errors.front().message), 15000);
    m_timing->setText(tr("analysed in %1 ms").arg(QString::number(a.elapsedMs, 'f', 0)));
    m_runPanel->setLayout(
        a.layout, errors.empty(), errors.empty() ? QString() : QString::fromStdString(errors.front().message));
    m_explain->refresh();
    m_lessons->refresh();
    emit analysisShown();
}

void MainWindow::updateTitle()
{
    setWindowTitle(QStringLiteral("%1[*] — Loom").arg(m_doc->displayName()));
    setWindowModified(m_doc->isModified());
}

void MainWindow::recommend()
{
    auto* dialog = new RecommendDialog(m_doc->layout(), this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    connect(dialog, &RecommendDialog::layoutChosen, this,
        [this](const plan::Layout& l) { m_doc->edit(l, tr("Apply a recommended layout")); });
    dialog->open();
    dialog->start();
}

QStringList MainWindow::recentFiles() const
{
    return QSettings().value(QStringLiteral("recentFiles")).toStringList();
}

void MainWindow::addRecent(const QString& path)
{
    QStringList files = recentFiles();
    files.removeAll(path);
    files.prepend(path);
    while (files.size() > kMaxRecent)
        files.removeLast();
    QSettings().setValue(QStringLiteral("recentFiles"), files);
    fillRecentMenu();
}

void MainWindow::fillRecentMenu()
{
    if (!m_recentMenu)
        return;
    m_recentMenu->clear();
    const QStringList files = recentFiles();
    for (const QString& f : files)
        m_recentMenu
            ->addAction(QFileInfo(f).fileName(), this,
                [this, f] {
                    if (maybeSave())
                        openFile(f);
                })
            ->setToolTip(f);
    m_recentMenu->setEnabled(!files.isEmpty());
}

} // namespace loom::app
