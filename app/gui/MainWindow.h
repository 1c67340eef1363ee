#pragma once

#include "engine/plan/ProfileResolver.h"

#include <QMainWindow>

#include <memory>

class QAction;
class QDockWidget;
class QLabel;
class QDialog;
class QMenu;

namespace loom::profiles {
class Store;
}

namespace loom::views {
class AnalysisRunner;
class MetricsPanel;
class RunMonitor;
class RunPanel;
class RunsPanel;
class RunTimelinePanel;
class LayerModel;
class LayerPalette;
class LayoutDocument;
class MapLegend;
class PredictionPanel;
class StrategyPanel;
class TimelineView;
class TopologyScene;
class TopologyView;
struct LayoutAnalysis;
class AllReduceStepper;
class ExplainDock;
class LessonDock;
struct LessonContext;
} // namespace loom::views

namespace loom::app {

class Bridges;

// The workbench's design side: the layer palette, topology map, strategy and prediction panels and the
// simulated schedule as rearrangeable docks around the map, wired to one LayoutDocument (undo/redo, files)
// and an AnalysisRunner that re-validates and re-predicts on a worker thread after every edit.
class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    // `profiles` resolves the model and cluster names of layout files; it must outlive the window.
    // `store` (may be null: no runs then) holds runs; both must outlive the window.
    explicit MainWindow(
        const plan::ProfileResolver& profiles, profiles::Store* store = nullptr, QWidget* parent = nullptr);
    ~MainWindow() override;

    // Opens a layout file (or a ":/" resource); false with a message box... unless `error` is given.
    bool openFile(const QString& path, QString* error = nullptr);
    // Starts a new, unsaved layout from the built-in example.
    void newLayout();
    bool saveTo(const QString& path, QString* error = nullptr);

    views::LayoutDocument* document() const { return m_doc; }
    views::AnalysisRunner* analysis() const { return m_runner; }
    views::StrategyPanel* strategyPanel() const { return m_strategy; }
    views::PredictionPanel* predictionPanel() const { return m_prediction; }
    views::TopologyView* topologyView() const { return m_map; }
    views::MapLegend* mapLegend() const { return m_legend; }
    views::LayerPalette* layerPalette() const { return m_palette; }
    views::TimelineView* scheduleView() const { return m_schedule; }
    QLabel* validationLabel() const { return m_validation; }
    views::RunMonitor* runMonitor() const { return m_monitor; }
    views::RunPanel* runPanel() const { return m_runPanel; }
    views::RunTimelinePanel* runTimeline() const { return m_runTimeline; }
    views::MetricsPanel* metricsPanel() const { return m_metrics; }
    views::RunsPanel* runsPanel() const { return m_runs; }
    Bridges* bridges() const { return m_bridges; }
    // Shows a stored run in the timeline and metrics docks.
    bool openRun(qint64 runId, QString* error = nullptr);
    void compareRuns(qint64 left, qint64 right);
    QStringList recentFiles() const;
    // Teaching: the Lessons dock, the all-reduce stepper and the Explain dock.
    views::LessonDock* lessonDock() const { return m_lessons; }
    views::AllReduceStepper* allReduceStepper() const { return m_stepper; }
    views::ExplainDock* explainDock() const { return m_explain; }
    // Starts lesson `id` (loom --lesson ID); false with the known ids in `error` when there is none.
    bool startLesson(const QString& id, QString* error = nullptr);

    // The welcome (examples and lessons) when the settings have never shown it, else nullptr; shown once.
    QDialog* welcomeOnFirstStart();
    void showLessons();

    static constexpr const char* kExample = ":/examples/tiny-local.json";

signals:
    // Emitted after each analysis that matches the current layout has been shown.
    void analysisShown();

protected:
    void closeEvent(QCloseEvent* event) override;
    void showEvent(QShowEvent* event) override; // the first show fits the frame and the docks (MainWindowFit.cpp)

private:
    void buildActions();
    void buildDocks();
    void buildExamplesMenu(QMenu* file, QAction* before); // File ▸ Examples (MainWindowWelcome.cpp)
    void sizeToScreen(); // MainWindowFit.cpp
    void placeDocks();
    void roomForLessons(QDockWidget* lessons);
    void lessonsWideEnough(QDockWidget* lessons);
    void lessonsShown(QDockWidget* lessons, bool visible);
    QDockWidget* dock(const QString& title, const char* name, QWidget* widget, Qt::DockWidgetArea area);
    void layoutChanged();
    void showAnalysis(const views::LayoutAnalysis& analysis);
    void updateTitle();
    bool maybeSave();
    void open();
    bool save();
    bool saveAs();
    void recommend();
    void addRecent(const QString& path);
    void buildRunSide();
    void fillRecentMenu();
    void buildTeaching();
    QString explainText(const QString& key) const;
    void addMeasuredExplanations();

    const plan::ProfileResolver& m_profiles;
    views::LayoutDocument* m_doc;
    views::AnalysisRunner* m_runner;
    views::LayerModel* m_layers;
    views::LayerPalette* m_palette;
    views::TopologyScene* m_scene;
    views::TopologyView* m_map;
    views::MapLegend* m_legend;
    views::StrategyPanel* m_strategy;
    views::PredictionPanel* m_prediction;
    views::TimelineView* m_schedule;
    QLabel* m_validation;
    profiles::Store* m_store;
    views::RunMonitor* m_monitor = nullptr;
    views::RunPanel* m_runPanel = nullptr;
    views::RunTimelinePanel* m_runTimeline = nullptr;
    views::MetricsPanel* m_metrics = nullptr;
    views::RunsPanel* m_runs = nullptr;
    QLabel* m_timing;
    QLabel* m_scheduleNote = nullptr; // "showing micro-batches 1–N of M" over a long step's schedule
    QMenu* m_recentMenu = nullptr;
    QMenu* m_viewMenu = nullptr;
    QMenu* m_examplesMenu = nullptr;
    bool m_fitted = false; // the first show has fitted the window to the screen
    bool m_stateRestored = false; // the docks are as the settings remembered them
    views::LessonDock* m_lessons = nullptr;
    views::AllReduceStepper* m_stepper = nullptr;
    views::ExplainDock* m_explain = nullptr;
    std::shared_ptr<views::LessonContext> m_lessonContext; // shared with the Lessons dock's hooks
    Bridges* m_bridges = nullptr;
};

} // namespace loom::app
