#include "views/NodeItem.h"

#include "views/Colors.h"
#include "views/TopologyScene.h"

#include <QFontMetricsF>
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

QString NodeItem::title() const
{
    return titleOf(m_scene->layout(), m_node);
}

QString NodeItem::titleOf(const plan::Layout& layout, std::int64_t node)
{
    QString title = QObject::tr("node %1").arg(node);
    const auto& hosts = layout.cluster.hosts;
    if (node >= 0 && node < std::int64_t(hosts.size()))
        title += QStringLiteral(" · ") + QString::fromStdString(hosts[std::size_t(node)]);
    return title;
}

QString NodeItem::shownTitle() const
{
    const qreal room = m_size.width() - 2 * TopologyScene::kPadding;
    return QFontMetricsF(titleFont(m_scene->font())).elidedText(title(), Qt::ElideRight, room);
}

QFont NodeItem::titleFont(const QFont& base)
{
    QFont f = base;
    f.setPointSizeF(8.5);
    f.setBold(true);
    return f;
}

qreal NodeItem::maxTitleWidth()
{
    return 4 * TopologyScene::kCellWidth; // "node 12 · gpu-node-017.cluster" fits; longer names are elided
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
        p->setFont(titleFont(m_scene->font()));
        p->drawText(
            QRectF(TopologyScene::kPadding, 2, box.width() - 2 * TopologyScene::kPadding, TopologyScene::kHeader - 2),
            Qt::AlignLeft | Qt::AlignVCenter, shownTitle());
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
    if (lod < kCoarse)
        paintBoundaries(p);
    if (m_scene->highlight().first == m_node) {
        // A jump's target: a ring a few pixels wide at any zoom.
        QPen ring(m_scene->palette().color(QPalette::Highlight), 4);
        ring.setCosmetic(true);
        p->setPen(ring);
        p->setBrush(Qt::NoBrush);
        p->drawRect(cellRect(m_scene->highlight().second).adjusted(-3, -3, 3, 3));
    }
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

void NodeItem::paintBoundaries(QPainter* p) const
{
    // Overview zoom: the stage colours repeat every ten stages, so a dark line marks where a device of
    // another pipeline stage begins (rank order, across nodes too), a light one where another DP replica
    // begins within a stage; the scene's labels name the stages.
    QPen stage(QColor(0x11, 0x11, 0x11), 2), replica(QColor(0xFF, 0xFF, 0xFF), 1);
    stage.setCosmetic(true);
    replica.setCosmetic(true);
    const std::int64_t n = m_scene->devicesPerNode();
    const int cols = m_scene->columnsPerNode();
    for (std::int64_t i = 0; i < n; ++i) {
        const DeviceView& d = m_scene->device(m_node, i);
        if (d.rank < 0)
            continue;
        const DeviceView* before = i > 0 ? &m_scene->device(m_node, i - 1)
            : m_node > 0                 ? &m_scene->device(m_node - 1, n - 1)
                                         : nullptr;
        if (!before || before->rank < 0)
            continue;
        const bool newStage = before->coord.pp != d.coord.pp;
        if (!newStage && before->coord.dp == d.coord.dp)
            continue;
        p->setPen(newStage ? stage : replica);
        const QRectF r = cellRect(i);
        // At a row's start the boundary is the top edge (the previous device ends the row above).
        if (i > 0 && i % cols == 0)
            p->drawLine(QPointF(r.left() - 2, r.top() - 2), QPointF(r.right() + 2, r.top() - 2));
        else
            p->drawLine(QPointF(r.left() - 2, r.top() - 2), QPointF(r.left() - 2, r.bottom() + 2));
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
        setToolTip(m_scene->nodeToolTip(m_node));
}

} // namespace loom::views
