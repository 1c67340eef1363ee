// The map's way around large clusters: finding a rank's device, the highlight a jump leaves, the stage labels
// of the overview and the node tooltip (TopologyScene's part; TopologyView holds the jump box).
#include "views/Colors.h"
#include "views/NodeItem.h"
#include "views/TopologyScene.h"

#include <QGraphicsSimpleTextItem>

#include <algorithm>
#include <set>

namespace loom::views {

std::pair<std::int64_t, std::int64_t> TopologyScene::deviceOfRank(std::int64_t rank) const
{
    // Rank r runs on device r (node-major), as fill() places them.
    if (rank < 0 || m_devicesPerNode <= 0 || rank >= std::int64_t(m_devices.size())
        || m_devices[std::size_t(rank)].rank != rank)
        return { -1, -1 };
    return { rank / m_devicesPerNode, rank % m_devicesPerNode };
}

void TopologyScene::setHighlight(std::int64_t node, std::int64_t local)
{
    const auto old = m_highlight;
    m_highlight = { node, local };
    for (std::int64_t n : { old.first, node })
        if (n >= 0 && n < m_nodes)
            m_items[std::size_t(n)]->update();
}

void TopologyScene::placeStageLabels()
{
    const std::int64_t stages = m_world > 0 ? m_layout.parallel.pp : 0;
    while (std::int64_t(m_stageLabels.size()) > stages) {
        delete m_stageLabels.back();
        m_stageLabels.pop_back();
    }
    QFont font;
    font.setBold(true);
    for (std::int64_t s = std::int64_t(m_stageLabels.size()); s < stages; ++s) {
        auto* label = new QGraphicsSimpleTextItem(tr("stage %1").arg(s));
        label->setFont(font);
        label->setBrush(QColor(0x11, 0x11, 0x11));
        label->setPen(QPen(QColor(255, 255, 255, 220), 0));
        // Constant size on screen: readable however far the map is zoomed out.
        label->setFlag(QGraphicsItem::ItemIgnoresTransformations);
        label->setZValue(2);
        addItem(label);
        m_stageLabels.push_back(label);
    }
    // Each at the first device of its stage (in rank order).
    std::vector<bool> placed(std::size_t(stages), false);
    for (std::size_t i = 0; i < m_devices.size(); ++i) {
        const DeviceView& d = m_devices[i];
        if (d.rank < 0 || d.coord.pp < 0 || d.coord.pp >= stages || placed[std::size_t(d.coord.pp)])
            continue;
        placed[std::size_t(d.coord.pp)] = true;
        const auto node = std::int64_t(i) / m_devicesPerNode, local = std::int64_t(i) % m_devicesPerNode;
        m_stageLabels[std::size_t(d.coord.pp)]->setPos(deviceRect(node, local).topLeft());
    }
    showStageLabels();
}

void TopologyScene::setOverview(bool on, qreal zoom)
{
    if (on == m_overview && zoom == m_overviewZoom)
        return;
    m_overview = on;
    m_overviewZoom = zoom;
    showStageLabels();
}

void TopologyScene::showStageLabels()
{
    // Labels keep their size on screen while the map shrinks: keep each only where it overlaps none kept
    // before it, in stage order, so the labels shown stay readable (every k-th stage when they are dense).
    std::vector<QRectF> kept;
    for (auto* label : m_stageLabels) {
        const QRectF onScreen(label->pos() * m_overviewZoom, label->boundingRect().size() + QSizeF(4, 0));
        const bool clear = m_overview
            && std::none_of(kept.begin(), kept.end(), [&](const QRectF& k) { return k.intersects(onScreen); });
        label->setVisible(clear);
        if (clear)
            kept.push_back(onScreen);
    }
}

QGraphicsSimpleTextItem* TopologyScene::stageLabel(std::int64_t stage) const
{
    return stage >= 0 && stage < std::int64_t(m_stageLabels.size()) ? m_stageLabels[std::size_t(stage)] : nullptr;
}

namespace {
// "3", "3–5" or "1, 4, 7" for a set of numbers.
QString numbers(const std::set<std::int64_t>& v)
{
    if (v.empty())
        return QString();
    if (*v.rbegin() - *v.begin() + 1 == std::int64_t(v.size()))
        return v.size() == 1 ? QString::number(*v.begin()) : QStringLiteral("%1–%2").arg(*v.begin()).arg(*v.rbegin());
    QStringList parts;
    for (std::int64_t x : v)
        parts << QString::number(x);
    return parts.join(QStringLiteral(", "));
}
} // namespace

QString TopologyScene::nodeToolTip(std::int64_t node) const
{
    QString s = tr("<b>node %1</b>").arg(node);
    if (node < std::int64_t(m_layout.cluster.hosts.size()))
        s += tr(" (%1)").arg(QString::fromStdString(m_layout.cluster.hosts[std::size_t(node)]).toHtmlEscaped());
    std::set<std::int64_t> ranks, stages, replicas, tp;
    for (std::int64_t i = 0; i < m_devicesPerNode; ++i) {
        const DeviceView& d = device(node, i);
        if (d.rank < 0)
            continue;
        ranks.insert(d.rank);
        stages.insert(d.coord.pp);
        replicas.insert(d.coord.dp);
        tp.insert(d.coord.tp);
    }
    if (ranks.empty())
        return s + tr("<br>not used by this layout (it runs %1 ranks)").arg(m_world);
    s += tr("<br>ranks %1").arg(numbers(ranks));
    s += (stages.size() == 1 ? tr("<br>pipeline stage %1") : tr("<br>pipeline stages %1")).arg(numbers(stages));
    s += (replicas.size() == 1 ? tr("<br>DP replica %1") : tr("<br>DP replicas %1")).arg(numbers(replicas));
    s += tr("<br>tp positions %1").arg(numbers(tp));
    return s;
}

} // namespace loom::views
