// The workbench fits the screen (issue 36): on a screen of 1600×1000 or 1280×800 (LOOM_TEST_SCREEN, an
// offscreen screen of that size: CTest runs this program once for each) the window opens inside the screen's
// available area and stays inside it when Lessons opens, every control of Strategy (tab by tab) and every
// figure of Prediction lies whole inside its panel's viewport without scrolling, and the Lessons dock is tall
// and wide enough for its buttons. The window is shown at its real size, so Qt lays it out as a user sees it.

#include "app/gui/MainWindow.h"
#include "engine/profiles/BuiltinProfiles.h"
#include "views/LayerPalette.h"
#include "views/LayoutDocument.h"
#include "views/PredictionPanel.h"
#include "views/StrategyPanel.h"
#include "views/teaching/Lesson.h"
#include "views/teaching/LessonDock.h"

#include <QAbstractButton>
#include <QAbstractSpinBox>
#include <QApplication>
#include <QComboBox>
#include <QDockWidget>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QScreen>
#include <QScrollArea>
#include <QScrollBar>
#include <QSettings>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTest>

using namespace loom;

namespace {

QSize screenSize()
{
    const QByteArray env = qgetenv("LOOM_TEST_SCREEN");
    const QList<QByteArray> parts = (env.isEmpty() ? QByteArray("1600x1000") : env).split('x');
    return parts.size() == 2 ? QSize(parts[0].toInt(), parts[1].toInt()) : QSize(1600, 1000);
}

// The scroll area's viewport a widget lies in (the panel's page), or nullptr.
QWidget* viewportOf(const QWidget* w)
{
    for (QWidget* p = w->parentWidget(); p; p = p->parentWidget())
        if (auto* area = qobject_cast<QScrollArea*>(p))
            return area->viewport();
    return nullptr;
}

// Empty when `w` shows whole: visible, not covered, inside the window and inside its scroll area's viewport
// (so no scrolling is needed to see it); else what is wrong, with the geometry.
QString notWhole(const QWidget* w, const QWidget* window)
{
    const QString name
        = w->objectName().isEmpty() ? QString::fromLatin1(w->metaObject()->className()) : w->objectName();
    const QString text = qobject_cast<const QLabel*>(w) ? qobject_cast<const QLabel*>(w)->text().left(40) : QString();
    const QRect inWindow(w->mapTo(window, QPoint(0, 0)), w->size());
    auto where = [&] {
        return QStringLiteral("%1 \"%2\" at %3,%4 %5×%6")
            .arg(name, text)
            .arg(inWindow.x())
            .arg(inWindow.y())
            .arg(inWindow.width())
            .arg(inWindow.height());
    };
    if (!w->isVisible() || w->visibleRegion().isEmpty())
        return where() + QStringLiteral(" is not visible");
    if (!window->rect().contains(inWindow))
        return where() + QStringLiteral(" lies outside the window %1×%2").arg(window->width()).arg(window->height());
    if (const QWidget* view = viewportOf(w)) {
        const QRect inView(w->mapTo(view, QPoint(0, 0)), w->size());
        if (!view->rect().contains(inView))
            return where()
                + QStringLiteral(" needs scrolling: viewport %1×%2, widget at %3,%4")
                      .arg(view->width())
                      .arg(view->height())
                      .arg(inView.x())
                      .arg(inView.y());
    }
    if (w->width() < w->minimumSizeHint().width())
        return where()
            + QStringLiteral(" is cut: %1 px wide, needs %2").arg(w->width()).arg(w->minimumSizeHint().width());
    return {};
}

// Empty when the panel in `dock` needs no scrolling: its scroll area shows no scroll bar (a thin one, a few
// pixels of range, is scrolling too); else the bar's range.
QString scrolls(const QMainWindow& w, const char* dock)
{
    const auto* d = w.findChild<QDockWidget*>(QString::fromLatin1(dock));
    const auto* area = d ? qobject_cast<const QScrollArea*>(d->widget()) : nullptr;
    if (!area)
        return QStringLiteral("%1 has no scroll area").arg(QLatin1String(dock));
    const QScrollBar* bar = area->verticalScrollBar();
    if (!bar->isVisible() && bar->maximum() == 0)
        return {};
    return QStringLiteral("%1 scrolls: range %2 px over a viewport of %3 (content %4)")
        .arg(QLatin1String(dock))
        .arg(bar->maximum())
        .arg(area->viewport()->height())
        .arg(area->widget()->height());
}

template <typename T> void collect(const QWidget* root, QList<const QWidget*>* out)
{
    for (const T* w : root->findChildren<T*>())
        if (w->isVisibleTo(root))
            out->append(w);
}

QList<const QWidget*> controlsOf(const QWidget* root)
{
    QList<const QWidget*> out;
    collect<QComboBox>(root, &out);
    collect<QAbstractSpinBox>(root, &out);
    collect<QAbstractButton>(root, &out);
    return out;
}

} // namespace

class TestWorkbenchFit : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    const profiles::BuiltinProfiles& m_profiles = profiles::BuiltinProfiles::instance();

    // A window on the default dock layout (fresh settings), showing `layout` with its prediction, laid out at
    // its real size.
    static bool openShown(app::MainWindow& w, const QString& layout)
    {
        QSignalSpy shown(&w, &app::MainWindow::analysisShown);
        if (!w.openFile(layout))
            return false;
        w.show();
        if (!QTest::qWaitForWindowExposed(&w))
            return false;
        return !shown.isEmpty() || shown.wait(120000); // ends when the signal comes; the bound stops a hang
    }

private slots:
    void initTestCase()
    {
        qputenv("XDG_CONFIG_HOME", m_dir.filePath(QStringLiteral("config")).toLocal8Bit());
        QCoreApplication::setOrganizationName(QStringLiteral("loom-test"));
        QCoreApplication::setApplicationName(QStringLiteral("tst_workbenchfit"));
        QCOMPARE(QGuiApplication::primaryScreen()->geometry().size(), screenSize());
    }

    void init() { QSettings().clear(); } // every window starts from the default dock layout

    void layouts_data()
    {
        QTest::addColumn<QString>("layout");
        QTest::newRow("example") << QString::fromLatin1(app::MainWindow::kExample);
        QTest::newRow("megatron-1t") << QStringLiteral(
            LOOM_SOURCE_DIR "/resources/examples/megatron-1t-3072-a100.json");
        QTest::newRow("llama3-405b") << QStringLiteral(
            LOOM_SOURCE_DIR "/resources/examples/llama3-405b-8192-h100.json");
    }

    void windowInsideTheScreen_data() { layouts_data(); }
    void windowInsideTheScreen()
    {
        QFETCH(QString, layout);
        app::MainWindow w(m_profiles);
        QVERIFY(openShown(w, layout));
        const QRect available = w.screen()->availableGeometry();
        QVERIFY2(w.frameGeometry().width() <= available.width(),
            qPrintable(
                QStringLiteral("window %1 px wide on %2").arg(w.frameGeometry().width()).arg(available.width())));
        QVERIFY2(w.frameGeometry().height() <= available.height(),
            qPrintable(
                QStringLiteral("window %1 px tall on %2").arg(w.frameGeometry().height()).arg(available.height())));
    }

    // Every control of every Strategy tab lies whole in the panel without scrolling.
    void strategyWholeOnEveryTab_data() { layouts_data(); }
    void strategyWholeOnEveryTab()
    {
        QFETCH(QString, layout);
        app::MainWindow w(m_profiles);
        QVERIFY(openShown(w, layout));
        auto* tabs = w.strategyPanel()->findChild<QTabWidget*>(QStringLiteral("strategyGroups"));
        QVERIFY(tabs);
        for (int i = 0; i < tabs->count(); ++i) {
            tabs->setCurrentIndex(i);
            QCoreApplication::processEvents();
            const QList<const QWidget*> controls = controlsOf(tabs->widget(i));
            QVERIFY(!controls.isEmpty());
            for (const QWidget* c : controls) {
                const QString problem = notWhole(c, &w);
                QVERIFY2(problem.isEmpty(), qPrintable(tabs->tabText(i) + QStringLiteral(": ") + problem));
            }
        }
        // The tab bar shows every tab's name whole (no scroll arrows hiding one).
        const QTabBar* bar = tabs->tabBar();
        QVERIFY2(bar->tabRect(bar->count() - 1).right() <= bar->width(),
            qPrintable(QStringLiteral("tabs need %1 px, have %2")
                           .arg(bar->tabRect(bar->count() - 1).right())
                           .arg(bar->width())));
    }

    // Every figure, legend line and the Recommend button of Prediction lies whole in the panel.
    void predictionWhole_data() { layouts_data(); }
    void predictionWhole()
    {
        QFETCH(QString, layout);
        app::MainWindow w(m_profiles);
        QVERIFY(openShown(w, layout));
        views::PredictionPanel* p = w.predictionPanel();
        QList<const QWidget*> parts;
        collect<QLabel>(p, &parts);
        parts.append(p->recommendButton());
        QVERIFY(parts.size() > 10);
        for (const QWidget* part : parts) {
            const QString problem = notWhole(part, &w);
            QVERIFY2(problem.isEmpty(), qPrintable(problem));
        }
    }

    // Neither Strategy (on its tallest tab) nor Prediction shows a scroll bar, not even a thin one (issue 36: under
    // Xvfb Strategy had one of a few pixels).
    void noPanelScrolls_data() { layouts_data(); }
    void noPanelScrolls()
    {
        QFETCH(QString, layout);
        app::MainWindow w(m_profiles);
        QVERIFY(openShown(w, layout));
        auto* tabs = w.strategyPanel()->findChild<QTabWidget*>(QStringLiteral("strategyGroups"));
        for (int i = 0; i < tabs->count(); ++i) {
            tabs->setCurrentIndex(i);
            QCoreApplication::processEvents();
            const QString problem = scrolls(w, "strategyDock");
            QVERIFY2(problem.isEmpty(), qPrintable(tabs->tabText(i) + QStringLiteral(": ") + problem));
        }
        QVERIFY2(scrolls(w, "predictionDock").isEmpty(), qPrintable(scrolls(w, "predictionDock")));
    }

    // Each lesson's layout (its warnings are the longest texts Prediction shows): every figure and the status
    // line lie whole in the panel, wrapped rather than cut, and the panel does not scroll.
    void predictionWholeInEveryLesson()
    {
        QStringList errors;
        const auto lessons = views::loadLessons(m_profiles, &errors);
        QVERIFY(errors.isEmpty());
        app::MainWindow w(m_profiles);
        QVERIFY(openShown(w, QString::fromLatin1(app::MainWindow::kExample)));
        for (const views::Lesson& lesson : lessons) {
            QSignalSpy shown(&w, &app::MainWindow::analysisShown);
            QVERIFY(w.startLesson(lesson.id));
            QVERIFY(!shown.isEmpty() || shown.wait(120000));
            QCoreApplication::processEvents();
            views::PredictionPanel* p = w.predictionPanel();
            QList<const QWidget*> parts;
            collect<QLabel>(p, &parts);
            parts.append(p->recommendButton());
            for (const QWidget* part : parts) {
                const QString problem = notWhole(part, &w);
                QVERIFY2(problem.isEmpty(), qPrintable(lesson.id + QStringLiteral(": ") + problem));
                const auto* label = qobject_cast<const QLabel*>(part);
                // A label shows all its lines: its height is what its text needs at its width.
                if (label && label->wordWrap() && !label->text().isEmpty())
                    QVERIFY2(label->height() >= label->heightForWidth(label->width()),
                        qPrintable(QStringLiteral("%1: \"%2\" is %3 px tall, needs %4")
                                       .arg(lesson.id, label->text().left(60))
                                       .arg(label->height())
                                       .arg(label->heightForWidth(label->width()))));
            }
            QVERIFY2(scrolls(w, "predictionDock").isEmpty(),
                qPrintable(lesson.id + QStringLiteral(": ") + scrolls(w, "predictionDock")));
        }
    }

    // At a lesson's last step the Next button reads "Done: next lesson ▶", wider than at the first: the dock widens
    // to it, so the step's text wraps inside the dock instead of running past its edge (a horizontal scroll bar).
    void lastStepNotCut()
    {
        app::MainWindow w(m_profiles);
        QVERIFY(openShown(w, QString::fromLatin1(app::MainWindow::kExample)));
        QVERIFY(w.startLesson(QStringLiteral("hybrid-zero")));
        QSignalSpy played(w.lessonDock(), &views::LessonDock::playedTo);
        w.lessonDock()->playTo(1);
        QVERIFY(!played.isEmpty() || played.wait(120000));
        const auto* dock = w.findChild<QDockWidget*>(QStringLiteral("lessonsDock"));
        const auto* area = qobject_cast<const QScrollArea*>(dock->widget());
        QVERIFY(area);
        QVERIFY(w.lessonDock()->nextButton()->text().contains(QStringLiteral("next lesson")));
        QTRY_VERIFY2(area->horizontalScrollBar()->maximum() == 0,
            qPrintable(QStringLiteral("Lessons %1 px wide, its step needs %2")
                           .arg(area->viewport()->width())
                           .arg(area->widget()->minimumSizeHint().width())));
        QVERIFY(w.frameGeometry().width() <= w.screen()->availableGeometry().width());
    }

    // Opening Lessons keeps the window inside the screen, and the dock shows its buttons whole.
    void lessonsFit()
    {
        app::MainWindow w(m_profiles);
        QVERIFY(openShown(w, QString::fromLatin1(app::MainWindow::kExample)));
        const QRect available = w.screen()->availableGeometry();
        QVERIFY(w.startLesson(QStringLiteral("one-device")));
        QCoreApplication::processEvents();
        QTRY_VERIFY(w.findChild<QDockWidget*>(QStringLiteral("lessonsDock"))->isVisible());
        QVERIFY2(w.frameGeometry().width() <= available.width(),
            qPrintable(
                QStringLiteral("window %1 px wide on %2").arg(w.frameGeometry().width()).arg(available.width())));
        QVERIFY(w.frameGeometry().height() <= available.height());
        // The dock takes its room once it is laid out (a queued call): wait for Next to show whole.
        const QPushButton* next = nullptr;
        for (const QPushButton* b : w.lessonDock()->findChildren<QPushButton*>())
            if (b->text().startsWith(QStringLiteral("Next")))
                next = b;
        QVERIFY(next);
        QTRY_VERIFY2(notWhole(next, &w).isEmpty(), qPrintable(notWhole(next, &w)));
        const QList<QPushButton*> buttons = w.lessonDock()->findChildren<QPushButton*>();
        int shown = 0;
        for (const QPushButton* b : buttons) {
            if (!b->isVisibleTo(w.lessonDock()))
                continue;
            ++shown;
            const QString problem = notWhole(b, &w);
            QVERIFY2(problem.isEmpty(), qPrintable(b->text() + QStringLiteral(": ") + problem));
            QVERIFY2(b->width() >= b->sizeHint().width(),
                qPrintable(QStringLiteral("%1 is %2 px wide, needs %3")
                               .arg(b->text())
                               .arg(b->width())
                               .arg(b->sizeHint().width())));
        }
        QVERIFY(shown >= 3); // Back, Show me, Next at least
        // The step's text has room: the dock is at least a quarter of the window tall.
        const auto* dock = w.findChild<QDockWidget*>(QStringLiteral("lessonsDock"));
        QVERIFY2(dock->height() >= w.height() / 4,
            qPrintable(QStringLiteral("Lessons %1 px tall in a window of %2").arg(dock->height()).arg(w.height())));
        // The Layers table above it keeps room for a useful number of blocks (issue 36: about 110 px at 1280×800,
        // four rows): at least eight rows.
        const views::LayerPalette* layers = w.layerPalette();
        const int rows = layers->viewport()->height() / std::max(1, layers->verticalHeader()->defaultSectionSize());
        QVERIFY2(rows >= 8,
            qPrintable(QStringLiteral("Layers shows %1 rows (%2 px) beside Lessons of %3 px")
                           .arg(rows)
                           .arg(layers->viewport()->height())
                           .arg(dock->height())));
    }
};

int main(int argc, char** argv)
{
    // An offscreen screen of the size under test (Qt's offscreen platform reads its screens from a JSON file).
    QTemporaryDir dir;
    const QSize s = screenSize();
    const QString config = dir.filePath(QStringLiteral("screen.json"));
    QFile f(config);
    if (!f.open(QIODevice::WriteOnly))
        return 2;
    f.write(QStringLiteral("{\"screens\": [{\"name\": \"fit\", \"x\": 0, \"y\": 0, \"width\": %1, \"height\": %2, "
                           "\"logicalDpi\": 96, \"logicalBaseDpi\": 96, \"dpr\": 1}]}")
                .arg(s.width())
                .arg(s.height())
                .toUtf8());
    f.close();
    qputenv("QT_QPA_PLATFORM", ("offscreen:configfile=" + config).toLocal8Bit());
    QApplication app(argc, argv);
    TestWorkbenchFit test;
    QTEST_SET_MAIN_SOURCE_PATH
    return QTest::qExec(&test, argc, argv);
}

#include "tst_workbenchfit.moc"
