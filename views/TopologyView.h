#pragma once

#include <QGraphicsView>

#include <array>
#include <cstdint>

class QLabel;
class QLineEdit;

namespace loom::views {

class TopologyScene;

// The topology map: zoom with the wheel (at the mouse) or +/-, pan by dragging, F fits everything (see
// MapLegend for what the colours and lines mean). Accepts block ranges dragged from the
// layer palette and reports the device they were dropped on. The jump box (top right; Ctrl+J) takes a rank
// ("12", "r12", "rank 12") or a node ("n3", "node 3"), centres the map on it and outlines it. Zoomed out,
// stages are named by labels and separated by lines (TopologyScene::setOverview). While a drag of blocks hovers
// a device, a note (bottom left) previews the stage ranges the drop would give (views/DropPreview).
class TopologyView : public QGraphicsView {
    Q_OBJECT
public:
    explicit TopologyView(TopologyScene* scene, QWidget* parent = nullptr);

    TopologyScene* topologyScene() const { return m_scene; }
    void fitAll();
    void zoomBy(qreal factor);
    qreal zoom() const;
    // Centres the map on a rank or node written as the jump box takes it, at a zoom where its text is
    // readable, and outlines it; false (nothing moves) with the reason in jumpMessage() otherwise.
    bool jumpTo(const QString& text);
    QLineEdit* jumpBox() const { return m_jump; }
    QString jumpMessage() const { return m_jumpMessage; }
    // The note previewing the hovered drop (hidden when no drag hovers a device); its text for tests.
    QLabel* dropPreviewLabel() const { return m_preview; }
    QString dropPreview() const;

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
    void zoomChanged();
    void placeJumpBox();
    void placePreview();
    void showPreview(const QString& text);

    TopologyScene* m_scene;
    QLineEdit* m_jump;
    QLabel* m_preview;
    std::array<std::int64_t, 3> m_previewKey { -1, -1, -1 }; // rank, first and last block of the shown preview
    QString m_jumpMessage;
    bool m_autoFit = true;
};

} // namespace loom::views
