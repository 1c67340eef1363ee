#include "views/TopologyScene.h"
#include "engine/plan/ExpertGroups.h"

#include "views/Colors.h"
#include "views/NodeItem.h"

#include <QFontMetricsF>
#include <QGraphicsPathItem>
#include <QLocale>

#include <cmath>

namespace loom::views {

namespace {
constexpr qreal kGapX = 56, kGapY = 44;

QString gb(double x)
{
    return QLocale().toString(x, 'f', x < 10 ? 2 : 1);
}

QString linkText(const plan::LinkSpec& link)
{
    QString s = QObject::tr("%1: %2 GB/s per device per direction, latency %3 µs")
                    .arg(linkName(link.kind))
                    .arg(QLocale().toString(link.bandwidthGBs, 'f', link.bandwidthGBs < 10 ? 1 : 0))
                    .arg(QLocale().toString(link.latencyUs, 'g', 3));
    if (link.nicsPerNode > 0)
        s += QObject::tr(", %1 adapter(s) per node").arg(link.nicsPerNode);
    return s;
}
} // namespace

TopologyScene::TopologyScene(QObject* parent)
    : QGraphicsScene(parent)
{
    setItemIndexMethod(QGraphicsScene::BspTreeIndex);
}

void TopologyScene::show(const plan::Layout& layout, const plan::Prediction* prediction)
{
    const std::int64_t world = layout.parallel.worldSize();
    const bool autoDevices = layout.cluster.autoDevices();
    const std::int64_t perNode = autoDevices ? std::max<std::int64_t>(world, 1) : layout.cluster.devicesPerNode;
    const std::int64_t nodes = autoDevices ? 1 : std::max<std::int64_t>(layout.nodes, 1);
    const bool reshape = nodes != m_nodes || perNode != m_devicesPerNode || layout.cluster != m_layout.cluster;
    m_layout = layout;
    m_world = world;
    if (reshape) {
        m_nodes = nodes;
        m_devicesPerNode = perNode;
        rebuild();
    }
    fill(prediction);
    placeStageLabels();
    update();
}

int TopologyScene::columnsPerNode() const
{
    return int(std::min<std::int64_t>(m_devicesPerNode, 8));
}

QSizeF TopologyScene::nodeSize() const
{
    const int cols = columnsPerNode();
    const auto rows = (m_devicesPerNode + cols - 1) / cols;
    // Wide enough for the longest "node N · host" header (up to a limit; beyond it the header is elided),
    // so a node of one or two devices does not cut its host name to "node 0 · h".
    qreal title = 0;
    const QFontMetricsF metrics(NodeItem::titleFont(font()));
    const std::int64_t named = std::min<std::int64_t>(m_nodes, std::int64_t(m_layout.cluster.hosts.size()));
    for (std::int64_t n = 0; n < named; ++n)
        title = std::max(title, metrics.horizontalAdvance(NodeItem::titleOf(m_layout, n)));
    const qreal inner = std::max(cols * kCellWidth, std::min(std::ceil(title) + 2, NodeItem::maxTitleWidth()));
    return { inner + 2 * kPadding, kHeader + qreal(rows) * kCellHeight + kBus + kPadding };
}

void TopologyScene::rebuild()
{
    clear(); // deletes the items
    m_items.clear();
    m_fabric = nullptr;
    m_dropTarget = m_highlight = { -1, -1 };
    m_stageLabels.clear();
    const QSizeF size = nodeSize();
    // A grid of nodes about as wide as a 16:10 window is.
    const auto columns = std::max<std::int64_t>(1,
        std::int64_t(std::ceil(std::sqrt(double(m_nodes) * 1.6 * (size.height() + kGapY) / (size.width() + kGapX)))));
    const std::int64_t columnsUsed = std::min(columns, m_nodes);
    QPainterPath fabric;
    const std::int64_t rows = (m_nodes + columnsUsed - 1) / columnsUsed;
    for (std::int64_t n = 0; n < m_nodes; ++n) {
        auto* item = new NodeItem(this, n, size);
        const qreal x = qreal(n % columnsUsed) * (size.width() + kGapX) + kGapX;
        const qreal y = qreal(n / columnsUsed) * (size.height() + kGapY);
        item->setPos(x, y);
        addItem(item);
        m_items.push_back(item);
        // The node's uplink to its row's leaf switch.
        fabric.moveTo(x + size.width() / 2, y + size.height());
        fabric.lineTo(x + size.width() / 2, y + size.height() + kGapY / 2);
    }
    if (m_nodes > 1 && m_layout.cluster.interNode) {
        for (std::int64_t r = 0; r < rows; ++r) {
            const qreal y = qreal(r) * (size.height() + kGapY) + size.height() + kGapY / 2;
            const std::int64_t inRow = std::min(columnsUsed, m_nodes - r * columnsUsed);
            fabric.moveTo(kGapX / 2, y);
            fabric.lineTo(kGapX + qreal(inRow - 1) * (size.width() + kGapX) + size.width() / 2, y);
        }
        fabric.moveTo(kGapX / 2, size.height() + kGapY / 2);
        fabric.lineTo(kGapX / 2, qreal(rows - 1) * (size.height() + kGapY) + size.height() + kGapY / 2);
        // Drawn in scene units, not pixels, so the links recede when the map is zoomed out to many nodes.
        QPen pen = linkPen(m_layout.cluster.interNode->kind);
        pen.setCosmetic(false);
        pen.setWidthF(pen.widthF() * 1.5);
        m_fabric = addPath(fabric, pen);
        m_fabric->setToolTip(interLinkToolTip());
        m_fabric->setZValue(-1);
    }
    setSceneRect(itemsBoundingRect().adjusted(-kGapX, -kGapY, kGapX, kGapY));
}

void TopologyScene::fill(const plan::Prediction* prediction)
{
    m_devices.assign(std::size_t(m_nodes * m_devicesPerNode), DeviceView {});
    if (m_world <= 0 || m_layout.parallel.tp < 1 || m_layout.parallel.pp < 1 || m_layout.parallel.dp < 1)
        return;
    const plan::RankGrid grid(m_layout.parallel.tp, m_layout.parallel.pp, m_layout.parallel.dp, m_devicesPerNode,
        m_layout.parallel.order, std::max<std::int64_t>(1, m_layout.parallel.cp));
    const std::int64_t used = std::min<std::int64_t>(m_world, std::int64_t(m_devices.size()));
    for (std::int64_t r = 0; r < used; ++r) {
        DeviceView& d = m_devices[std::size_t(r)];
        d.rank = r;
        d.coord = grid.coordOf(r);
        for (std::int64_t v = 0; v < m_layout.parallel.vpp; ++v)
            d.virtualStages.push_back(v * m_layout.parallel.pp + d.coord.pp);
        if (prediction && std::size_t(d.coord.pp) < prediction->memoryPerStage.size())
            d.memory = prediction->memoryPerStage[std::size_t(d.coord.pp)];
    }
}

const DeviceView& TopologyScene::device(std::int64_t node, std::int64_t local) const
{
    return m_devices.at(std::size_t(node * m_devicesPerNode + local));
}

QRectF TopologyScene::deviceRect(std::int64_t node, std::int64_t local) const
{
    const NodeItem* item = m_items.at(std::size_t(node));
    return item->mapRectToScene(item->cellRect(local));
}

std::pair<std::int64_t, std::int64_t> TopologyScene::deviceAt(const QPointF& scenePos) const
{
    for (QGraphicsItem* item : items(scenePos)) {
        if (auto* node = dynamic_cast<NodeItem*>(item)) {
            const std::int64_t cell = node->cellAt(node->mapFromScene(scenePos));
            if (cell >= 0)
                return { node->node(), cell };
        }
    }
    return { -1, -1 };
}

void TopologyScene::setDropTarget(std::int64_t node, std::int64_t local)
{
    if (m_dropTarget == std::pair { node, local })
        return;
    const auto old = m_dropTarget;
    m_dropTarget = { node, local };
    if (old.first >= 0 && old.first < m_nodes)
        m_items[std::size_t(old.first)]->update();
    if (node >= 0 && node < m_nodes)
        m_items[std::size_t(node)]->update();
}

QString TopologyScene::deviceToolTip(std::int64_t node, std::int64_t local) const
{
    const DeviceView& d = device(node, local);
    QString s = tr("<b>node %1, device %2</b>").arg(node).arg(local);
    if (node < std::int64_t(m_layout.cluster.hosts.size()))
        s += tr(" (%1)").arg(QString::fromStdString(m_layout.cluster.hosts[std::size_t(node)]).toHtmlEscaped());
    s += tr("<br>%1, %2 GB")
             .arg(QString::fromStdString(m_layout.cluster.device.name).toHtmlEscaped(),
                 gb(m_layout.cluster.device.memoryGB));
    if (d.rank < 0)
        return s + tr("<br>not used by this layout (it runs %1 ranks)").arg(m_world);
    if (m_layout.parallel.cp > 1)
        s += tr("<br>rank %1 &nbsp;(tp %2, cp %3, pp %4, dp %5)")
                 .arg(d.rank)
                 .arg(d.coord.tp)
                 .arg(d.coord.cp)
                 .arg(d.coord.pp)
                 .arg(d.coord.dp)
            + tr("<br>context parallel: holds chunks %1 and %2 of the %3 of each sequence (ring attention over a CP "
                 "group of %4)")
                  .arg(d.coord.cp)
                  .arg(2 * m_layout.parallel.cp - 1 - d.coord.cp)
                  .arg(2 * m_layout.parallel.cp)
                  .arg(m_layout.parallel.cp);
    else
        s += tr("<br>rank %1 &nbsp;(tp %2, pp %3, dp %4)").arg(d.rank).arg(d.coord.tp).arg(d.coord.pp).arg(d.coord.dp);
    if (m_layout.model.isMoe() && m_layout.parallel.ep > 1)
        s += expertToolTip(d);
    const auto ranges = m_layout.stageRanges();
    QStringList stages;
    for (std::int64_t vs : d.virtualStages) {
        if (vs >= std::int64_t(ranges.size()))
            continue;
        const auto& r = ranges[std::size_t(vs)];
        QStringList what;
        if (vs == 0)
            what << tr("embedding");
        if (!r.empty())
            what << (r.first == r.last ? tr("block %1").arg(r.first) : tr("blocks %1–%2").arg(r.first).arg(r.last));
        if (vs == std::int64_t(ranges.size()) - 1)
            what << tr("final norm, LM head");
        stages << tr("stage %1: %2").arg(vs).arg(what.join(QStringLiteral(", ")));
    }
    if (!stages.isEmpty())
        s += QStringLiteral("<br>") + stages.join(QStringLiteral("<br>"));
    if (d.memory) {
        const auto& m = *d.memory;
        const bool fits = m.fitsIn(capacityGB());
        s += tr("<br>memory %1 of %2 GB%3: parameters %4, gradients %5, optimizer %6, activations %7, reserve %8")
                 .arg(gb(m.total()), gb(capacityGB()), fits ? QString() : tr(" <b>(does not fit)</b>"), gb(m.params),
                     gb(m.grads), gb(m.optimizer), gb(m.activations), gb(m.reserve));
        if (m.gathered > 0)
            s += tr(", gathered parameters %1").arg(gb(m.gathered));
        s += tr("<br>ZeRO-%1, %2 attention%3%4")
                 .arg(m_layout.memory.zero)
                 .arg(QString::fromStdString(std::string(plan::toString(m_layout.memory.attention))),
                     m_layout.parallel.sp ? tr(", sequence parallel over tp %1").arg(m_layout.parallel.tp) : QString(),
                     m_layout.memory.efficientNorm ? tr(", norms keep their outputs") : QString());
    } else {
        s += tr("<br>memory: no prediction (the layout is not valid yet)");
    }
    return s;
}

QString TopologyScene::intraLinkToolTip() const
{
    return tr("Inside the node: ") + linkText(m_layout.cluster.intraNode);
}

QString TopologyScene::interLinkToolTip() const
{
    return m_layout.cluster.interNode ? tr("Between nodes: ") + linkText(*m_layout.cluster.interNode) : QString();
}

} // namespace loom::views

namespace loom::views {

QString TopologyScene::expertToolTip(const DeviceView& d) const
{
    const plan::RankGrid grid(m_layout.parallel.tp, m_layout.parallel.pp, m_layout.parallel.dp, m_devicesPerNode,
        m_layout.parallel.order, std::max<std::int64_t>(1, m_layout.parallel.cp));
    const std::int64_t ep = m_layout.parallel.ep, e = d.coord.dp % ep, per = m_layout.model.experts / ep;
    auto ranks = [](const std::vector<std::int64_t>& v) {
        QStringList out;
        for (auto r : v)
            out << QString::number(r);
        return out.join(QStringLiteral(", "));
    };
    if (m_layout.parallel.expertTp > 0) { // Megatron-Core's grid: ep need not divide dp (ExpertGroups.h)
        const plan::ExpertGrid g = plan::expertGrid(m_layout);
        return tr("<br>expert parallel on Megatron-Core's grid: an expert group of %1 (ranks %2) shares out the "
                  "experts, %3 of every MoE block on each, each expert split over %4 ranks; %5 such groups hold "
                  "the same experts")
            .arg(g.ep)
            .arg(ranks(plan::megatronExpertGroupOf(grid, g, d.rank)))
            .arg(per)
            .arg(g.etp)
            .arg(g.edp);
    }
    return tr("<br>expert parallel: member e%1 of an expert group of %2 (ranks %3) holds experts %4 to %5 of every "
              "MoE block; tokens reach them by all-to-all; their gradients are reduced with ranks %6")
        .arg(e)
        .arg(ep)
        .arg(ranks(plan::expertGroupOf(grid, ep, d.rank)))
        .arg(e * per)
        .arg((e + 1) * per - 1)
        .arg(ranks(plan::expertDataGroupOf(grid, ep, d.rank)));
}

} // namespace loom::views
