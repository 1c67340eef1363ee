#pragma once

#include "views/teaching/Lesson.h"

#include <QPointer>
#include <QWidget>

#include <functional>
#include <set>

class QButtonGroup;
class QComboBox;
class QGroupBox;
class QLabel;
class QPushButton;
class QTextBrowser;

namespace loom::views {

// A frame drawn over the widget a lesson step is about (a child of its window, transparent to the mouse),
// following it as it moves; hidden when the widget is.
class LessonHighlight : public QWidget {
public:
    explicit LessonHighlight(QWidget* window);
    void setTarget(QWidget* target);
    QWidget* target() const { return m_target; }

protected:
    void paintEvent(QPaintEvent* event) override;
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    void follow();
    QPointer<QWidget> m_target;
    int m_retries = 0;
};

// The Lessons dock: the course (resources/lessons), one lesson's text with its formulas, and its current
// step: what to do, the widget concerned (highlighted, its dock raised), the check evaluated on the live
// state after every change (a prediction, a run's end, a stepper step), feedback, and a question. "Show
// me" performs the step's action through the widgets. Progress is kept in QSettings (lessons/<id>/done,
// lessons/<id>/step, lessons/current).
class LessonDock : public QWidget {
    Q_OBJECT
public:
    struct Hooks {
        std::function<Facts()> facts; // the live state
        std::function<QWidget*(const QString& name)> widget; // a widget of the window by objectName
        std::function<void(const Lesson&)> start; // open the lesson's layout, reset the views
        std::function<bool(const LessonAction&, QString* why)> perform; // do a step's action
    };
    LessonDock(std::vector<Lesson> lessons, Hooks hooks, QWidget* parent = nullptr);

    const std::vector<Lesson>& lessons() const { return m_lessons; }
    // Starts a lesson from its first step with its layout; false for an unknown id.
    bool startLesson(const QString& id);
    const Lesson* current() const { return m_current < 0 ? nullptr : &m_lessons[std::size_t(m_current)]; }
    int stepIndex() const { return m_step; }
    const LessonStep* currentStep() const;
    // Evaluates the current step's check on the live state and shows the result.
    CheckResult refresh();
    bool passed() const { return m_passed; }
    // Performs the current step's action (as "Show me" does).
    bool showMe(QString* why = nullptr);
    // To the next step (only once this one passed); at the last step, once passed (Done), to the next lesson,
    // or back to the list of lessons after the last one, with the frame taken away. False when not passed.
    bool next();
    bool back();
    // Plays the lesson up to step `step` (0-based): performs each step's action, waits for its check and
    // goes on, then emits playedTo() (for demonstrations and screenshots: loom --lesson ID --lesson-step N).
    void playTo(int step);
    // Answers the current step's question; true when right. The explanation (and a step's feedback, which
    // may give the answer away) shows only once the learner answered or pressed "Show answer" (reveal()).
    bool answer(int choice);
    void reveal();
    bool answerShown() const { return m_answerShown; }
    QPushButton* revealButton() const { return m_reveal; }
    QLabel* answerLabel() const { return m_answer; }
    QLabel* feedbackLabel() const { return m_feedback; }
    QLabel* instructionLabel() const { return m_instruction; }
    QTextBrowser* textBrowser() const { return m_text; }
    bool lessonDone(const QString& id) const;
    LessonHighlight* highlight() const { return m_highlight; }
    QPushButton* nextButton() const { return m_next; }
    QPushButton* showMeButton() const { return m_showMe; }
    QComboBox* lessonBox() const { return m_lessonBox; }
    QString statusText() const;

signals:
    void stepChanged();

    void playedTo(int step);

protected:
    // Closing the dock takes the frame away; opening it again brings it back while the lesson goes on.
    void hideEvent(QHideEvent* event) override;
    void showEvent(QShowEvent* event) override;

private:
    void showStep();
    void fillLessonBox();
    void saveProgress();
    void showTexts(const LessonStep& step, const Facts& now);
    void frame();
    TextFacts textFacts(const Facts& now, const LessonStep* step) const;

    std::vector<Lesson> m_lessons;
    Hooks m_hooks;
    int m_current = -1, m_step = 0, m_playTo = -1;
    bool m_passed = false;
    std::set<int> m_passedSteps; // steps of the current lesson whose check passed once: they stay passed
    bool m_answerShown = false; // the current step's question was answered or its answer revealed
    Facts m_startFacts, m_stepFacts; // when the lesson and the step began: {{start:...}} and {{before:...}}
    QString m_shownHtml;
    QPointer<QWidget> m_target; // the widget the current step is about
    QComboBox* m_lessonBox;
    QTextBrowser* m_text;
    QLabel *m_position, *m_instruction, *m_status, *m_feedback;
    QGroupBox* m_question;
    QLabel* m_questionText;
    QButtonGroup* m_choices;
    QLabel* m_answer;
    QPushButton *m_back, *m_showMe, *m_next, *m_restart, *m_reveal;
    LessonHighlight* m_highlight = nullptr;
};

} // namespace loom::views
