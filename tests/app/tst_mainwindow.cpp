// The workbench window as a user drives it: open, edit through the panels and the map, undo and redo,
// save and reopen, the recommend dialog, the 3,072-GPU layout within 2 s, and a window that stays responsive.

#include "app/gui/MainWindow.h"
#include "engine/plan/CostModel.h"
#include "engine/plan/LayoutParser.h"
#include "engine/profiles/BuiltinProfiles.h"
#include "views/CandidateModel.h"
#include "views/LayerModel.h"
#include "views/LayerPalette.h"
#include "views/LayoutAnalysis.h"
#include "views/LayoutDocument.h"
#include "views/LayoutEdits.h"
#include "views/PredictionPanel.h"
#include "views/RecommendDialog.h"
#include "views/StrategyPanel.h"
#include "views/TimelineView.h"
#include "views/TopologyScene.h"
#include "views/TopologyView.h"

#include <QApplication>
#include <QComboBox>
#include <QDialog>
#include <QDockWidget>
#include <QDoubleSpinBox>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QLabel>
#include <QListWidget>
#include <QMenu>
#include <QMimeData>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QTextDocument>
#include <QTimer>
#include <QUndoStack>
#include <QWheelEvent>

#include <algorithm>

using namespace loom;
using namespace loom::views;

#ifdef LOOM_TIMING_BUDGETS
constexpr int kWaitMs = 5000;
#else
constexpr int kWaitMs = 120000; // waits end when the signal comes; the bound only stops a hang
#endif

class TestMainWindow : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    const profiles::BuiltinProfiles& m_profiles = profiles::BuiltinProfiles::instance();

    static bool waitForAnalysis(app::MainWindow& w, int ms = 5000)
    {
        QSignalSpy shown(&w, &app::MainWindow::analysisShown);
        return shown.wait(ms);
    }

private slots:
    void initTestCase()
    {
        // Settings go to the test's own folder, never the user's.
        qputenv("XDG_CONFIG_HOME", m_dir.filePath(QStringLiteral("config")).toLocal8Bit());
        QCoreApplication::setOrganizationName(QStringLiteral("loom-test"));
        QCoreApplication::setApplicationName(QStringLiteral("tst_mainwindow"));
    }

    void exampleRepredictsWithin100ms()
    {
        app::MainWindow w(m_profiles);
        w.show();
        QVERIFY(w.openFile(QString::fromLatin1(app::MainWindow::kExample)));
        QVERIFY(waitForAnalysis(w));
        QVERIFY(w.validationLabel()->text().contains(QStringLiteral("valid")));
        QVERIFY(w.windowTitle().startsWith(QStringLiteral("tiny-local")));
        std::vector<qint64> ms;
        const std::int64_t pps[] = { 4, 1, 2, 4, 2 };
        for (std::int64_t pp : pps) {
            QElapsedTimer t;
            t.start();
            QSignalSpy shown(&w, &app::MainWindow::analysisShown);
            QVERIFY(w.strategyPanel()->requestDegree(Degree::Pp, pp));
            QVERIFY(shown.count() > 0 || shown.wait(2000));
            ms.push_back(t.elapsed());
            QCOMPARE(w.document()->layout().parallel.pp, pp);
            QCOMPARE(w.predictionPanel()
                         ->label(QStringLiteral("bubble"))
                         ->toolTip()
                         .contains(QStringLiteral("p = %1").arg(pp)),
                true);
        }
        std::sort(ms.begin(), ms.end());
        qInfo("edit to prediction shown: median %lld ms, max %lld ms", ms[ms.size() / 2], ms.back());
        QVERIFY2(ms[ms.size() / 2] <= 100, qPrintable(QString::number(ms[ms.size() / 2])));
        QVERIFY(w.isWindowModified());
    }

    void largeLayoutWithin2sAndResponsive()
    {
        app::MainWindow w(m_profiles);
        w.show();
        // Measure how late a 10 ms timer fires while the window opens and predicts: the GUI thread must keep
        // serving events.
        qint64 worstGap = 0;
        QElapsedTimer clock;
        clock.start();
        qint64 last = 0;
        QTimer ping;
        ping.setInterval(10);
        QObject::connect(&ping, &QTimer::timeout, [&] {
            worstGap = std::max(worstGap, clock.elapsed() - last);
            last = clock.elapsed();
        });
        QElapsedTimer t;
        t.start();
        QSignalSpy shown(&w, &app::MainWindow::analysisShown);
        QVERIFY(w.openFile(QStringLiteral(LOOM_SOURCE_DIR "/resources/examples/megatron-1t-3072-a100.json")));
        last = clock.elapsed();
        ping.start();
        QVERIFY(shown.count() > 0 || shown.wait(kWaitMs));
        const qint64 opened = t.elapsed();
        qInfo("megatron-1t on 384 nodes: map and prediction shown after %lld ms", opened);
#ifdef LOOM_TIMING_BUDGETS // timing budgets only in the bench build (tst_mainwindow_bench): a busy machine misses them
        QVERIFY2(opened < 2000, qPrintable(QString::number(opened)));
#endif
        QCOMPARE(w.topologyView()->topologyScene()->nodeCount(), 384);
        QVERIFY(w.predictionPanel()->label(QStringLiteral("tflops"))->text() != QStringLiteral("–"));
        QVERIFY(w.scheduleView()->timeline().rows().size() >= 64);
        // An edit while the planner works: the window answers within 250 ms throughout.
        shown.clear();
        QVERIFY(w.strategyPanel()->requestDegree(Degree::Tp, 4));
        QVERIFY(shown.wait(kWaitMs));
        ping.stop();
        qInfo("worst event-loop gap while predicting: %lld ms", worstGap);
#ifdef LOOM_TIMING_BUDGETS
        QVERIFY2(worstGap < 250, qPrintable(QString::number(worstGap)));
#endif
    }

    void dropUndoRedoThroughTheWindow()
    {
        app::MainWindow w(m_profiles);
        w.resize(1400, 900);
        w.show();
        QVERIFY(w.openFile(QString::fromLatin1(app::MainWindow::kExample)));
        QVERIFY(waitForAnalysis(w));
        const plan::Layout before = w.document()->layout();
        TopologyView* map = w.topologyView();
        LayerModel* layers = w.layerPalette()->layerModel();
        std::unique_ptr<QMimeData> mime(layers->mimeData({ layers->index(layers->rowOfBlock(1), 0) }));
        const QPoint at = map->mapFromScene(map->topologyScene()->deviceRect(0, 2).center());
        QDragEnterEvent enter(at, Qt::MoveAction, mime.get(), Qt::LeftButton, Qt::NoModifier);
        QCoreApplication::sendEvent(map->viewport(), &enter);
        QDragMoveEvent move(at, Qt::MoveAction, mime.get(), Qt::LeftButton, Qt::NoModifier);
        QCoreApplication::sendEvent(map->viewport(), &move);
        QVERIFY(move.isAccepted());
        // While hovering, the map previews the stage ranges the drop gives (issue 36), and they are the ones the
        // drop then applies.
        QCOMPARE(map->dropPreview(),
            QStringLiteral(
                "Drop block 1 on rank 2 (stage 1):\nstage 0: block 0 (was 0–1)\nstage 1: blocks 1–3 (was 2–3)"));
        QDropEvent drop(QPointF(at), Qt::MoveAction, mime.get(), Qt::LeftButton, Qt::NoModifier);
        QCoreApplication::sendEvent(map->viewport(), &drop);
        QVERIFY(map->dropPreview().isEmpty());
        const plan::Layout after = w.document()->layout();
        QCOMPARE(after.parallel.stages, (std::vector<plan::StageRange> { { 0, 0 }, { 1, 3 } }));
        // One block is "block 1", not "blocks 1–1" (issue 36).
        QVERIFY2(w.document()->undoStack()->undoText().startsWith(QStringLiteral("Move block 1 to rank ")),
            qPrintable(w.document()->undoStack()->undoText()));
        // The toolbar's Undo keeps its short label while the menu names the edit.
        for (QAction* a : w.findChildren<QAction*>())
            if (a->shortcut() == QKeySequence(QStringLiteral("Ctrl+Z"))) {
                QCOMPARE(a->iconText(), QStringLiteral("Undo"));
                QVERIFY(a->text().contains(QStringLiteral("block 1")));
            }
        // The palette shows block 1 on stage 1 now.
        QCOMPARE(layers->data(layers->index(layers->rowOfBlock(1), 0), LayerModel::StageRole).toLongLong(), 1);
        QVERIFY(waitForAnalysis(w));
        w.document()->undoStack()->undo();
        QCOMPARE(w.document()->layout(), before);
        QCOMPARE(layers->data(layers->index(layers->rowOfBlock(1), 0), LayerModel::StageRole).toLongLong(), 0);
        w.document()->undoStack()->redo();
        QCOMPARE(w.document()->layout(), after);
        // Ctrl+Z reaches the undo stack through the window's shortcut.
        QTest::keyClick(&w, Qt::Key_Z, Qt::ControlModifier);
        QCOMPARE(w.document()->layout(), before);
        QTest::keyClick(&w, Qt::Key_Z, Qt::ControlModifier | Qt::ShiftModifier);
        QCOMPARE(w.document()->layout(), after);
    }

    void saveAndReopen()
    {
        app::MainWindow w(m_profiles);
        QVERIFY(w.openFile(QStringLiteral(LOOM_SOURCE_DIR "/resources/examples/gpt3-175b-1024-a100.json")));
        QVERIFY(w.strategyPanel()->requestDegree(Degree::Pp, 8));
        QVERIFY(w.isWindowModified());
        const QString path = m_dir.filePath(QStringLiteral("saved.json"));
        QString error;
        QVERIFY2(w.saveTo(path, &error), qPrintable(error));
        QVERIFY(!w.isWindowModified());
        QVERIFY(w.recentFiles().contains(QFileInfo(path).absoluteFilePath()));
        app::MainWindow again(m_profiles);
        QVERIFY(again.openFile(path));
        QCOMPARE(again.document()->layout(), w.document()->layout());
        QCOMPARE(again.document()->layout().parallel.pp, 8);
    }

    // Issue 36: a lesson's layout never goes over the file the learner had open: starting a lesson drops the
    // file name (Save then asks where), and the file stays as it was.
    void lessonDropsTheFileName()
    {
        app::MainWindow w(m_profiles);
        QVERIFY(w.openFile(QString::fromLatin1(app::MainWindow::kExample)));
        const QString path = m_dir.filePath(QStringLiteral("mine.json"));
        QVERIFY(w.saveTo(path));
        QVERIFY(w.openFile(path));
        QCOMPARE(w.document()->filePath(), path);
        QFile f(path);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QByteArray before = f.readAll();
        f.close();
        QVERIFY(w.startLesson(QStringLiteral("one-device")));
        QVERIFY(w.document()->filePath().isEmpty());
        QVERIFY(!w.windowTitle().contains(QStringLiteral("mine.json")));
        QVERIFY(f.open(QIODevice::ReadOnly));
        QCOMPARE(f.readAll(), before);
        // The learner's own layout is still one undo away.
        w.document()->undoStack()->undo();
        QVERIFY(!w.document()->isModified());
    }

    // Issue 36: the validation tooltip is always rich text, so a single warning's "dp > 1" never shows as
    // "dp &gt; 1"; its advice leaves out recompute when recompute is already full.
    void validationTooltipIsRichText()
    {
        app::MainWindow w(m_profiles);
        QVERIFY(w.openFile(QString::fromLatin1(app::MainWindow::kExample)));
        QVERIFY(waitForAnalysis(w));
        plan::Layout l = w.document()->layout();
        l.cluster.device.memoryGB = 0.001;
        l.parallel.dp = 1;
        l.memory.zero = 0;
        l.memory.recompute = plan::Recompute::Full;
        w.document()->edit(l, QStringLiteral("tiny device"));
        QVERIFY(waitForAnalysis(w));
        const QString tip = w.validationLabel()->toolTip();
        QVERIFY2(tip.contains(QStringLiteral("dp &gt; 1")), qPrintable(tip));
        QVERIFY2(Qt::mightBeRichText(tip), qPrintable(tip));
        QVERIFY2(!tip.contains(QStringLiteral("recompute activations")), qPrintable(tip));
    }

    // Issue 36: a wheel over a box without focus leaves the value (and the redo history) alone; with focus it
    // steps the value. Ctrl+Z with focus in a degree box undoes the layout edit.
    void wheelNeedsFocusAndUndoFromABox()
    {
        app::MainWindow w(m_profiles);
        w.show();
        QApplication::setActiveWindow(&w);
        QVERIFY(QTest::qWaitForWindowActive(&w));
        QVERIFY(w.openFile(QString::fromLatin1(app::MainWindow::kExample)));
        QVERIFY(waitForAnalysis(w));
        QDoubleSpinBox* bucket = nullptr;
        for (auto* box : w.strategyPanel()->findChildren<QDoubleSpinBox*>())
            if (box->value() == w.document()->layout().comm.bucketMb && box->isEnabled())
                bucket = box;
        QVERIFY(bucket);
        const plan::Layout before = w.document()->layout();
        auto wheel = [bucket] {
            const QPointF at(bucket->width() / 2.0, bucket->height() / 2.0);
            QWheelEvent e(at, bucket->mapToGlobal(at), QPoint(), QPoint(0, -120), Qt::NoButton, Qt::NoModifier,
                Qt::NoScrollPhase, false);
            QCoreApplication::sendEvent(bucket, &e);
        };
        w.topologyView()->setFocus();
        wheel();
        QCOMPARE(w.document()->layout(), before);
        bucket->setFocus();
        QVERIFY(bucket->hasFocus());
        wheel();
        QCOMPARE(w.document()->layout().comm.bucketMb, before.comm.bucketMb - bucket->singleStep());
        w.document()->undoStack()->undo();
        QCOMPARE(w.document()->layout(), before);

        QVERIFY(w.strategyPanel()->requestDegree(Degree::Dp, before.parallel.dp == 1 ? 2 : 1));
        QVERIFY(!(w.document()->layout() == before));
        QComboBox* dp = w.strategyPanel()->degreeBox(Degree::Dp);
        dp->setFocus();
        QVERIFY(dp->hasFocus());
        QTest::keyClick(QApplication::focusWidget(), Qt::Key_Z, Qt::ControlModifier);
        QCOMPARE(w.document()->layout(), before);
    }

    void recommendFindsAndAppliesALayout()
    {
        app::MainWindow w(m_profiles);
        QVERIFY(w.openFile(QStringLiteral(LOOM_SOURCE_DIR "/resources/examples/gpt3-175b-1024-a100.json")));
        RecommendDialog dialog(w.document()->layout(), &w);
        QObject::connect(&dialog, &RecommendDialog::layoutChosen, w.document(),
            [&](const plan::Layout& l) { w.document()->edit(l, QStringLiteral("recommended")); });
        QSignalSpy finished(&dialog, &RecommendDialog::searchFinished);
        dialog.start();
        QVERIFY(dialog.running());
        QVERIFY(finished.wait(20000));
        QVERIFY(dialog.candidates()->rowCount() > 0);
        QVERIFY2(dialog.message().contains(QStringLiteral("faster than")), qPrintable(dialog.message()));
        const plan::Layout chosen = dialog.layoutFor(0);
        QCOMPARE(chosen.name, w.document()->layout().name);
        emit dialog.layoutChosen(chosen);
        QCOMPARE(w.document()->layout(), chosen);

        // Cancel stops a search early.
        RecommendDialog cancelled(test1t(), &w);
        QSignalSpy done(&cancelled, &RecommendDialog::searchFinished);
        cancelled.start();
        for (auto* b : cancelled.findChildren<QPushButton*>())
            if (b->text().contains(QStringLiteral("Cancel")))
                b->click();
        QVERIFY(done.wait(20000));
        QVERIFY(cancelled.message().contains(QStringLiteral("cancelled")) || cancelled.candidates()->rowCount() > 0);
    }

    // Issue 36: Recommend on the default example (a "local" cluster without a fixed device count) searches the
    // layouts of the current ranks instead of failing under a progress bar at 100 %.
    void recommendOnTheDefaultExample()
    {
        app::MainWindow w(m_profiles);
        QVERIFY(w.openFile(QString::fromLatin1(app::MainWindow::kExample)));
        QVERIFY(w.document()->layout().cluster.autoDevices());
        RecommendDialog dialog(w.document()->layout(), &w);
        QSignalSpy finished(&dialog, &RecommendDialog::searchFinished);
        dialog.start();
        QVERIFY(finished.wait(kWaitMs));
        QVERIFY2(dialog.candidates()->rowCount() > 0, qPrintable(dialog.message()));
        QVERIFY2(dialog.message().contains(QStringLiteral("keeps the current")), qPrintable(dialog.message()));
        const plan::Layout chosen = dialog.layoutFor(0);
        QVERIFY(chosen.cluster.autoDevices());
        QCOMPARE(chosen.parallel.worldSize(), w.document()->layout().parallel.worldSize());
        w.document()->edit(chosen, QStringLiteral("recommended"));
        QVERIFY(waitForAnalysis(w));
        QVERIFY2(!w.validationLabel()->text().contains(QStringLiteral("problem")),
            qPrintable(w.validationLabel()->toolTip()));
    }

    void docksAreRemembered()
    {
        {
            app::MainWindow w(m_profiles);
            w.show();
            auto* schedule = w.findChild<QDockWidget*>(QStringLiteral("scheduleDock"));
            QVERIFY(schedule);
            schedule->hide();
            w.close();
        }
        app::MainWindow again(m_profiles);
        again.show();
        QVERIFY(!again.findChild<QDockWidget*>(QStringLiteral("scheduleDock"))->isVisible());
        QSettings().clear();
    }

    // Issue 36, first start: with no settings the welcome shows once (a second start has the key); it lists the
    // bundled examples and leads to them (File ▸ Examples opens one: the document takes its layout) and to Lessons.
    void welcomeOnceLeadsToExamplesAndLessons()
    {
        QSettings().clear();
        app::MainWindow w(m_profiles);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QDialog* welcome = w.welcomeOnFirstStart();
        QVERIFY(welcome);
        QVERIFY(welcome->isVisible());
        auto* list = welcome->findChild<QListWidget*>(QStringLiteral("welcomeExamples"));
        QVERIFY(list);
        QStringList listed;
        for (int i = 0; i < list->count(); ++i)
            listed << list->item(i)->text();
        QVERIFY2(
            listed.contains(QStringLiteral("megatron-1t-3072-a100")) && listed.contains(QStringLiteral("tiny-local")),
            qPrintable(listed.join(QStringLiteral(", "))));
        // Start the lessons: the Lessons dock comes up and the welcome goes.
        auto* lessons = welcome->findChild<QPushButton*>(QStringLiteral("welcomeLessons"));
        QVERIFY(lessons);
        QTest::mouseClick(lessons, Qt::LeftButton);
        QTRY_VERIFY(w.findChild<QDockWidget*>(QStringLiteral("lessonsDock"))->isVisible());
        QTRY_VERIFY(w.findChild<QDialog*>(QStringLiteral("welcome")) == nullptr); // closed and deleted
        // File ▸ Examples lists the same layouts; triggering one opens it.
        auto* menu = w.findChild<QMenu*>(QStringLiteral("examplesMenu"));
        QVERIFY(menu);
        QStringList inMenu;
        for (const QAction* a : menu->actions())
            inMenu << a->text();
        QCOMPARE(inMenu, listed);
        auto* gpt3 = menu->findChild<QAction*>(QStringLiteral("example.gpt3-175b-1024-a100"));
        QVERIFY(gpt3);
        QSignalSpy shown(&w, &app::MainWindow::analysisShown);
        gpt3->trigger();
        QCOMPARE(QString::fromStdString(w.document()->layout().name), QStringLiteral("gpt3-175b-1024-a100"));
        QVERIFY(shown.wait(kWaitMs));
        // Opening an example from the welcome's list does the same.
        app::MainWindow again(m_profiles);
        QVERIFY(again.welcomeOnFirstStart() == nullptr); // shown once: the key is there now
        QSettings().remove(QStringLiteral("welcome/shown"));
        QDialog* second = again.welcomeOnFirstStart();
        QVERIFY(second);
        auto* secondList = second->findChild<QListWidget*>(QStringLiteral("welcomeExamples"));
        secondList->setCurrentRow(int(listed.indexOf(QStringLiteral("megatron-1t-3072-a100"))));
        QTest::mouseClick(second->findChild<QPushButton*>(QStringLiteral("welcomeOpen")), Qt::LeftButton);
        QCOMPARE(QString::fromStdString(again.document()->layout().name), QStringLiteral("megatron-1t-3072-a100"));
        QSettings().clear();
    }

    // Issue 36: a long step's simulated schedule shows its first micro-batches only, and says so; a short one
    // shows them all and no note.
    void scheduleNoteSaysWhichMicroBatches()
    {
        app::MainWindow w(m_profiles);
        QSignalSpy shown(&w, &app::MainWindow::analysisShown);
        QVERIFY(w.openFile(QString::fromLatin1(app::MainWindow::kExample)));
        QVERIFY(shown.wait(kWaitMs));
        auto* note = w.findChild<QLabel*>(QStringLiteral("scheduleNote"));
        QVERIFY(note);
        QVERIFY(note->isHidden());
        const plan::Layout big = test1t();
        const plan::Prediction p = plan::predict(big);
        const std::int64_t m = big.parallel.microBatches();
        QVERIFY(p.eventMicroBatches > 0 && p.eventMicroBatches < m);
        QVERIFY(w.openFile(QStringLiteral(LOOM_SOURCE_DIR "/resources/examples/megatron-1t-3072-a100.json")));
        QVERIFY(shown.wait(kWaitMs));
        QVERIFY(!note->isHidden());
        QCOMPARE(note->text(), QStringLiteral("showing micro-batches 1–%1 of %2").arg(p.eventMicroBatches).arg(m));
    }

private:
    plan::Layout test1t() const
    {
        QFile f(QStringLiteral(LOOM_SOURCE_DIR "/resources/examples/megatron-1t-3072-a100.json"));
        f.open(QIODevice::ReadOnly);
        const QByteArray b = f.readAll();
        return *plan::readLayout(std::string_view(b.constData(), std::size_t(b.size())), m_profiles).layout;
    }
};

QTEST_MAIN(TestMainWindow)
#include "tst_mainwindow.moc"
