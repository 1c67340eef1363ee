#pragma once

#include "engine/plan/Layout.h"

#include <QAbstractTableModel>

namespace loom::views {

// The layer palette's rows: the embedding, each transformer block, the final norm and the LM head, with
// their parameter count, the memory their weights, gradients and optimizer state take on one device that
// holds them (the tp-th share, optimizer state ÷ dp under ZeRO-1, bytes by precision; the whole layer's
// figure is in the tooltip), and the pipeline stage that holds them. Blocks can be dragged (as a range)
// onto devices.
class LayerModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Name, Parameters, Memory, Stage, ColumnCount };
    enum Role { BlockRole = Qt::UserRole + 1, StageRole };
    // The MIME type of a dragged block range: the text "FIRST LAST" (inclusive, from 0).
    static constexpr const char* kMimeType = "application/x-loom-blocks";

    explicit LayerModel(QObject* parent = nullptr);

    void setLayout(const plan::Layout& layout);

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
    Qt::ItemFlags flags(const QModelIndex& index) const override;
    QStringList mimeTypes() const override;
    // The smallest block range covering the blocks among `indexes`; null when none is a block.
    QMimeData* mimeData(const QModelIndexList& indexes) const override;
    Qt::DropActions supportedDragActions() const override { return Qt::MoveAction; }

    // The block of a row, or -1 for the embedding, final norm and LM head.
    int blockOfRow(int row) const;
    int rowOfBlock(int block) const { return block + 1; }
    // Reads a block range from MIME data made by mimeData(); false when it is not one.
    static bool decodeBlocks(const QMimeData* mime, std::int64_t* first, std::int64_t* last);

private:
    struct DeviceShare {
        std::int64_t tp = 1;
        double bytesPerParameter = 16;
        QString why;
    };
    DeviceShare deviceShare() const;
    // The pipeline stage (0..pp-1) holding virtual stage `virtualStage` (interleaved or in a V: plan::rankOfStage).
    std::int64_t physicalStage(std::int64_t virtualStage) const;
    std::int64_t chunkOf(std::int64_t virtualStage) const; // which of its rank's chunks
    static QString sizeText(double bytes);
    std::int64_t parametersOfRow(int row) const;
    std::int64_t stageOfRow(int row) const;

    plan::Layout m_layout;
    std::vector<plan::StageRange> m_ranges;
};

} // namespace loom::views
