#pragma once

#include "views/teaching/Lesson.h"

#include <functional>

class QMainWindow;
class QWidget;

namespace loom::views {

class AllReduceStepper;
class AnalysisRunner;
class ExplainDock;
class LayoutDocument;
class RunMonitor;
class RunPanel;
class StrategyPanel;
class TopologyView;

// What a lesson sees of the workbench and acts on: the window's parts, by pointer (the window owns them).
struct LessonContext {
    QMainWindow* window = nullptr;
    LayoutDocument* document = nullptr;
    AnalysisRunner* analysis = nullptr;
    StrategyPanel* strategy = nullptr;
    RunPanel* runPanel = nullptr;
    RunMonitor* monitor = nullptr;
    TopologyView* map = nullptr;
    AllReduceStepper* stepper = nullptr;
    ExplainDock* explain = nullptr;
    std::function<void()> recommend; // opens the Recommend dialog and starts its search
    // Runs with ids up to this one belong to before the lesson started: their figures are not the lesson's.
    qint64 runBaseline = 0;
};

// The live state as lesson facts: the layout and its prediction (when the analysis shown is the current
// layout's), the run shown (when it started after the lesson), the stepper, the docks in view and the
// Explain dock's topic.
Facts gatherFacts(const LessonContext& context);

// Performs a step's action through the widgets, as a learner would: chooses the value in the Strategy
// panel's control, raises a dock, sets the steps and presses Run, drops blocks on a device, steps the
// all-reduce stepper, opens a figure's explanation, or runs Recommend and applies its first layout.
// False with the reason when it cannot be done.
bool performLessonAction(const LessonContext& context, const LessonAction& action, QString* why);

// The widget of the window a lesson names (lessonWidgetNames()), or null.
QWidget* lessonWidget(const LessonContext& context, const QString& name);

} // namespace loom::views
