// Every lesson end to end in the workbench window (offscreen): for each step, the check fails before the
// step's action, the action is performed through the widgets (the dock's "Show me": the Strategy panel's
// controls, the Run panel's button with a real local run, a drop on the map, the all-reduce stepper's Next,
// the Explain dock, the Recommend dialog's Apply), and the check passes after. Also: every widget a lesson
// may name exists once, the step's widget is framed, progress is remembered, loom --lesson's lookup.

#include "app/gui/MainWindow.h"
#include "profiles/ProfileCatalog.h"
#include "profiles/Store.h"
#include "views/ExplainDock.h"
#include "views/LayoutAnalysis.h"
#include "views/LayoutDocument.h"
#include "views/MetricsPanel.h"
#include "views/PredictionPanel.h"
#include "views/RunMonitor.h"
#include "views/teaching/AllReduceStepper.h"
#include "views/teaching/LessonDock.h"

#include <QAction>
#include <QDockWidget>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QProcess>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QTextBrowser>
#include <qcustomplot.h>

using namespace loom;
using namespace loom::views;

class TestLessons : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    std::unique_ptr<profiles::Store> m_store;
    std::unique_ptr<profiles::ProfileCatalog> m_catalog;
    std::unique_ptr<app::MainWindow> m_window;

    // Waits until the analysis shown is the current layout's and no run is going on.
    bool settle(app::MainWindow& w, int ms = 10000)
    {
        QElapsedTimer t;
        t.start();
        while (t.elapsed() < ms) {
            const auto& a = w.analysis()->latest();
            if (a.generation > 0 && a.layout == w.document()->layout() && !w.analysis()->busy()
                && !w.runMonitor()->running())
                return true;
            QTest::qWait(20);
        }
        return false;
    }

private slots:
    void initTestCase()
    {
        qputenv("XDG_CONFIG_HOME", m_dir.filePath(QStringLiteral("config")).toLocal8Bit());
        qputenv("OMPI_ALLOW_RUN_AS_ROOT", "1");
        qputenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
        qputenv("OMPI_MCA_rmaps_base_oversubscribe", "1");
        QCoreApplication::setOrganizationName(QStringLiteral("loom-test"));
        QCoreApplication::setApplicationName(QStringLiteral("tst_lessons"));
        m_store = std::make_unique<profiles::Store>(m_dir.filePath(QStringLiteral("runs.db")));
        m_catalog = std::make_unique<profiles::ProfileCatalog>(m_store.get());
        m_window = std::make_unique<app::MainWindow>(*m_catalog, m_store.get());
        m_window->resize(1600, 1000);
        QVERIFY(m_window->openFile(QString::fromLatin1(app::MainWindow::kExample)));
        m_window->show();
        QVERIFY(settle(*m_window));
    }

    void everyLessonWidgetExistsOnce()
    {
        for (const QString& name : lessonWidgetNames()) {
            const auto found = m_window->findChildren<QWidget*>(name);
            QVERIFY2(found.size() == 1, qPrintable(QStringLiteral("%1: %2 widgets").arg(name).arg(found.size())));
        }
        QVERIFY(m_window->lessonDock()->lessons().size() >= 10);
    }

    void everyLessonEndToEnd_data()
    {
        QTest::addColumn<QString>("id");
        for (const Lesson& l : m_window->lessonDock()->lessons())
            QTest::newRow(qPrintable(l.id)) << l.id;
    }

    void everyLessonEndToEnd()
    {
        QFETCH(QString, id);
        app::MainWindow& w = *m_window;
        LessonDock* dock = w.lessonDock();
        QVERIFY(w.startLesson(id));
        QVERIFY(w.findChild<QDockWidget*>(QStringLiteral("lessonsDock"))->isVisible());
        const Lesson& lesson = *dock->current();
        QCOMPARE(QString::fromStdString(w.document()->layout().name), id);
        for (std::size_t i = 0; i < lesson.steps.size(); ++i) {
            const LessonStep& step = lesson.steps[i];
            QCOMPARE(dock->stepIndex(), int(i));
            QVERIFY(settle(w));
            const CheckResult before = dock->refresh();
            QVERIFY2(!before.pass,
                qPrintable(QStringLiteral("step %1 passes before its action: %2").arg(i).arg(before.detail)));
            QVERIFY(!dock->nextButton()->isEnabled());
            // The widget the step is about is framed (when it is on screen).
            QWidget* target = w.findChild<QWidget*>(step.widget);
            QVERIFY(target);
            QCOMPARE(dock->highlight()->target(), target);
            if (target->isVisible())
                QTRY_VERIFY2_WITH_TIMEOUT(dock->highlight()->isVisible(),
                    qPrintable(QStringLiteral("step %1: %2 not framed").arg(i).arg(step.widget)), 3000);
            QString why;
            QVERIFY2(dock->showMe(&why), qPrintable(QStringLiteral("step %1: %2").arg(i).arg(why)));
            const int timeout = step.action.kind == LessonAction::Kind::Run ? 180000 : 30000;
            QTRY_VERIFY2_WITH_TIMEOUT(settle(w, 100) && dock->refresh().pass,
                qPrintable(QStringLiteral("step %1 after its action: %2").arg(i).arg(dock->statusText())), timeout);
            if (step.question) {
                QVERIFY(!dock->answer((step.question->answer + 1) % int(step.question->choices.size())));
                QVERIFY(dock->answer(step.question->answer));
            }
            // Every figure the step and the lesson print is known by now (placeholders filled from the facts).
            for (QString shown : { dock->instructionLabel()->text(), dock->feedbackLabel()->text(),
                     dock->textBrowser()->toPlainText() }) {
                shown.remove(QStringLiteral("Recommend…")); // the button's own name
                QVERIFY2(!shown.contains(QStringLiteral("…")) && !shown.contains(QStringLiteral("{{")),
                    qPrintable(QStringLiteral("step %1: %2").arg(i).arg(shown)));
            }
            if (i + 1 < lesson.steps.size())
                QVERIFY(dock->next());
        }
        QVERIFY(dock->lessonDone(id));
        QVERIFY(QSettings().value(QStringLiteral("lessons/%1/done").arg(id)).toBool());
        QCOMPARE(QSettings().value(QStringLiteral("lessons/current")).toString(), id);
    }

    void unknownLesson()
    {
        QString error;
        QVERIFY(!m_window->startLesson(QStringLiteral("no-such-lesson"), &error));
        QVERIFY(error.contains(QStringLiteral("pipeline-bubble")));
    }

    void commandLine()
    {
        QProcess loom;
        loom.start(
            QStringLiteral(LOOM_EXE), { QStringLiteral("lessons"), QStringLiteral("list"), QStringLiteral("--json") });
        QVERIFY(loom.waitForFinished(60000));
        QCOMPARE(loom.exitCode(), 0);
        const QJsonArray list = QJsonDocument::fromJson(loom.readAllStandardOutput()).array();
        QCOMPARE(list.size(), qsizetype(m_window->lessonDock()->lessons().size()));
        QCOMPARE(list.first().toObject().value(QStringLiteral("id")).toString(), QStringLiteral("one-device"));
        QVERIFY(list.first().toObject().value(QStringLiteral("steps")).toInt() >= 2);
        // A broken lesson file is refused with the field.
        QTemporaryDir dir;
        QFile bad(dir.filePath(QStringLiteral("bad.json")));
        QVERIFY(bad.open(QIODevice::WriteOnly));
        QFile good(QStringLiteral(":/lessons/04-pipeline-bubble.json"));
        QVERIFY(good.open(QIODevice::ReadOnly));
        bad.write(good.readAll().replace("\"microBatch\"", "\"microBatchh\""));
        bad.close();
        loom.start(QStringLiteral(LOOM_EXE),
            { QStringLiteral("lessons"), QStringLiteral("validate"), bad.fileName(),
                QStringLiteral(":/lessons/04-pipeline-bubble.json") });
        QVERIFY(loom.waitForFinished(60000));
        QCOMPARE(loom.exitCode(), 2);
        QVERIFY(loom.readAllStandardError().contains("steps[0].widget: unknown widget \"microBatchh\""));
        QVERIFY(loom.readAllStandardOutput().contains("04-pipeline-bubble.json: valid"));
        // loom --lesson with an unknown id says which exist.
        loom.start(QStringLiteral(LOOM_EXE), { QStringLiteral("--lesson"), QStringLiteral("no-such-lesson") });
        QVERIFY(loom.waitForFinished(60000));
        QCOMPARE(loom.exitCode(), 64);
        QVERIFY(loom.readAllStandardError().contains("the lessons are: one-device"));
    }

    void explainThisNumber()
    {
        app::MainWindow& w = *m_window;
        QVERIFY(w.openFile(QString::fromLatin1(app::MainWindow::kExample)));
        QVERIFY(settle(w));
        QVERIFY(w.explainDock()->showTopic(QStringLiteral("bubble")));
        QVERIFY(w.explainDock()->text().contains(QStringLiteral("(p−1)/(m+p−1)")));
        QVERIFY(w.explainDock()->text().contains(QStringLiteral("(2−1)/(4+2−1)"))); // p = 2, m = 4
        // It follows the layout: a larger batch changes the values shown.
        plan::Layout l = w.document()->layout();
        l.parallel.globalBatch = 32;
        w.document()->edit(l, QStringLiteral("batch 32"));
        QVERIFY(settle(w));
        QTRY_VERIFY(w.explainDock()->text().contains(QStringLiteral("(2−1)/(8+2−1)")));
        QVERIFY(!w.explainDock()->showTopic(QStringLiteral("nonsense")));
        // Memory at length: by kind and by pipeline stage (tiny-local has pp 2), the tooltip by kind only.
        QVERIFY(w.explainDock()->showTopic(QStringLiteral("memory")));
        QVERIFY2(w.explainDock()->text().contains(QStringLiteral("By kind"))
                && w.explainDock()->text().contains(QStringLiteral("By pipeline stage"))
                && w.explainDock()->text().contains(QStringLiteral("(most loaded)")),
            qPrintable(w.explainDock()->text()));
        QVERIFY(
            !w.predictionPanel()->label(QStringLiteral("memory"))->toolTip().contains(QStringLiteral("By pipeline")));
        // The Prediction panel's figures and the metrics plots offer it in their context menus.
        QCOMPARE(w.predictionPanel()->label(QStringLiteral("split.dp"))->contextMenuPolicy(), Qt::CustomContextMenu);
        const auto actions = w.metricsPanel()->bubblePlot()->actions();
        QCOMPARE(actions.size(), 1);
        QCOMPARE(actions.front()->text(), QStringLiteral("Explain this number"));
        actions.front()->trigger();
        QCOMPARE(w.explainDock()->topic(), QStringLiteral("measured.bubble"));
    }
};

QTEST_MAIN(TestLessons)
#include "tst_lessons.moc"
