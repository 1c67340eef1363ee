#pragma once

#include "engine/plan/CostModel.h"
#include "engine/plan/Layout.h"
#include "engine/plan/RankGrid.h"

#include <QGraphicsScene>

#include <optional>
#include <vector>

class QGraphicsPathItem;
class QGraphicsSimpleTextItem;

namespace loom::views {

class NodeItem;

// What the map shows about one device.
struct DeviceView {
    std::int64_t rank = -1; // -1: the layout does not use this device
    plan::RankCoord coord;
    std::vector<std::int64_t> virtualStages; // the stages (chunks) its pipeline rank holds
    std::optional<plan::MemoryEstimate> memory; // predicted, when a prediction exists
};

// The cluster as boxes: one NodeItem per node holding its devices, the links between nodes as one path
// (a leaf switch per row of nodes and a spine), and for each device its rank's stage, TP group, DP replica
// and predicted memory. Geometry only changes when the node or device count does; otherwise a new layout
// or prediction only repaints.
class TopologyScene : public QGraphicsScene {
    Q_OBJECT
public:
    static constexpr qreal kCellWidth = 58, kCellHeight = 64, kPadding = 8, kHeader = 20, kBus = 14;

    explicit TopologyScene(QObject* parent = nullptr);

    // Shows `layout`; `prediction` fills the memory bars (null: none yet, or the layout is invalid).
    void show(const plan::Layout& layout, const plan::Prediction* prediction);

    const plan::Layout& layout() const { return m_layout; }
    std::int64_t nodeCount() const { return m_nodes; }
    std::int64_t devicesPerNode() const { return m_devicesPerNode; }
    // Devices per row inside a node box (at most 8, then the next row).
    int columnsPerNode() const;
    const DeviceView& device(std::int64_t node, std::int64_t local) const;
    double capacityGB() const { return m_layout.cluster.device.memoryGB; }
    // Whether the device's predicted memory does not fit: the plan's rule (MemoryEstimate::fitsIn), so the map
    // and Prediction's "does not fit" agree, and one answer for every zoom level (NodeItem draws it at each).
    bool overBudget(const DeviceView& d) const { return d.memory && !d.memory->fitsIn(capacityGB()); }
    // The scene rectangle of a device (for tests and drop targets).
    QRectF deviceRect(std::int64_t node, std::int64_t local) const;
    // The device under a scene position: (node, local) or (-1, -1).
    std::pair<std::int64_t, std::int64_t> deviceAt(const QPointF& scenePos) const;
    NodeItem* nodeItem(std::int64_t node) const { return m_items.at(std::size_t(node)); }

    // The device a drag hovers over, highlighted; (-1, -1) for none.
    void setDropTarget(std::int64_t node, std::int64_t local);
    std::pair<std::int64_t, std::int64_t> dropTarget() const { return m_dropTarget; }

    // The device running `rank`: (node, local), or (-1, -1) when the layout has no such rank.
    std::pair<std::int64_t, std::int64_t> deviceOfRank(std::int64_t rank) const;
    // The device a jump found, outlined in the highlight colour at every zoom; (-1, -1) for none.
    void setHighlight(std::int64_t node, std::int64_t local);
    std::pair<std::int64_t, std::int64_t> highlight() const { return m_highlight; }
    // At overview zoom each pipeline stage is named by a label of constant size at its first device (the
    // stage colours repeat, the labels do not), and NodeItem draws the boundaries between stages and DP
    // replicas; the view turns them on below NodeItem's coarse level of detail.
    // `zoom`: the view's scale, so that labels that would overlap on screen are left out (the first of
    // them in stage order kept).
    void setOverview(bool on, qreal zoom = 1);
    bool overview() const { return m_overview; }
    QGraphicsSimpleTextItem* stageLabel(std::int64_t stage) const;
    // A node's tooltip: its ranks and the stages, DP replicas and TP groups they belong to.
    QString nodeToolTip(std::int64_t node) const;
    // A tooltip for a device: rank, coordinates, layers and memory.
    QString deviceToolTip(std::int64_t node, std::int64_t local) const;
    // The expert-parallel part of a device's tooltip (MoE models with ep > 1).
    QString expertToolTip(const DeviceView& d) const;
    QString intraLinkToolTip() const;
    QString interLinkToolTip() const;

private:
    void rebuild();
    void fill(const plan::Prediction* prediction);
    void placeStageLabels();
    QSizeF nodeSize() const;

    plan::Layout m_layout;
    std::int64_t m_nodes = 0, m_devicesPerNode = 0, m_world = 0;
    std::vector<DeviceView> m_devices; // node-major
    std::vector<NodeItem*> m_items;
    QGraphicsPathItem* m_fabric = nullptr;
    std::pair<std::int64_t, std::int64_t> m_dropTarget { -1, -1 };
    std::pair<std::int64_t, std::int64_t> m_highlight { -1, -1 };
    std::vector<QGraphicsSimpleTextItem*> m_stageLabels; // by pipeline stage
    bool m_overview = false;
    qreal m_overviewZoom = 1;
    void showStageLabels();
};

} // namespace loom::views
