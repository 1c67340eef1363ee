#pragma once

#include <QGraphicsView>

namespace loom::views {

class TopologyScene;

// The topology map: zoom with the wheel (at the mouse) or +/-, pan by dragging, F fits everything (see
// MapLegend for what the colours and lines mean). Accepts block ranges dragged from the
// layer palette and reports the device they were dropped on.
class TopologyView : public QGraphicsView {
    Q_OBJECT
public:
    explicit TopologyView(TopologyScene* scene, QWidget* parent = nullptr);

    TopologyScene* topologyScene() const { return m_scene; }
    void fitAll();
    void zoomBy(qreal factor);
    qreal zoom() const;

signals:
    // Blocks [first, last] were dropped on the device running `rank`.
    void blocksDropped(std::int64_t rank, std::int64_t first, std::int64_t last);
    // A drop that cannot be done, with the reason.
    void dropRefused(const QString& why);

protected:
    void wheelEvent(QWheelEvent* event) override;
    void keyPressEvent(QKeyEvent* event) override;
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dragMoveEvent(QDragMoveEvent* event) override;
    void dragLeaveEvent(QDragLeaveEvent* event) override;
    void dropEvent(QDropEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;

private:
    TopologyScene* m_scene;
    bool m_autoFit = true;
};

} // namespace loom::views
