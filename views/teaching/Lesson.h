#pragma once

#include "engine/plan/CostModel.h"
#include "engine/plan/Layout.h"
#include "engine/plan/ProfileResolver.h"

#include <QByteArray>
#include <QJsonValue>
#include <QString>
#include <QStringList>

#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace loom::views {

// A lesson is data (resources/lessons/*.json, compiled in under :/lessons/): a text, a starting layout and
// 2 to 5 steps. Each step names what the learner does in the real window (its `action`, which the dock's
// "Show me" and the tests perform through the widgets), the widget it is about (highlighted), and a check
// that Loom evaluates on the live state. Checks use a small typed vocabulary of facts (lessonFacts()): a
// fact, a comparison and a value, or "all" of several. Nothing in a lesson file is ever executed.
// The format is described in docs/lessons.md.

// A fact's value: a number, a yes/no or a word ("1f1b", "finished").
using FactValue = std::variant<double, bool, std::string>;
// The live state as facts, by name ("predicted.bubble" -> 0.143). A fact that is absent (no prediction, no
// run yet) makes every check on it fail with the reason.
using Facts = std::map<std::string, FactValue>;

enum class FactType { Number, Bool, Text };

struct FactInfo {
    const char* name;
    FactType type;
    std::string meaning; // for the documentation and for messages; choices list the layout's words
};

// Every fact a check may name.
const std::vector<FactInfo>& lessonFacts();
// Also finds a fact by the name it had before facts took the layout file's field paths ("layout.microBatch"
// for "parallel.micro_batch"); canonicalFactName() gives the current name.
const FactInfo* findFact(const std::string& name);
std::string canonicalFactName(const std::string& name);

struct LessonCheck {
    std::string fact; // a leaf: fact op value
    std::string op; // <, <=, >, >=, ==, !=
    FactValue value;
    std::vector<LessonCheck> all; // a conjunction when not empty (fact is then empty)
};

struct CheckResult {
    bool pass = false;
    QString detail; // "predicted.bubble is 14.3 %, needs < 10 %" for each leaf, joined
};

// Evaluates a (validated) check on the facts. Pure.
CheckResult evaluateCheck(const LessonCheck& check, const Facts& facts);

// What the learner does; performed through the widgets by LessonDock::perform().
struct LessonAction {
    enum class Kind { Set, Open, Run, Drop, Stepper, Explain, Recommend };
    Kind kind = Kind::Set;
    QString target; // Set: a Strategy widget's name; Open: a dock's short name; Explain: a figure key;
                    // Stepper: "dp" or "tp"
    QJsonValue value; // Set: the value to choose; Stepper: the algorithm ("ring", "hierarchical")
    int steps = 0; // Run: training steps; Stepper: steps to go forward
    std::int64_t first = 0, last = 0, rank = 0; // Drop: blocks [first, last] onto rank's device
};

struct LessonQuestion {
    QString text;
    QStringList choices;
    int answer = 0;
    QString explanation;
};

struct LessonStep {
    QString instruction; // what to do, in words
    QString widget; // the objectName of the widget to highlight (lessonWidgetNames())
    LessonAction action;
    LessonCheck check;
    QString pass, fail; // feedback
    std::optional<LessonQuestion> question;
};

struct Lesson {
    QString id, title, summary, text; // text: rich text (HTML subset) with the lesson's formulas
    int order = 0;
    plan::Layout layout;
    std::vector<LessonStep> steps;
};

// Lesson texts (its text; a step's do, pass and fail) print figures as placeholders filled from the facts the
// checks read: {{FACT}} the value now, {{before:FACT}} when the step began, {{start:FACT}} when the lesson
// began; a step's texts also {{action.value}}, {{action.steps}}, {{action.first}}, {{action.last}} and
// {{action.rank}} (what its action sets). A fact not known yet reads "…".
struct TextFacts {
    const Facts* now = nullptr;
    const Facts* before = nullptr;
    const Facts* start = nullptr;
    const LessonAction* action = nullptr;
};
QString fillLessonText(const QString& text, const TextFacts& facts);
// What is wrong with a text's placeholders (unknown facts, a misspelt "before:", stray braces); empty when
// nothing. `inStep`: the text belongs to a step, whose action it may name.
QStringList placeholderProblems(const QString& text, bool inStep);

// The objectNames a lesson may highlight: the workbench sets them (tests check that each names exactly one
// widget of the window).
const QStringList& lessonWidgetNames();
// The docks an "open" action may raise, by short name ("schedule" -> "scheduleDock").
const QStringList& lessonDockNames();
// The Strategy panel widgets a "set" action may change (also the names earlier lesson files gave "set").
const QStringList& lessonSettableNames();
// The same settings by their layout file field paths ("parallel.micro_batch", "comm.allreduce"), the names a
// lesson's "set" uses.
const QStringList& lessonSettableFields();

// The largest lesson file read.
constexpr qsizetype kMaxLessonBytes = 256 * 1024;

// Reads and validates one lesson file's text. On failure returns nullopt with every problem in `errors`,
// each naming the file and the field ("pipeline-bubble.json: steps[1].check.fact: unknown fact
// \"predicted.bubbel\"; known: ..."). Never throws.
std::optional<Lesson> readLesson(
    const QByteArray& text, const QString& fileName, const plan::ProfileResolver& profiles, QStringList* errors);

// Every lesson under `dir` (default: the compiled-in ":/lessons"), ordered by their order field; problems of
// files that cannot be read are added to `errors`.
std::vector<Lesson> loadLessons(
    const plan::ProfileResolver& profiles, QStringList* errors, const QString& dir = QStringLiteral(":/lessons"));

// The facts a layout and its analysis give: layout.*, and predicted.* when there is a prediction.
void addLayoutFacts(const plan::Layout& layout, bool valid, const plan::Prediction* prediction, Facts* facts);

// "14.3 %", "0.25", "yes", "1f1b": a fact's value as a learner reads it.
QString describeFact(const std::string& name, const FactValue& value);
// The same with the fact's unit, as check messages and lesson texts print it: "80.86 GB", "14.3 %".
QString factText(const std::string& name, const FactValue& value);

} // namespace loom::views
