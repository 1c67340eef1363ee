#include "views/LayerPalette.h"

#include "views/LayerModel.h"

#include <QHeaderView>

namespace loom::views {

LayerPalette::LayerPalette(LayerModel* model, QWidget* parent)
    : QTableView(parent)
    , m_model(model)
{
    setModel(model);
    setSelectionBehavior(QAbstractItemView::SelectRows);
    setSelectionMode(QAbstractItemView::ExtendedSelection);
    setDragEnabled(true);
    setDragDropMode(QAbstractItemView::DragOnly);
    setDefaultDropAction(Qt::MoveAction);
    setAlternatingRowColors(true);
    verticalHeader()->hide();
    verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 6);
    horizontalHeader()->setStretchLastSection(false);
    horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    horizontalHeader()->setMinimumSectionSize(40);
    setToolTip(tr("Select blocks (shift-click for a range) and drag them onto a device of the topology map to move "
                  "them to that device's pipeline stage."));
}

} // namespace loom::views
