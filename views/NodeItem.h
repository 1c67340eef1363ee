#pragma once

#include "engine/plan/Layout.h"

#include <QGraphicsItem>

namespace loom::views {

class TopologyScene;

// One node of the map: a box with its devices, drawn by hand at three levels of detail (Qt's "chip"
// example): text, memory bars and TP outlines when zoomed in; coloured cells when zoomed out; so 384 nodes
// of 8 devices stay fast; zoomed out, lines between pipeline stages and DP replicas. Hovering a device shows
// its tooltip, hovering the node its ranks, stages and replicas.
class NodeItem : public QGraphicsItem {
public:
    NodeItem(const TopologyScene* scene, std::int64_t node, QSizeF size);

    QRectF boundingRect() const override;
    void paint(QPainter* painter, const QStyleOptionGraphicsItem* option, QWidget* widget) override;
    std::int64_t node() const { return m_node; }
    // The device's rectangle in item coordinates.
    QRectF cellRect(std::int64_t local) const;
    // The device at an item position, or -1.
    std::int64_t cellAt(const QPointF& pos) const;
    // "node 0 · hosta": the node's number and, when the cluster names its hosts, this node's host.
    QString title() const;
    static QString titleOf(const plan::Layout& layout, std::int64_t node);
    // The title as drawn: whole, or elided when it is wider than the widest header (the tooltip has it whole).
    QString shownTitle() const;
    // The header's font, and the width a title may take (the box grows for a host name up to this).
    static QFont titleFont(const QFont& base);
    static qreal maxTitleWidth();

protected:
    void hoverMoveEvent(QGraphicsSceneHoverEvent* event) override;

private:
    void paintCell(QPainter* p, std::int64_t local, qreal lod) const;
    void paintBoundaries(QPainter* p) const;
    void paintTpOutlines(QPainter* p) const;
    void paintCpOutlines(QPainter* p) const;

    const TopologyScene* m_scene;
    std::int64_t m_node;
    QSizeF m_size;
};

} // namespace loom::views
