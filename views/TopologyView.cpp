#include "views/TopologyView.h"

#include "views/Colors.h"
#include "views/LayerModel.h"
#include "views/TopologyScene.h"

#include <QDragEnterEvent>
#include <QKeyEvent>
#include <QMimeData>
#include <QPainter>
#include <QScrollBar>
#include <QWheelEvent>

#include <cmath>

namespace loom::views {

TopologyView::TopologyView(TopologyScene* scene, QWidget* parent)
    : QGraphicsView(scene, parent)
    , m_scene(scene)
{
    setAcceptDrops(true);
    setDragMode(QGraphicsView::ScrollHandDrag);
    setTransformationAnchor(QGraphicsView::AnchorUnderMouse);
    setViewportUpdateMode(QGraphicsView::SmartViewportUpdate);
    setOptimizationFlags(QGraphicsView::DontSavePainterState);
    setRenderHint(QPainter::TextAntialiasing);
    setBackgroundRole(QPalette::Base);
    setToolTip(QString());
    connect(scene, &QGraphicsScene::sceneRectChanged, this, [this] {
        m_autoFit = true;
        fitAll();
    });
}

void TopologyView::fitAll()
{
    if (!m_scene || m_scene->sceneRect().isEmpty())
        return;
    fitInView(m_scene->sceneRect(), Qt::KeepAspectRatio);
    // A small cluster is shown at its natural size rather than blown up.
    if (zoom() > 2.0)
        setTransform(QTransform::fromScale(2.0, 2.0));
}

qreal TopologyView::zoom() const
{
    return transform().m11();
}

void TopologyView::zoomBy(qreal factor)
{
    m_autoFit = false;
    const qreal next = std::clamp(zoom() * factor, 0.01, 8.0);
    scale(next / zoom(), next / zoom());
}

void TopologyView::wheelEvent(QWheelEvent* event)
{
    zoomBy(std::pow(1.0015, event->angleDelta().y()));
    event->accept();
}

void TopologyView::keyPressEvent(QKeyEvent* event)
{
    switch (event->key()) {
    case Qt::Key_Plus:
    case Qt::Key_Equal:
    case Qt::Key_W:
        zoomBy(1.25);
        return;
    case Qt::Key_Minus:
    case Qt::Key_S:
        zoomBy(0.8);
        return;
    case Qt::Key_A:
        horizontalScrollBar()->setValue(horizontalScrollBar()->value() - viewport()->width() / 5);
        return;
    case Qt::Key_D:
        horizontalScrollBar()->setValue(horizontalScrollBar()->value() + viewport()->width() / 5);
        return;
    case Qt::Key_F:
        m_autoFit = true;
        fitAll();
        return;
    default:
        QGraphicsView::keyPressEvent(event);
    }
}

void TopologyView::resizeEvent(QResizeEvent* event)
{
    QGraphicsView::resizeEvent(event);
    if (m_autoFit)
        fitAll(); // until the user zooms, the map follows the window's size
}

void TopologyView::dragEnterEvent(QDragEnterEvent* event)
{
    if (event->mimeData()->hasFormat(QString::fromLatin1(LayerModel::kMimeType)))
        event->acceptProposedAction();
    else
        event->ignore();
}

void TopologyView::dragMoveEvent(QDragMoveEvent* event)
{
    std::int64_t first = 0, last = 0;
    if (!LayerModel::decodeBlocks(event->mimeData(), &first, &last)) {
        event->ignore();
        return;
    }
    const auto [node, local] = m_scene->deviceAt(mapToScene(event->position().toPoint()));
    const bool onDevice = node >= 0 && m_scene->device(node, local).rank >= 0;
    m_scene->setDropTarget(onDevice ? node : -1, onDevice ? local : -1);
    if (onDevice)
        event->acceptProposedAction();
    else
        event->ignore();
}

void TopologyView::dragLeaveEvent(QDragLeaveEvent* event)
{
    m_scene->setDropTarget(-1, -1);
    QGraphicsView::dragLeaveEvent(event);
}

void TopologyView::dropEvent(QDropEvent* event)
{
    m_scene->setDropTarget(-1, -1);
    std::int64_t first = 0, last = 0;
    if (!LayerModel::decodeBlocks(event->mimeData(), &first, &last)) {
        event->ignore();
        return;
    }
    const auto [node, local] = m_scene->deviceAt(mapToScene(event->position().toPoint()));
    if (node < 0 || m_scene->device(node, local).rank < 0) {
        emit dropRefused(tr("Drop the blocks on a device that runs a rank of this layout (one with a stage colour)."));
        event->ignore();
        return;
    }
    event->acceptProposedAction();
    emit blocksDropped(m_scene->device(node, local).rank, first, last);
}

} // namespace loom::views
