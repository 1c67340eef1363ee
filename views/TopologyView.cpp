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
    setViewportUpdateMode(QGraphicsView::FullViewportUpdate); // the legend is drawn over the scene
    setOptimizationFlags(QGraphicsView::DontSavePainterState);
    setRenderHint(QPainter::TextAntialiasing);
    setBackgroundRole(QPalette::Base);
    setToolTip(QString());
    connect(scene, &QGraphicsScene::sceneRectChanged, this, [this] {
        m_fitPending = true;
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
    m_fitPending = false;
}

qreal TopologyView::zoom() const { return transform().m11(); }

void TopologyView::zoomBy(qreal factor)
{
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
    case Qt::Key_W: zoomBy(1.25); return;
    case Qt::Key_Minus:
    case Qt::Key_S: zoomBy(0.8); return;
    case Qt::Key_A: horizontalScrollBar()->setValue(horizontalScrollBar()->value() - viewport()->width() / 5); return;
    case Qt::Key_D: horizontalScrollBar()->setValue(horizontalScrollBar()->value() + viewport()->width() / 5); return;
    case Qt::Key_F: fitAll(); return;
    default: QGraphicsView::keyPressEvent(event);
    }
}

void TopologyView::resizeEvent(QResizeEvent* event)
{
    QGraphicsView::resizeEvent(event);
    if (m_fitPending)
        fitAll();
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

void TopologyView::drawForeground(QPainter* painter, const QRectF&)
{
    // The legend, in viewport coordinates so it keeps its size and place whatever the zoom.
    const auto& layout = m_scene->layout();
    if (m_scene->nodeCount() == 0)
        return;
    painter->save();
    painter->resetTransform();
    painter->setRenderHint(QPainter::Antialiasing);
    QFont f = font();
    f.setPointSizeF(std::max(8.0, f.pointSizeF() - 1));
    painter->setFont(f);
    const QFontMetrics fm(f);
    const int line = fm.height() + 4;
    struct Entry {
        enum { Link, Swatch, Outline, Bar } kind;
        QPen pen;
        QColor color;
        QString text;
    };
    std::vector<Entry> entries;
    entries.push_back({Entry::Link, linkPen(layout.cluster.intraNode.kind), {},
        tr("%1 in node, %2 GB/s").arg(linkName(layout.cluster.intraNode.kind)).arg(layout.cluster.intraNode.bandwidthGBs)});
    if (layout.cluster.interNode && m_scene->nodeCount() > 1)
        entries.push_back({Entry::Link, linkPen(layout.cluster.interNode->kind), {},
            tr("%1 between nodes, %2 GB/s").arg(linkName(layout.cluster.interNode->kind)).arg(layout.cluster.interNode->bandwidthGBs)});
    const std::int64_t pp = layout.parallel.pp;
    for (std::int64_t s = 0; s < std::min<std::int64_t>(pp, 4); ++s)
        entries.push_back({Entry::Swatch, {}, stageColor(s), tr("pipeline stage %1").arg(s)});
    if (pp > 4)
        entries.push_back({Entry::Swatch, {}, stageColor(4), tr("… %1 stages in all (colours repeat)").arg(pp)});
    if (layout.parallel.tp > 1)
        entries.push_back({Entry::Outline, {}, {}, tr("tensor-parallel group (tp %1)").arg(layout.parallel.tp)});
    entries.push_back({Entry::Bar, {}, QColor(0x33, 0x66, 0x33), tr("memory used / capacity")});
    entries.push_back({Entry::Bar, {}, colors::overBudget, tr("does not fit")});
    int width = 0;
    for (const auto& e : entries)
        width = std::max(width, fm.horizontalAdvance(e.text));
    const QRect box(8, viewport()->height() - 8 - int(entries.size()) * line - 8, width + 52, int(entries.size()) * line + 8);
    QColor bg = palette().color(QPalette::Base);
    bg.setAlpha(230);
    painter->setPen(QPen(palette().color(QPalette::Mid), 1));
    painter->setBrush(bg);
    painter->drawRoundedRect(box, 4, 4);
    int y = box.top() + 4;
    for (const auto& e : entries) {
        const QRect mark(box.left() + 8, y + 2, 30, line - 8);
        switch (e.kind) {
        case Entry::Link: {
            QPen pen = e.pen;
            painter->setPen(pen);
            painter->drawLine(mark.left(), mark.center().y(), mark.right(), mark.center().y());
            break;
        }
        case Entry::Swatch:
            painter->setPen(QPen(QColor(0x55, 0x55, 0x55), 1));
            painter->setBrush(e.color);
            painter->drawRect(mark);
            break;
        case Entry::Outline:
            painter->setPen(QPen(QColor(0x22, 0x22, 0x22), 2));
            painter->setBrush(Qt::NoBrush);
            painter->drawRoundedRect(mark, 3, 3);
            break;
        case Entry::Bar:
            painter->setPen(QPen(QColor(0x33, 0x33, 0x33), 1));
            painter->setBrush(Qt::white);
            painter->drawRect(mark.adjusted(0, 3, 0, -3));
            painter->setBrush(e.color);
            painter->drawRect(QRect(mark.left(), mark.top() + 3, mark.width() * 2 / 3, mark.height() - 6));
            break;
        }
        painter->setPen(palette().color(QPalette::Text));
        painter->drawText(QRect(mark.right() + 8, y, width + 4, line), Qt::AlignVCenter | Qt::AlignLeft, e.text);
        y += line;
    }
    painter->restore();
}

} // namespace loom::views
