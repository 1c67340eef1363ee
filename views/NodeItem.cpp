#include "views/NodeItem.h"

#include "views/Colors.h"
#include "views/TopologyScene.h"

#include <QGraphicsSceneHoverEvent>
#include <QPainter>
#include <QStyleOptionGraphicsItem>

namespace loom::views {

namespace {
constexpr qreal kDetailed = 0.55; // below this, no text
constexpr qreal kCoarse = 0.18; // below this, no borders or bars
} // namespace

NodeItem::NodeItem(const TopologyScene* scene, std::int64_t node, QSizeF size)
    : m_scene(scene)
    , m_node(node)
    , m_size(size)
{
    setAcceptHoverEvents(true);
}

QRectF NodeItem::boundingRect() const
{
    return { QPointF(0, 0), m_size };
}

QRectF NodeItem::cellRect(std::int64_t local) const
{
    const int cols = m_scene->columnsPerNode();
    const qreal x = TopologyScene::kPadding + qreal(local % cols) * TopologyScene::kCellWidth;
    const qreal y = TopologyScene::kHeader + qreal(local / cols) * TopologyScene::kCellHeight;
    return { x + 2, y + 2, TopologyScene::kCellWidth - 4, TopologyScene::kCellHeight - 4 };
}

std::int64_t NodeItem::cellAt(const QPointF& pos) const
{
    for (std::int64_t i = 0; i < m_scene->devicesPerNode(); ++i)
        if (cellRect(i).contains(pos))
            return i;
    return -1;
}

void NodeItem::paint(QPainter* p, const QStyleOptionGraphicsItem* option, QWidget*)
{
    const qreal lod = option->levelOfDetailFromTransform(p->worldTransform());
    const QPalette& pal = m_scene->palette();
    const QRectF box = boundingRect();
    p->setRenderHint(QPainter::Antialiasing, lod >= kDetailed);
    p->setPen(lod >= kCoarse ? QPen(pal.color(QPalette::Mid), 0) : Qt::NoPen);
    p->setBrush(pal.color(QPalette::AlternateBase));
    p->drawRoundedRect(box, 6, 6);
    if (lod >= kDetailed) {
        p->setPen(pal.color(QPalette::Text));
        QFont f = p->font();
        f.setPointSizeF(8.5);
        f.setBold(true);
        p->setFont(f);
        QString title = QObject::tr("node %1").arg(m_node);
        const auto& hosts = m_scene->layout().cluster.hosts;
        if (m_node < std::int64_t(hosts.size()))
            title += QStringLiteral(" · ") + QString::fromStdString(hosts[std::size_t(m_node)]);
        p->drawText(
            QRectF(TopologyScene::kPadding, 2, box.width() - 2 * TopologyScene::kPadding, TopologyScene::kHeader - 2),
            Qt::AlignLeft | Qt::AlignVCenter, title);
    }
    // The intra-node link: a bus under the devices, drawn as the link class is drawn everywhere.
    if (lod >= kCoarse) {
        QPen bus = linkPen(m_scene->layout().cluster.intraNode.kind);
        p->setPen(bus);
        const qreal y = box.height() - TopologyScene::kPadding - TopologyScene::kBus / 2 + 2;
        p->drawLine(QPointF(TopologyScene::kPadding + 4, y), QPointF(box.width() - TopologyScene::kPadding - 4, y));
    }
    for (std::int64_t i = 0; i < m_scene->devicesPerNode(); ++i)
        paintCell(p, i, lod);
    if (lod >= kCoarse && m_scene->layout().parallel.cp > 1)
        paintCpOutlines(p);
    if (lod >= kCoarse && m_scene->layout().parallel.tp > 1)
        paintTpOutlines(p);
}

void NodeItem::paintCell(QPainter* p, std::int64_t local, qreal lod) const
{
    const DeviceView& d = m_scene->device(m_node, local);
    const QRectF r = cellRect(local);
    const QPalette& pal = m_scene->palette();
    const bool used = d.rank >= 0;
    const bool overBudget = m_scene->overBudget(d);
    const std::int64_t stage = used ? d.coord.pp : -1;
    const QColor fill = used ? stageColor(stage) : pal.color(QPalette::Window);
    // A device that does not fit is framed in red 3 px wide on screen, whatever the zoom: zoomed out the frame
    // covers the small cell, zoomed in it still stands out beside the memory bar, which alone became invisible
    // at overview zooms (a 6-unit bar at a fifth of the size).
    QPen overPen(colors::overBudget, 3);
    overPen.setCosmetic(true);
    if (lod < kCoarse) {
        p->fillRect(r, overBudget ? colors::overBudget : fill);
        return;
    }
    const bool target = m_scene->dropTarget() == std::pair { m_node, local };
    p->setPen(target     ? QPen(pal.color(QPalette::Highlight), 3)
            : overBudget ? overPen
                         : QPen(QColor(0x55, 0x55, 0x55), 0));
    p->setBrush(fill);
    p->drawRoundedRect(r, 3, 3);
    // Memory bar: predicted use against capacity; red when it does not fit.
    const QRectF bar(r.left() + 4, r.bottom() - 9, r.width() - 8, 6);
    if (used && d.memory) {
        const double frac = std::min(1.0, d.memory->total() / std::max(1e-9, m_scene->capacityGB()));
        p->setPen(Qt::NoPen);
        p->setBrush(QColor(255, 255, 255, 200));
        p->drawRect(bar);
        p->setBrush(overBudget ? colors::overBudget : QColor(0x33, 0x66, 0x33));
        p->drawRect(QRectF(bar.left(), bar.top(), bar.width() * frac, bar.height()));
        p->setPen(QPen(QColor(0x33, 0x33, 0x33), 0));
        p->setBrush(Qt::NoBrush);
        p->drawRect(bar);
    }
    if (lod < kDetailed || !used)
        return;
    // Text is drawn dark on the light stage tints whatever the system palette, so it stays readable.
    p->setPen(QColor(0x11, 0x11, 0x11));
    QFont f = p->font();
    f.setPointSizeF(8);
    f.setBold(true);
    p->setFont(f);
    const QRectF text(r.left() + 3, r.top() + 2, r.width() - 6, 14);
    p->drawText(text, Qt::AlignLeft | Qt::AlignVCenter, QStringLiteral("r%1").arg(d.rank));
    f.setBold(false);
    f.setPointSizeF(7.5);
    p->setFont(f);
    p->drawText(text.translated(0, 14), Qt::AlignLeft | Qt::AlignVCenter,
        m_scene->layout().parallel.cp > 1
            ? QStringLiteral("s%1 t%2 c%3").arg(d.coord.pp).arg(d.coord.tp).arg(d.coord.cp)
            : QStringLiteral("s%1 t%2").arg(d.coord.pp).arg(d.coord.tp));
    const plan::Layout& l = m_scene->layout();
    const bool experts = l.model.isMoe() && l.parallel.ep > 1;
    p->drawText(text.translated(0, 28), Qt::AlignLeft | Qt::AlignVCenter,
        experts ? QStringLiteral("dp %1 e%2").arg(d.coord.dp).arg(d.coord.dp % l.parallel.ep)
                : QStringLiteral("dp %1").arg(d.coord.dp));
    if (experts) { // the expert-group member: a mark in the all-to-all colour, wider for higher members
        const std::int64_t e = d.coord.dp % l.parallel.ep;
        const qreal w = (r.width() - 8) * double(e + 1) / double(l.parallel.ep);
        p->setPen(Qt::NoPen);
        p->setBrush(colors::expertComm);
        p->drawRect(QRectF(r.left() + 4, r.bottom() - 13, w, 2.5));
    }
}

void NodeItem::paintTpOutlines(QPainter* p) const
{
    // A TP group is a run of devices with the same (pp, dp) on this node (ranks of a TP group are
    // consecutive in both rank orders).
    p->setPen(QPen(QColor(0x22, 0x22, 0x22), 2));
    p->setBrush(Qt::NoBrush);
    const std::int64_t n = m_scene->devicesPerNode();
    const int cols = m_scene->columnsPerNode();
    std::int64_t start = 0;
    for (std::int64_t i = 1; i <= n; ++i) {
        const DeviceView& a = m_scene->device(m_node, start);
        const bool breakHere = i == n || i % cols == 0 || m_scene->device(m_node, i).rank < 0 || a.rank < 0
            || m_scene->device(m_node, i).coord.pp != a.coord.pp || m_scene->device(m_node, i).coord.dp != a.coord.dp
            || m_scene->device(m_node, i).coord.cp != a.coord.cp;
        if (!breakHere)
            continue;
        if (a.rank >= 0)
            p->drawRoundedRect(cellRect(start).united(cellRect(i - 1)).adjusted(-1.5, -1.5, 1.5, 1.5), 5, 5);
        start = i;
    }
}

void NodeItem::paintCpOutlines(QPainter* p) const
{
    // A CP group's ranks are tp apart (cp varies right after tp), so its tp·cp ranks with one (pp, dp) form a
    // run of devices: outline each run of a row, dashed in the context colour, a little outside the TP outlines.
    p->setPen(contextGroupPen());
    p->setBrush(Qt::NoBrush);
    const std::int64_t n = m_scene->devicesPerNode();
    const int cols = m_scene->columnsPerNode();
    std::int64_t start = 0;
    for (std::int64_t i = 1; i <= n; ++i) {
        const DeviceView& a = m_scene->device(m_node, start);
        const bool breakHere = i == n || i % cols == 0 || m_scene->device(m_node, i).rank < 0 || a.rank < 0
            || m_scene->device(m_node, i).coord.pp != a.coord.pp || m_scene->device(m_node, i).coord.dp != a.coord.dp;
        if (!breakHere)
            continue;
        if (a.rank >= 0)
            p->drawRoundedRect(cellRect(start).united(cellRect(i - 1)).adjusted(-4, -4, 4, 4), 7, 7);
        start = i;
    }
}

void NodeItem::hoverMoveEvent(QGraphicsSceneHoverEvent* event)
{
    const std::int64_t cell = cellAt(event->pos());
    if (cell >= 0)
        setToolTip(m_scene->deviceToolTip(m_node, cell));
    else if (event->pos().y() > boundingRect().height() - TopologyScene::kPadding - TopologyScene::kBus)
        setToolTip(m_scene->intraLinkToolTip());
    else
        setToolTip(QObject::tr("node %1").arg(m_node));
}

} // namespace loom::views
