// The Strategy panel's edits: each control's change becomes a whole new layout handed to editRequested().
#include "views/StrategyPanel.h"
#include "views/StrategyWidgets.h"

#include "engine/plan/Choices.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QSpinBox>

namespace loom::views {

using namespace strategy;
using plan::Layout;

void StrategyPanel::connectPlacement()
{
    using plan::Layout;
    connect(m_model, &QComboBox::activated, this, [this](int) {
        const std::string n = m_model->currentData().toString().toStdString();
        const auto spec = m_profiles ? m_profiles->findModel(n) : std::nullopt;
        if (!spec)
            return;
        Layout next = m_layout;
        next.model = *spec;
        next.modelProfile = n;
        next.parallel.stages.clear();
        requestEdit(next, tr("Use model %1").arg(QString::fromStdString(n)));
    });
    connect(m_cluster, &QComboBox::activated, this, [this](int) {
        const std::string n = m_cluster->currentData().toString().toStdString();
        const auto spec = m_profiles ? m_profiles->findCluster(n) : std::nullopt;
        if (!spec)
            return;
        Layout next = m_layout;
        next.cluster = *spec;
        next.clusterProfile = n;
        if (!spec->interNode)
            next.nodes = 1;
        if (!spec->autoDevices()) {
            const std::int64_t devices = next.nodes * spec->devicesPerNode;
            const std::int64_t tcp = next.parallel.tp * next.parallel.cp * next.parallel.pp;
            if (devices % tcp == 0)
                next.parallel.dp = devices / tcp;
        }
        requestEdit(next, tr("Use cluster %1").arg(QString::fromStdString(n)));
    });
    connect(m_nodes, &QSpinBox::valueChanged, this, [this](int nodes) {
        Layout next = m_layout;
        next.nodes = nodes;
        const auto& c = next.cluster;
        if (!c.autoDevices()) {
            const std::int64_t devices = std::int64_t(nodes) * c.devicesPerNode;
            const std::int64_t tpp = next.parallel.tp * next.parallel.cp * next.parallel.pp;
            if (devices % tpp != 0) {
                refuse(tr("%1 node(s) of %2 devices cannot be split into tp·cp·pp = %3 groups; choose a node count "
                          "whose %2·nodes devices tp·cp·pp divides")
                           .arg(nodes)
                           .arg(c.devicesPerNode)
                           .arg(tpp));
                setLayout(m_layout);
                return;
            }
            next.parallel.dp = devices / tpp;
        }
        requestEdit(next, tr("Use %1 node(s)").arg(nodes), MergeNodes);
    });
    connect(m_cp, &QSpinBox::valueChanged, this, [this](int cp) {
        Layout next = m_layout;
        next.parallel.cp = cp;
        const auto& c = next.cluster;
        if (!c.autoDevices()) { // keep the devices: dp follows from nodes × devices ÷ (tp·cp·pp)
            const std::int64_t devices = next.nodes * c.devicesPerNode;
            const std::int64_t tcp = next.parallel.tp * next.parallel.cp * next.parallel.pp;
            if (devices % tcp != 0) {
                refuse(tr("cp=%1 makes tp·cp·pp = %2, which does not divide the %3 devices of %4 node(s); choose a cp "
                          "that does, or change tp, pp or the node count")
                           .arg(cp)
                           .arg(tcp)
                           .arg(devices)
                           .arg(next.nodes));
                setLayout(m_layout);
                return;
            }
            next.parallel.dp = devices / tcp;
        }
        requestEdit(next, tr("Set cp to %1").arg(cp), MergeCp);
    });
}

void StrategyPanel::connectParallelism()
{
    connect(m_vpp, &QSpinBox::valueChanged, this,
        [this](int v) { requestEdit(withVpp(m_layout, v), tr("Set vpp to %1").arg(v), MergeVpp); });
    connect(m_group, &QSpinBox::valueChanged, this, [this](int v) {
        Layout next = m_layout;
        next.parallel.microbatchGroup = v;
        requestEdit(next,
            v > 0 ? tr("Set the micro-batch group to %1").arg(v) : tr("Use the default micro-batch group"), MergeGroup);
    });
    connect(m_weightFill, &QCheckBox::toggled, this, [this](bool on) {
        Layout next = m_layout;
        next.parallel.weightFill = on ? plan::WeightFill::Idle : plan::WeightFill::Listed;
        requestEdit(next, on ? tr("Let W fill idle time") : tr("Run every W where the schedule lists it"));
    });
    connect(m_endsAsLayers, &QCheckBox::toggled, this, [this](bool on) {
        requestEdit(withEndsCountedAsLayers(m_layout, on),
            on ? tr("Count the embedding and the LM head as layers") : tr("Split the layers evenly"));
    });
    connect(m_microBatch, &QSpinBox::valueChanged, this, [this](int v) {
        Layout next = m_layout;
        next.parallel.microBatch = v;
        requestEdit(next, tr("Set micro-batch to %1").arg(v), MergeMicro);
    });
    connect(m_globalBatch, &QSpinBox::valueChanged, this, [this](int v) {
        Layout next = m_layout;
        next.parallel.globalBatch = v;
        requestEdit(next, tr("Set global batch to %1").arg(v), MergeGlobal);
    });
    connect(m_schedule, &QComboBox::activated, this, [this](int i) {
        Layout next = m_layout;
        next.parallel.schedule = chosen<plan::ScheduleKind>(m_schedule, i);
        const bool v = plan::vShaped(next.parallel.schedule); // ZB-V and DualPipe: two chunks in a V
        if (v && next.parallel.vpp != 2)
            next = withVpp(next, 2);
        if (!v && next.parallel.schedule != plan::ScheduleKind::Interleaved && next.parallel.vpp != 1)
            next = withVpp(next, 1);
        if (next.parallel.schedule == plan::ScheduleKind::Interleaved && next.parallel.vpp == 1)
            next = withVpp(next, 2);
        if (next.parallel.schedule != plan::ScheduleKind::Interleaved)
            next.parallel.microbatchGroup = 0; // only the interleaved schedule has groups
        requestEdit(next, tr("Use the %1 schedule").arg(m_schedule->currentText()));
    });
    connect(m_order, &QComboBox::activated, this, [this](int i) {
        Layout next = m_layout;
        next.parallel.order = chosen<plan::RankOrder>(m_order, i);
        requestEdit(next, tr("Use rank order %1").arg(m_order->currentText()));
    });
}

void StrategyPanel::connectMemory()
{
    connect(m_zero, &QComboBox::activated, this, [this](int i) {
        Layout next = m_layout;
        next.memory.zero = i;
        requestEdit(next, tr("Set ZeRO to %1").arg(i));
    });
    connect(m_recompute, &QComboBox::activated, this, [this](int i) {
        Layout next = m_layout;
        next.memory.recompute = chosen<plan::Recompute>(m_recompute, i);
        requestEdit(next, tr("Recompute %1").arg(m_recompute->currentText()));
    });
    connect(m_sp, &QCheckBox::toggled, this, [this](bool on) {
        Layout next = m_layout;
        next.parallel.sp = on;
        requestEdit(next, on ? tr("Turn sequence parallelism on") : tr("Turn sequence parallelism off"));
    });
    connect(m_attention, &QComboBox::activated, this, [this](int i) {
        Layout next = m_layout;
        next.memory.attention = static_cast<plan::Attention>(i);
        requestEdit(next, tr("Use %1 attention").arg(m_attention->currentText()));
    });
    connect(m_efficientNorm, &QCheckBox::toggled, this, [this](bool on) {
        Layout next = m_layout;
        next.memory.efficientNorm = on;
        requestEdit(next, on ? tr("Let the norms keep their outputs") : tr("Let the norms keep their inputs"));
    });
    connect(m_precision, &QComboBox::activated, this, [this](int i) {
        Layout next = m_layout;
        next.precision = chosen<plan::Precision>(m_precision, i);
        requestEdit(next, tr("Use %1").arg(m_precision->currentText()));
    });
}

void StrategyPanel::connectComm()
{
    auto codecEdit = [this] {
        Layout next = m_layout;
        const auto kind = chosen<plan::Codec::Kind>(m_codec, m_codec->currentIndex());
        const std::string text = kind == plan::Codec::Kind::TopK
            ? "topk:" + QString::number(m_topk->value(), 'g', 6).toStdString()
            : std::string(plan::toString(kind));
        std::string why;
        const auto codec = plan::Codec::parse(text, &why);
        if (!codec) {
            refuse(QString::fromStdString(why));
            return;
        }
        next.comm.dpCodec = *codec;
        requestEdit(next, tr("Compress DP gradients with %1").arg(QString::fromStdString(text)), MergeTopk);
    };
    connect(m_codec, &QComboBox::activated, this, codecEdit);
    connect(m_topk, &QDoubleSpinBox::valueChanged, this, codecEdit);
    connect(m_errorFeedback, &QCheckBox::toggled, this, [this](bool on) {
        Layout next = m_layout;
        next.comm.errorFeedback = on;
        requestEdit(next, on ? tr("Turn error feedback on") : tr("Turn error feedback off"));
    });
    connect(m_overlap, &QCheckBox::toggled, this, [this](bool on) {
        Layout next = m_layout;
        next.comm.overlap = on;
        requestEdit(next, on ? tr("Overlap the DP all-reduce") : tr("Do not overlap the DP all-reduce"));
    });
    connect(m_bucket, &QDoubleSpinBox::valueChanged, this, [this](double v) {
        Layout next = m_layout;
        next.comm.bucketMb = v;
        requestEdit(next, tr("Set bucket to %1 MB").arg(v), MergeBucket);
    });
    connect(m_chunk, &QDoubleSpinBox::valueChanged, this, [this](double v) {
        Layout next = m_layout;
        next.comm.chunkKb = v;
        requestEdit(next, tr("Set chunk to %1 KB").arg(v), MergeChunk);
    });
    connect(m_allreduce, &QComboBox::activated, this, [this](int i) {
        Layout next = m_layout;
        next.comm.allreduce = chosen<plan::AllreduceAlgorithm>(m_allreduce, i);
        requestEdit(next, tr("Use the %1 all-reduce").arg(m_allreduce->currentText()));
    });
}

} // namespace loom::views
