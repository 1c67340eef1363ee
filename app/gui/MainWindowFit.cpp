// The window fits the screen it opens on (issue 36): its frame inside the available area, the docks sized for
// that width, and the Lessons dock given room when it opens without pushing the window past the screen.
#include "app/gui/MainWindow.h"

#include <QDockWidget>
#include <QGuiApplication>
#include <QHeaderView>
#include <QLayout>
#include <QScreen>
#include <QScrollArea>
#include <QShowEvent>
#include <QTableView>

#include <algorithm>

namespace loom::app {

namespace {
// The default window: 1600×1000 where the screen allows (docs/workbench.md), else the available area.
constexpr int kWidth = 1600, kHeight = 1000;

// Rows of blocks the Layers table keeps in view when Lessons opens below it.
constexpr int kLayersRows = 9;

// The Layers dock's height that shows kLayersRows rows: the rows, the table's header and frame, and what the dock
// adds around the table (its title), as laid out now. The Layers / Run tab bar lies outside the dock.
int layersMinimumHeight(const QDockWidget* layers)
{
    const auto* table = qobject_cast<const QTableView*>(layers->widget());
    if (!table)
        return 250;
    const int rows = kLayersRows * table->verticalHeader()->defaultSectionSize();
    const int header = table->horizontalHeader()->isVisible() ? table->horizontalHeader()->height() : 0;
    const int tableChrome = table->height() - table->viewport()->height() - header;
    return rows + header + std::max(tableChrome, 0) + (layers->height() - table->height());
}

QRect availableArea(const QWidget* w)
{
    const QScreen* screen = w->screen() ? w->screen() : QGuiApplication::primaryScreen();
    return screen ? screen->availableGeometry() : QRect(0, 0, kWidth, kHeight);
}
} // namespace

void MainWindow::sizeToScreen()
{
    const QRect area = availableArea(this);
    resize(std::min(kWidth, area.width()), std::min(kHeight, area.height()));
}

void MainWindow::showEvent(QShowEvent* event)
{
    QMainWindow::showEvent(event);
    if (m_fitted)
        return;
    m_fitted = true;
    // The frame is known only now: shrink the window so that the frame, not only the client area, fits.
    const QRect area = availableArea(this);
    const QSize frame = frameGeometry().size() - geometry().size();
    const QSize most = area.size() - frame;
    if (width() > most.width() || height() > most.height()) {
        resize(std::min(width(), most.width()), std::min(height(), most.height()));
        move(area.topLeft());
    }
    if (!m_stateRestored)
        placeDocks();
}

void MainWindow::lessonsShown(QDockWidget* lessons, bool visible)
{
    if (visible) {
        // After the dock has its place in the layout: sizes asked for a dock not yet laid out are lost.
        QMetaObject::invokeMethod(
            this, [this, lessons] { roomForLessons(lessons); }, Qt::QueuedConnection);
    } else if (lessons->isHidden()) {
        setCorner(Qt::BottomLeftCorner, Qt::BottomDockWidgetArea); // closed: the bottom panels span the window again
    }
}

void MainWindow::placeDocks()
{
    // Layers (and Lessons below it) a fifth of the width, Strategy and Prediction a third (Prediction's two
    // breakdowns side by side need 400 px): at 1280 px that leaves the map 600 px, at 1600 px 800.
    const int w = width();
    const int left = std::clamp(w / 5, 250, 320);
    const int right = std::clamp(w / 3, 410, 480);
    resizeDocks({ findChild<QDockWidget*>(QStringLiteral("layersDock")) }, { left }, Qt::Horizontal);
    auto* strategy = findChild<QDockWidget*>(QStringLiteral("strategyDock"));
    auto* prediction = findChild<QDockWidget*>(QStringLiteral("predictionDock"));
    resizeDocks({ strategy }, { right }, Qt::Horizontal);
    // Strategy as tall as its tallest tab needs, Prediction the rest of the right side. The panel's own size hint
    // (QScrollArea's is capped at 24 lines), plus what the dock takes around the scroll area's viewport as laid out
    // now (its title and frame, which differ between styles and platforms: a fixed 28 px left a scroll bar under
    // Xvfb).
    auto* area = qobject_cast<QScrollArea*>(strategy->widget());
    const int content
        = area && area->widget() ? area->widget()->sizeHint().height() : strategy->widget()->sizeHint().height();
    const int chrome = area ? strategy->height() - area->viewport()->height() : 28;
    const int strategyHeight = content + std::max(chrome, 0);
    // And kept so: the window's later layout passes share height out among the docks again, and a few pixels
    // short are a scroll bar. Half the window at most, so that Prediction keeps its room on a small screen.
    if (area)
        area->setMinimumHeight(std::min(content, height() / 2));
    resizeDocks({ strategy, prediction }, { strategyHeight, std::max(200, height() - strategyHeight) }, Qt::Vertical);
    resizeDocks({ findChild<QDockWidget*>(QStringLiteral("scheduleDock")) }, { height() / 4 }, Qt::Vertical);
}

void MainWindow::lessonsWideEnough(QDockWidget* lessons)
{
    // A step's buttons can need more width than the first step's ("Done: next lesson ▶" at the last step): the
    // dock widens to its content, as far as a third of the window, rather than cutting the step's text.
    if (!lessons->isVisible())
        return;
    const auto* area = qobject_cast<const QScrollArea*>(lessons->widget());
    if (!area || !area->widget())
        return;
    const int chrome = lessons->width() - area->viewport()->width();
    const int needed = area->widget()->minimumSizeHint().width() + std::max(chrome, 0);
    if (needed > lessons->width())
        resizeDocks({ lessons }, { std::min(needed, width() / 3) }, Qt::Horizontal);
}

void MainWindow::roomForLessons(QDockWidget* lessons)
{
    // The step, its question and the Back / Restart / Show me / Next row without scrolling, as far as two thirds
    // of the window allow; the map gives up the width, the Layers dock above the height. The window keeps its size.
    // While a lesson is open the left side takes the window's whole height (the bottom panels then span the map
    // and the right side only): at 800 px the step and its buttons need about 500 of it.
    setCorner(Qt::BottomLeftCorner, Qt::LeftDockWidgetArea);
    layout()->activate(); // the column's height with the corner taken, before it is shared out
    const QWidget* content = lessons->widget();
    if (auto* area = qobject_cast<const QScrollArea*>(content))
        content = area->widget();
    const int wide = std::min(std::max(360, content->minimumSizeHint().width() + 8), width() / 3);
    const int tall = std::min(content->minimumSizeHint().height() + 40, height() * 2 / 3);
    resizeDocks({ lessons }, { std::max(lessons->width(), wide) }, Qt::Horizontal);
    // Both docks of the column at once: asked alone, the lesson's share came out a hundred pixels short.
    auto* layers = findChild<QDockWidget*>(QStringLiteral("layersDock"));
    // The Layers table keeps room for a useful run of blocks to select and drag (kLayersRows rows, its header
    // and the Layers / Run tabs); the lesson's own scroll area takes what remains short.
    const int column = layers->height() + lessons->height();
    const int layersMin = layersMinimumHeight(layers);
    const int lessonHeight = std::min(std::max(lessons->height(), tall), std::max(column / 3, column - layersMin));
    resizeDocks({ layers, lessons }, { column - lessonHeight, lessonHeight }, Qt::Vertical);
}

} // namespace loom::app
