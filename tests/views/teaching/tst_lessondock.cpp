// The Lessons dock on its own, driven through clicks: a quiz's answer waits for the learner, and the orange
// frame goes with the lesson.
#include "views/teaching/LessonDock.h"

#include "tests/views/ViewsTest.h"
#include "tests/views/teaching/LessonTest.h"

#include <QDockWidget>
#include <QLabel>
#include <QMainWindow>
#include <QPushButton>
#include <QRadioButton>
#include <QStandardPaths>
#include <QTextDocument>

using namespace loom;
using namespace loom::views;
using loom::views::test::satisfy;

class TestLessonDock : public QObject {
    Q_OBJECT
private slots:
    // Issue 36: a quiz's answer (its explanation, and the step's feedback that may give it away) stays hidden
    // until the learner picks a choice or presses Show answer; through real clicks.
    void quizAnswersWaitForTheLearner()
    {
        QStandardPaths::setTestModeEnabled(true);
        QStringList errors;
        std::vector<Lesson> all = loadLessons(profiles::BuiltinProfiles::instance(), &errors);
        const auto it = std::find_if(all.begin(), all.end(), [](const Lesson& l) { return l.id == "pipeline-bubble"; });
        QVERIFY(it != all.end() && it->steps[0].question);
        const LessonStep& step = it->steps[0];
        Facts facts;
        QMainWindow window;
        auto* target = new QLabel(QStringLiteral("figure"));
        window.setCentralWidget(target);
        LessonDock::Hooks hooks;
        hooks.facts = [&facts] { return facts; };
        hooks.widget = [target](const QString&) { return target; };
        auto* dock = new LessonDock({ *it }, hooks);
        auto* d = new QDockWidget;
        d->setWidget(dock);
        window.addDockWidget(Qt::LeftDockWidgetArea, d);
        window.resize(900, 900);
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        for (const bool byReveal : { false, true }) {
            QVERIFY(dock->startLesson(it->id));
            satisfy(step.check, facts);
            QVERIFY(dock->refresh().pass);
            const QString explanation = step.question->explanation;
            QVERIFY(!dock->answerLabel()->isVisible());
            QVERIFY(dock->revealButton()->isVisible());
            // The pass feedback ("(8−1)/(32+8−1) = …") would answer the question: not shown yet.
            QVERIFY2(!dock->feedbackLabel()->text().contains(QStringLiteral("−1)/(")),
                qPrintable(dock->feedbackLabel()->text()));
            if (byReveal) {
                QTest::mouseClick(dock->revealButton(), Qt::LeftButton);
                QVERIFY(dock->answerLabel()->text().contains(step.question->choices[step.question->answer]));
            } else {
                QList<QRadioButton*> choices = dock->findChildren<QRadioButton*>();
                QCOMPARE(choices.size(), step.question->choices.size());
                QRadioButton* wrong = nullptr;
                for (QRadioButton* r : choices)
                    if (r->text() != step.question->choices[step.question->answer])
                        wrong = r;
                QVERIFY(wrong);
                // New choices show, and get their size, once the event loop runs.
                QTRY_VERIFY(wrong->isVisible() && !wrong->visibleRegion().isEmpty());
                // On its indicator: a radio button takes clicks on its circle and label only.
                QTest::mouseClick(wrong, Qt::LeftButton, {}, QPoint(8, wrong->height() / 2));
                QVERIFY(dock->answerLabel()->text().contains(QStringLiteral("Not quite")));
            }
            QVERIFY(dock->answerShown());
            QVERIFY(dock->answerLabel()->isVisible());
            QTextDocument answer;
            answer.setHtml(dock->answerLabel()->text());
            QTextDocument expected;
            expected.setHtml(explanation);
            QVERIFY(answer.toPlainText().contains(expected.toPlainText()));
            QVERIFY(!dock->revealButton()->isVisible());
            QVERIFY2(dock->feedbackLabel()->text().contains(QStringLiteral("−1)/(")),
                qPrintable(dock->feedbackLabel()->text()));
            facts.clear();
        }
    }

    // Issue 36: the orange frame goes when the lesson is over (its last step passed) and when the Lessons
    // dock is closed, and comes back when the dock is opened again mid-lesson.
    void frameGoesWithTheLesson()
    {
        QStandardPaths::setTestModeEnabled(true);
        std::vector<Lesson> all = loadLessons(profiles::BuiltinProfiles::instance(), nullptr);
        QVERIFY(!all.empty());
        const Lesson lesson = all.back(); // the last lesson: Done leads nowhere further
        Facts facts;
        QMainWindow window;
        auto* target = new QLabel(QStringLiteral("figure"));
        window.setCentralWidget(target);
        LessonDock::Hooks hooks;
        hooks.facts = [&facts] { return facts; };
        hooks.widget = [target](const QString&) { return target; };
        auto* dock = new LessonDock({ lesson }, hooks);
        auto* d = new QDockWidget(QStringLiteral("Lessons"));
        d->setWidget(dock);
        window.addDockWidget(Qt::LeftDockWidgetArea, d);
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        QVERIFY(dock->startLesson(lesson.id));
        QCOMPARE(dock->highlight()->target(), target);
        QTRY_VERIFY(dock->highlight()->isVisible());
        d->close();
        QVERIFY(!dock->highlight()->target());
        QVERIFY(!dock->highlight()->isVisible());
        d->show();
        QCOMPARE(dock->highlight()->target(), target);
        QTRY_VERIFY(dock->highlight()->isVisible());
        for (std::size_t i = 0; i < lesson.steps.size(); ++i) {
            satisfy(lesson.steps[i].check, facts);
            QVERIFY(dock->refresh().pass);
            if (i + 1 < lesson.steps.size())
                QTest::mouseClick(dock->nextButton(), Qt::LeftButton);
        }
        // The last step passed: the lesson is over, the frame gone before Done is pressed.
        QVERIFY(!dock->highlight()->target());
        QVERIFY(!dock->highlight()->isVisible());
        QTest::mouseClick(dock->nextButton(), Qt::LeftButton); // Done
        QVERIFY(!dock->current());
        QVERIFY(!dock->highlight()->isVisible());
        d->close();
        d->show();
        QVERIFY(!dock->highlight()->target());
    }
};

QTEST_MAIN(TestLessonDock)
#include "tst_lessondock.moc"
