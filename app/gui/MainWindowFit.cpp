// The window fits the screen it opens on (issue 36): its frame inside the available area, the docks sized for
// that width, and the Lessons dock given room when it opens without pushing the window past the screen.
#include "app/gui/MainWindow.h"

#include <QDockWidget>
#include <QGuiApplication>
#include <QScreen>
#include <QScrollArea>
#include <QShowEvent>

#include <algorithm>

namespace loom::app {

namespace {
// The default window: 1600×1000 where the screen allows (docs/workbench.md), else the available area.
constexpr int kWidth = 1600, kHeight = 1000;

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
    // Strategy as tall as its tallest tab needs, Prediction the rest of the right side.
    const int strategyHeight = strategy->widget()->sizeHint().height() + 28; // and the dock's title
    resizeDocks({ strategy, prediction }, { strategyHeight, std::max(200, height() - strategyHeight) }, Qt::Vertical);
    resizeDocks({ findChild<QDockWidget*>(QStringLiteral("scheduleDock")) }, { height() / 4 }, Qt::Vertical);
}

void MainWindow::roomForLessons(QDockWidget* lessons)
{
    // The step, its question and the Back / Restart / Show me / Next row without scrolling, as far as two thirds
    // of the window allow; the map gives up the width, the Layers dock above the height. The window keeps its size.
    // While a lesson is open the left side takes the window's whole height (the bottom panels then span the map
    // and the right side only): at 800 px the step and its buttons need about 500 of it.
    setCorner(Qt::BottomLeftCorner, Qt::LeftDockWidgetArea);
    const QWidget* content = lessons->widget();
    if (auto* area = qobject_cast<const QScrollArea*>(content))
        content = area->widget();
    const int wide = std::min(std::max(360, content->minimumSizeHint().width() + 8), width() / 3);
    const int tall = std::min(content->minimumSizeHint().height() + 40, height() * 2 / 3);
    resizeDocks({ lessons }, { std::max(lessons->width(), wide) }, Qt::Horizontal);
    // Both docks of the column at once: asked alone, the lesson's share came out a hundred pixels short.
    auto* layers = findChild<QDockWidget*>(QStringLiteral("layersDock"));
    const int column = layers->height() + lessons->height();
    const int lessonHeight = std::max(lessons->height(), tall);
    resizeDocks({ layers, lessons }, { std::max(80, column - lessonHeight), lessonHeight }, Qt::Vertical);
}

} // namespace loom::app
