#pragma once

#include <QTableView>

namespace loom::views {

class LayerModel;

// The layer palette: the model's layers with parameters, memory and stage; select a range of blocks
// (click, shift-click) and drag it onto a device of the topology map.
class LayerPalette : public QTableView {
    Q_OBJECT
public:
    explicit LayerPalette(LayerModel* model, QWidget* parent = nullptr);
    LayerModel* layerModel() const { return m_model; }

private:
    LayerModel* m_model;
};

} // namespace loom::views
