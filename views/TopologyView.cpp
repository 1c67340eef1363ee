#include "views/TopologyView.h"

#include "views/Colors.h"
#include "views/DropPreview.h"
#include "views/LayerModel.h"
#include "views/NodeItem.h"
#include "views/TopologyScene.h"

#include <QDragEnterEvent>
#include <QKeyEvent>
#include <QLabel>
#include <QLineEdit>
#include <QMimeData>
#include <QPainter>
#include <QRegularExpression>
#include <QScrollBar>
#include <QWheelEvent>

#include <algorithm>
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
    m_jump = new QLineEdit(this);
    m_jump->setPlaceholderText(tr("Jump to rank or node (r12, n3)"));
    m_jump->setToolTip(tr("A rank (12, r12, rank 12) or a node (n3, node 3): the map centres on it and outlines it. "
                          "Ctrl+J comes here."));
    m_jump->setClearButtonEnabled(true);
    m_jump->setFixedWidth(220);
    connect(m_jump, &QLineEdit::returnPressed, this, [this] {
        jumpTo(m_jump->text());
        m_jump->setToolTip(m_jumpMessage);
    });
    m_preview = new QLabel(this);
    m_preview->setObjectName(QStringLiteral("dropPreview"));
    m_preview->setTextFormat(Qt::PlainText);
    m_preview->setWordWrap(true);
    m_preview->setAutoFillBackground(true);
    m_preview->setBackgroundRole(QPalette::ToolTipBase);
    m_preview->setForegroundRole(QPalette::ToolTipText);
    m_preview->setFrameShape(QFrame::StyledPanel);
    m_preview->setMargin(6);
    m_preview->setAttribute(Qt::WA_TransparentForMouseEvents); // the drag goes on over it
    m_preview->hide();
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
    zoomChanged();
}

void TopologyView::zoomChanged()
{
    // NodeItem's coarse level of detail (0.18): below it cells are plain colours, so stages need names.
    m_scene->setOverview(zoom() < 0.18, zoom());
}

void TopologyView::placeJumpBox()
{
    m_jump->move(viewport()->x() + viewport()->width() - m_jump->width() - 6, viewport()->y() + 6);
}

void TopologyView::placePreview()
{
    const int width = std::min(420, std::max(160, viewport()->width() - 12));
    m_preview->setFixedWidth(width);
    m_preview->adjustSize();
    m_preview->move(viewport()->x() + 6, viewport()->y() + viewport()->height() - m_preview->height() - 6);
}

void TopologyView::showPreview(const QString& text)
{
    if (text.isEmpty()) {
        m_preview->hide();
        return;
    }
    m_preview->setText(text);
    placePreview();
    m_preview->show();
    m_preview->raise();
}

QString TopologyView::dropPreview() const
{
    return m_preview->isVisible() ? m_preview->text() : QString();
}

bool TopologyView::jumpTo(const QString& text)
{
    static const QRegularExpression form(
        QStringLiteral("^\\s*(r|rank|n|node)?\\s*(\\d{1,12})\\s*$"), QRegularExpression::CaseInsensitiveOption);
    const auto match = form.match(text);
    if (!match.hasMatch()) {
        m_jumpMessage = tr("\"%1\" is not a rank or a node: write 12, r12 or rank 12 for a rank, n3 or node 3 for a "
                           "node.")
                            .arg(text.left(40));
        return false;
    }
    const bool node = match.captured(1).startsWith(QLatin1Char('n'), Qt::CaseInsensitive);
    const std::int64_t number = match.captured(2).toLongLong();
    std::pair<std::int64_t, std::int64_t> target { -1, -1 };
    if (node) {
        if (number >= m_scene->nodeCount()) {
            m_jumpMessage
                = tr("There is no node %1: the cluster has nodes 0 to %2.").arg(number).arg(m_scene->nodeCount() - 1);
            return false;
        }
        target = { number, 0 };
    } else {
        target = m_scene->deviceOfRank(number);
        if (target.first < 0) {
            m_jumpMessage = tr("There is no rank %1: the layout runs ranks 0 to %2.")
                                .arg(number)
                                .arg(m_scene->layout().parallel.worldSize() - 1);
            return false;
        }
    }
    m_scene->setHighlight(target.first, target.second);
    m_autoFit = false;
    // Zoomed in far enough for the device's text (NodeItem's detailed level, 0.55), never out.
    if (zoom() < 0.8)
        setTransform(QTransform::fromScale(0.8, 0.8));
    centerOn(node ? m_scene->nodeItem(target.first)->sceneBoundingRect().center()
                  : m_scene->deviceRect(target.first, target.second).center());
    zoomChanged();
    const DeviceView& d = m_scene->device(target.first, target.second);
    m_jumpMessage = node ? tr("Node %1").arg(target.first)
                         : tr("Rank %1: node %2, device %3, stage %4, tp %5, dp %6")
                               .arg(number)
                               .arg(target.first)
                               .arg(target.second)
                               .arg(d.coord.pp)
                               .arg(d.coord.tp)
                               .arg(d.coord.dp);
    return true;
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
    zoomChanged();
}

void TopologyView::wheelEvent(QWheelEvent* event)
{
    zoomBy(std::pow(1.0015, event->angleDelta().y()));
    event->accept();
}

void TopologyView::keyPressEvent(QKeyEvent* event)
{
    if (event->key() == Qt::Key_J && event->modifiers() & Qt::ControlModifier) {
        m_jump->setFocus();
        m_jump->selectAll();
        return;
    }
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
    placeJumpBox();
    if (m_preview->isVisible())
        placePreview();
    if (m_autoFit)
        fitAll(); // until the user zooms, the map follows the window's size
}

void TopologyView::dragEnterEvent(QDragEnterEvent* event)
{
    m_previewKey = { -1, -1, -1 }; // the layout may have changed since the last drag
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
    if (!onDevice) {
        showPreview(node >= 0 ? tr("Device %1 of node %2 runs no rank of this layout: drop on one with a stage colour.")
                                    .arg(local)
                                    .arg(node)
                              : QString());
        event->ignore();
        return;
    }
    // The same edit the drop applies, in words, before the button is released; worked out again only when the
    // hovered rank changes (a move event comes with every pixel).
    const std::array<std::int64_t, 3> key { m_scene->device(node, local).rank, first, last };
    if (key != m_previewKey || !m_preview->isVisible()) {
        m_previewKey = key;
        showPreview(previewDrop(m_scene->layout(), key[0], first, last).text);
    }
    event->acceptProposedAction();
}

void TopologyView::dragLeaveEvent(QDragLeaveEvent* event)
{
    m_scene->setDropTarget(-1, -1);
    showPreview(QString());
    QGraphicsView::dragLeaveEvent(event);
}

void TopologyView::dropEvent(QDropEvent* event)
{
    m_scene->setDropTarget(-1, -1);
    showPreview(QString());
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
