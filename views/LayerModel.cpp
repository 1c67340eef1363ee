#include "views/LayerModel.h"

#include "engine/plan/Formulas.h"
#include "engine/plan/LayoutSummary.h"
#include "views/Colors.h"
#include "views/Units.h"

#include <QLocale>
#include <QMimeData>

namespace loom::views {

LayerModel::LayerModel(QObject* parent)
    : QAbstractTableModel(parent)
{
}

void LayerModel::setLayout(const plan::Layout& layout)
{
    const bool shapeChanged = !(layout.model == m_layout.model) || layout.precision != m_layout.precision;
    if (shapeChanged)
        beginResetModel();
    m_layout = layout;
    // Listed stages may hold no layers at the ends (the embedding or the LM head alone).
    m_ranges = layout.stageRanges();
    if (std::int64_t(m_ranges.size()) != layout.parallel.pp * layout.parallel.vpp)
        m_ranges.clear();
    if (shapeChanged)
        endResetModel();
    else if (rowCount() > 0)
        emit dataChanged(index(0, Memory), index(rowCount() - 1, Stage)); // the share per device and the stage
}

LayerModel::DeviceShare LayerModel::deviceShare() const
{
    // The Prediction panel's per-parameter state (plan::modelStateBytesPerParameter): ZeRO-1 shards the
    // optimizer state, ZeRO-2 the gradients too, ZeRO-3 the weights too, over the dp·cp ranks that hold the
    // same parameters (a CP group's gradients are reduced like replicas).
    const int zero = m_layout.memory.zero;
    const std::int64_t shards = std::max<std::int64_t>(1, m_layout.parallel.dp * m_layout.parallel.cp);
    const plan::ModelStateBytes state = plan::modelStateBytesPerParameter(m_layout.precision, zero, shards);
    const plan::ModelStateBytes whole = plan::modelStateBytesPerParameter(m_layout.precision, 0, 1);
    DeviceShare s;
    s.tp = std::max<std::int64_t>(1, m_layout.parallel.tp);
    s.bytesPerParameter = state.total();
    const auto part = [shards](double wholeBytes, bool sharded) {
        return sharded ? QStringLiteral("%1/%2").arg(wholeBytes).arg(shards) : QString::number(wholeBytes);
    };
    const bool sharding = zero >= 1 && shards > 1;
    s.why = sharding
        ? tr("%1 weight + %2 gradient + %3 optimizer state, sharded over dp·cp %4 under ZeRO-%5")
              .arg(part(whole.params, zero >= 3), part(whole.grads, zero >= 2), part(whole.optimizer, zero >= 1))
              .arg(shards)
              .arg(zero)
        : tr("%1 weight + %2 gradient + %3 optimizer state, %4")
              .arg(whole.params)
              .arg(whole.grads)
              .arg(whole.optimizer)
              .arg(QString::fromStdString(std::string(plan::toString(m_layout.precision))));
    return s;
}

QString LayerModel::sizeText(double bytes)
{
    return memoryText(bytes);
}

int LayerModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() || m_layout.model.layers <= 0 ? 0 : int(m_layout.model.layers) + 3;
}

int LayerModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

int LayerModel::blockOfRow(int row) const
{
    return row >= 1 && row <= int(m_layout.model.layers) ? row - 1 : -1;
}

std::int64_t LayerModel::parametersOfRow(int row) const
{
    const auto& m = m_layout.model;
    if (row == 0)
        return m.embeddingParameters();
    if (blockOfRow(row) >= 0)
        return m.blockParameters();
    if (row == int(m.layers) + 1)
        return m.headParameters() - (m.tieEmbeddings ? 0 : m.paddedVocab() * m.hidden);
    return m.tieEmbeddings ? 0 : m.paddedVocab() * m.hidden;
}

std::int64_t LayerModel::physicalStage(std::int64_t virtualStage) const
{
    return plan::rankOfStage(m_layout.parallel.schedule, m_layout.parallel.pp, virtualStage);
}

std::int64_t LayerModel::chunkOf(std::int64_t virtualStage) const
{
    return plan::chunkOfStage(m_layout.parallel.schedule, m_layout.parallel.pp, virtualStage);
}

std::int64_t LayerModel::stageOfRow(int row) const
{
    if (m_ranges.empty())
        return -1;
    if (row == 0)
        return 0;
    const int block = blockOfRow(row);
    if (block < 0)
        return std::int64_t(m_ranges.size()) - 1;
    for (std::size_t s = 0; s < m_ranges.size(); ++s)
        if (block >= m_ranges[s].first && block <= m_ranges[s].last)
            return std::int64_t(s);
    return -1;
}

QVariant LayerModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const int row = index.row();
    const int block = blockOfRow(row);
    const std::int64_t params = parametersOfRow(row);
    // Weights, gradients and Adam state: 16 bytes a parameter in mixed precision (2 + 2 + 12), 16 in fp32
    // (4 + 4 + 8) (docs/formulas.md; the ZeRO paper). On one device: the tp-th share (Megatron-LM splits
    // every matrix of a block, and the embedding and head by vocabulary), ZeRO's shards further divided
    // (deviceShare).
    const double bytes = double(params) * 16.0;
    const DeviceShare share = deviceShare();
    const double onDevice = double(params) / double(share.tp) * share.bytesPerParameter;
    const std::int64_t stage = stageOfRow(row);
    const int layers = int(m_layout.model.layers);
    switch (role) {
    case Qt::DisplayRole:
        switch (index.column()) {
        case Name:
            if (row == 0)
                return tr("embedding");
            if (block >= 0)
                return tr("block %1").arg(block);
            if (row == layers + 1)
                return tr("final norm");
            return m_layout.model.tieEmbeddings ? tr("LM head (tied)") : tr("LM head");
        case Parameters:
            return QString::fromStdString(plan::humanCount(double(params)));
        case Memory:
            return sizeText(onDevice);
        case Stage:
            if (stage < 0)
                return QStringLiteral("–");
            // Several chunks a rank: the physical stage the map colours, and which of its chunks (interleaved:
            // virtual stage chunk·pp + stage, Megatron-LM's order; the V's way back 2·pp − 1 − stage).
            if (m_layout.parallel.vpp > 1)
                return tr("%1 · chunk %2").arg(physicalStage(stage)).arg(chunkOf(stage));
            return qlonglong(stage);
        }
        break;
    case Qt::ToolTipRole:
        if (index.column() == Memory)
            return tr("<b>%1 on each device</b> that holds this layer: %2 parameters ÷ tp %3 × %4 bytes (%5) = %1.<br>"
                      "The whole layer, before any parallelism: %2 parameters × 16 bytes (weight, gradient and Adam "
                      "state: 2 + 2 + 12 bytes in mixed precision, 4 + 4 + 8 in fp32; ZeRO paper) = %6. Activations "
                      "come on top (see the Prediction panel's memory).")
                .arg(sizeText(onDevice), QLocale().toString(qlonglong(params)))
                .arg(share.tp)
                .arg(QLocale().toString(share.bytesPerParameter, 'g', 4), share.why, sizeText(bytes));
        if (block >= 0)
            return tr("Transformer block %1 on pipeline stage %2%3. Select a range of blocks and drag it onto a "
                      "device of the topology map to move them to that device's stage.")
                .arg(block)
                .arg(physicalStage(stage))
                .arg(m_layout.parallel.vpp > 1 ? tr(" (chunk %1, virtual stage %2)").arg(chunkOf(stage)).arg(stage)
                                               : QString());
        if (row == 0)
            return tr("The token%1 embedding always lives on the first pipeline stage.")
                .arg(m_layout.model.position == plan::ModelSpec::Position::Learned ? tr(" and position") : QString());
        return tr("The final norm and the LM head always live on the last pipeline stage.");
    case Qt::DecorationRole:
        if (index.column() == Stage && stage >= 0)
            return stageColor(physicalStage(stage)); // the map's colour of the devices holding it
        break;
    case Qt::TextAlignmentRole:
        if (index.column() != Name)
            return int(Qt::AlignRight | Qt::AlignVCenter);
        break;
    case BlockRole:
        return block;
    case StageRole:
        return qlonglong(stage);
    }
    return {};
}

QVariant LayerModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return QAbstractTableModel::headerData(section, orientation, role);
    switch (section) {
    case Name:
        return tr("Layer");
    case Parameters:
        return tr("Params");
    case Memory:
        return tr("Per device");
    case Stage:
        return tr("Stage");
    }
    return {};
}

Qt::ItemFlags LayerModel::flags(const QModelIndex& index) const
{
    if (!index.isValid())
        return Qt::NoItemFlags;
    Qt::ItemFlags f = Qt::ItemIsEnabled | Qt::ItemIsSelectable;
    if (blockOfRow(index.row()) >= 0)
        f |= Qt::ItemIsDragEnabled;
    return f;
}

QStringList LayerModel::mimeTypes() const
{
    return { QString::fromLatin1(kMimeType) };
}

QMimeData* LayerModel::mimeData(const QModelIndexList& indexes) const
{
    int first = -1, last = -1;
    for (const QModelIndex& i : indexes) {
        const int block = blockOfRow(i.row());
        if (block < 0)
            continue;
        first = first < 0 ? block : std::min(first, block);
        last = std::max(last, block);
    }
    if (first < 0)
        return nullptr;
    auto* mime = new QMimeData;
    mime->setData(QString::fromLatin1(kMimeType), QByteArray::number(first) + ' ' + QByteArray::number(last));
    mime->setText(blocksText(first, last));
    return mime;
}

bool LayerModel::decodeBlocks(const QMimeData* mime, std::int64_t* first, std::int64_t* last)
{
    if (!mime || !mime->hasFormat(QString::fromLatin1(kMimeType)))
        return false;
    const QList<QByteArray> parts = mime->data(QString::fromLatin1(kMimeType)).split(' ');
    if (parts.size() != 2)
        return false;
    bool ok1 = false, ok2 = false;
    const qlonglong a = parts[0].toLongLong(&ok1), b = parts[1].toLongLong(&ok2);
    if (!ok1 || !ok2 || a < 0 || b < a)
        return false;
    *first = a;
    *last = b;
    return true;
}

} // namespace loom::views
