#include "views/StrategyPanel.h"

#include "engine/plan/Choices.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QIntValidator>
#include <QLabel>
#include <QLineEdit>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QVBoxLayout>

#include <algorithm>

namespace loom::views {

namespace {

enum MergeId {
    MergeVpp = 1,
    MergeMicro,
    MergeGlobal,
    MergeTopk,
    MergeBucket,
    MergeChunk,
    MergeNodes,
    MergeCp,
    MergeGroup
};

QString name(Degree d)
{
    return d == Degree::Tp ? QStringLiteral("tp") : d == Degree::Pp ? QStringLiteral("pp") : QStringLiteral("dp");
}

QSpinBox* spin(int min, int max)
{
    auto* s = new QSpinBox;
    s->setRange(min, max);
    s->setKeyboardTracking(false);
    return s;
}

QComboBox* combo(const QStringList& items)
{
    auto* c = new QComboBox;
    c->addItems(items);
    return c;
}

// A choice of one of the plan's enums: each item shows the layout file's word and holds the value.
template <typename Enum, std::size_t N> QComboBox* enumCombo(const std::array<Enum, N>& values)
{
    auto* c = new QComboBox;
    for (Enum v : values) {
        using plan::toString;
        c->addItem(QString::fromLatin1(toString(v).data(), qsizetype(toString(v).size())), int(v));
    }
    return c;
}

template <typename Enum> Enum chosen(const QComboBox* box, int index)
{
    return static_cast<Enum>(box->itemData(index).toInt());
}

template <typename Enum> void select(QComboBox* box, Enum value)
{
    box->setCurrentIndex(std::max(0, box->findData(int(value))));
}

} // namespace

StrategyPanel::StrategyPanel(const plan::ProfileResolver* profiles, QWidget* parent)
    : QWidget(parent)
    , m_profiles(profiles)
{
    build();
}

QComboBox* StrategyPanel::degreeBox(Degree degree) const
{
    return degree == Degree::Tp ? m_tp : degree == Degree::Pp ? m_pp : m_dp;
}

void StrategyPanel::build()
{
    auto* outer = new QVBoxLayout(this);
    outer->setContentsMargins(6, 6, 6, 6);

    auto* where = new QGroupBox(tr("Model and cluster"));
    auto* whereForm = new QFormLayout(where);
    m_model = new QComboBox;
    m_cluster = new QComboBox;
    m_nodes = spin(1, 100000);
    m_model->setToolTip(tr("The model profile (loom profiles list shows them all)."));
    m_cluster->setToolTip(tr("The cluster profile: devices per node, their memory and peak, and the links."));
    m_nodes->setToolTip(
        tr("Nodes of the cluster this layout uses; dp follows from nodes × devices per node ÷ (tp·pp)."));
    whereForm->addRow(tr("Model"), m_model);
    whereForm->addRow(tr("Cluster"), m_cluster);
    whereForm->addRow(tr("Nodes"), m_nodes);
    outer->addWidget(where);

    auto* par = new QGroupBox(tr("Parallelism"));
    auto* parForm = new QFormLayout(par);
    for (Degree d : { Degree::Tp, Degree::Pp, Degree::Dp }) {
        auto* box = new QComboBox;
        box->setEditable(true);
        box->setInsertPolicy(QComboBox::NoInsert);
        box->setValidator(new QIntValidator(1, 1 << 20, box));
        box->setModel(new QStandardItemModel(box));
        (d == Degree::Tp ? m_tp : d == Degree::Pp ? m_pp : m_dp) = box;
        connect(box, &QComboBox::activated, this,
            [this, box, d](int index) { requestDegree(d, box->itemData(index).toLongLong()); });
        connect(box->lineEdit(), &QLineEdit::editingFinished, this, [this, box, d] {
            bool ok = false;
            const qlonglong v = box->lineEdit()->text().toLongLong(&ok);
            const std::int64_t current = d == Degree::Tp ? m_layout.parallel.tp
                : d == Degree::Pp                        ? m_layout.parallel.pp
                                                         : m_layout.parallel.dp;
            if (ok && v != current)
                requestDegree(d, v);
        });
    }
    m_tp->setToolTip(tr("Tensor parallel: each block's matrices split over tp devices (Megatron-LM); two all-reduces "
                        "of b·s·h activations per block forward and two backward. Keep it inside a node."));
    m_pp->setToolTip(tr("Pipeline parallel: the blocks split into pp stages; bubble (p−1)/(m+p−1) of the step for "
                        "GPipe and 1F1B."));
    m_dp->setToolTip(tr("Data parallel: dp replicas, each with B/dp sequences; one gradient all-reduce per step."));
    parForm->addRow(tr("Tensor (tp)"), m_tp);
    parForm->addRow(tr("Pipeline (pp)"), m_pp);
    parForm->addRow(tr("Data (dp)"), m_dp);
    m_cp = spin(1, 1024);
    m_cp->setObjectName(QStringLiteral("cp"));
    m_cp->setToolTip(tr("Context parallel: each sequence split over cp devices in 2·cp chunks (device i holds chunks "
                        "i and 2·cp−1−i, so causal attention work is even). Attention runs as ring attention: K/V "
                        "blocks travel around the CP group while each block computes (cp−1 sends forward, 2·cp−1 "
                        "backward), and activations shrink by cp. For long sequences; seq_len must divide into 2·cp "
                        "chunks. Gradients are reduced over dp·cp ranks."));
    parForm->addRow(tr("Context (cp)"), m_cp);
    m_vpp = spin(1, 64);
    m_vpp->setToolTip(tr("Virtual stages (model chunks) per pipeline rank for the interleaved schedule: bubble "
                         "(p−1)/(v·m) of the ideal time, at v× the pipeline traffic."));
    m_microBatch = spin(1, 65536);
    m_microBatch->setToolTip(tr("Sequences per micro-batch (b)."));
    m_globalBatch = spin(1, 1 << 24);
    m_globalBatch->setToolTip(
        tr("Sequences per optimizer step over all replicas (B); m = B / (b·dp) micro-batches per pipeline."));
    m_schedule = enumCombo(plan::allScheduleKinds());
    m_schedule->setToolTip(
        tr("GPipe: all forwards then all backwards (holds m micro-batches); 1F1B: one forward, one "
           "backward (holds at most p); interleaved 1F1B: v chunks per rank, needs m divisible by p (or a micro-batch "
           "group that fits m)."));
    parForm->addRow(tr("Virtual stages (vpp)"), m_vpp);
    m_group = spin(0, 1 << 24);
    m_group->setSpecialValueText(tr("pp (default)"));
    m_group->setToolTip(
        tr("Micro-batch group N of the interleaved schedule (Megatron-LM's --microbatch-group-size-per-virtual-"
           "pipeline-stage): N micro-batches run through one chunk before the next chunk. Rank r warms up with "
           "(p−r−1)·2 + (v−1)·N forwards, so a larger N holds more activations; the bubble stays (p−1)/(v·m). Needs "
           "p ≤ N ≤ m, and m mod N zero or at least p."));
    parForm->addRow(tr("Micro-batch group"), m_group);
    m_endsAsLayers = new QCheckBox(tr("Embedding and LM head count as a layer"));
    m_endsAsLayers->setToolTip(
        tr("Llama 3's pipeline (Megatron-LM's --account-for-embedding-in-pipeline-split and "
           "--account-for-loss-in-pipeline-split): the first and the last virtual stage hold one layer fewer than "
           "the others, or only the embedding and only the LM head when the others hold one. Needs pp·vpp to divide "
           "the layers + 2."));
    parForm->addRow(QString(), m_endsAsLayers);
    parForm->addRow(tr("Micro-batch"), m_microBatch);
    parForm->addRow(tr("Global batch"), m_globalBatch);
    parForm->addRow(tr("Schedule"), m_schedule);
    m_order = enumCombo(plan::allRankOrders());
    m_order->setToolTip(
        tr("Which dimension varies fastest across consecutive ranks: tp-pp-dp keeps a pipeline's stages "
           "on neighbouring ranks, tp-dp-pp keeps the data-parallel replicas there."));
    parForm->addRow(tr("Rank order"), m_order);
    m_sp = new QCheckBox(tr("Sequence parallelism (sp)"));
    m_sp->setToolTip(
        tr("Korthikanti et al. 2022: with tp > 1 the norms and dropout run on s/t tokens each, and each TP "
           "all-reduce becomes an all-gather and a reduce-scatter of the same bytes; activations per layer "
           "s·b·h/t·(34 + 5·a·s/h) instead of s·b·h·(10 + 24/t + 5·a·s/(h·t))."));
    parForm->addRow(QString(), m_sp);
    outer->addWidget(par);

    auto* mem = new QGroupBox(tr("Memory and precision"));
    auto* memForm = new QFormLayout(mem);
    m_zero = combo({ tr("0 (none)"), tr("1 (optimizer state sharded)") });
    m_zero->addItem(tr("2 (gradients sharded too)"));
    m_zero->addItem(tr("3 (parameters sharded too)"));
    m_zero->setToolTip(
        tr("ZeRO (Rajbhandari et al. 2020) over the DP group: 1 divides the 12 bytes of Adam state per "
           "parameter by dp, 2 also the 2 bytes of gradients (reduce-scatter per micro-batch instead of "
           "an all-reduce), 3 also the 2 bytes of weights (each layer all-gathered before its forward and "
           "again before its backward, the next one prefetched)."));
    m_attention = combo({ QStringLiteral("flash"), QStringLiteral("materialized") });
    m_attention->setToolTip(tr("flash: the s×s attention scores are never stored (the 5·a·s/h term leaves the "
                               "activations) and the backward recomputes Q·Kᵀ; materialized: the softmax output is "
                               "kept for the backward (Korthikanti et al. 2022)."));
    m_recompute = enumCombo(plan::allRecomputes());
    m_recompute->setToolTip(tr("Activation recomputation (Korthikanti et al. 2022): selective keeps s·b·h·(10 + 24/t) "
                               "bytes a layer; full keeps only the 2·s·b·h input and re-runs the forward."));
    m_efficientNorm = new QCheckBox(tr("Norms keep their output"));
    m_efficientNorm->setToolTip(tr("Memory-efficient norms (Megatron-LM's --memory-efficient-layer-norm): each norm "
                                   "keeps its output, which the next product keeps anyway, instead of its input "
                                   "(4·s·b·h bytes a layer less, /t with sp); the backward recovers the input "
                                   "from the output and the gain."));
    m_precision = enumCombo(plan::allPrecisions());
    memForm->addRow(tr("ZeRO"), m_zero);
    memForm->addRow(tr("Recompute"), m_recompute);
    memForm->addRow(tr("Attention"), m_attention);
    memForm->addRow(QString(), m_efficientNorm);
    memForm->addRow(tr("Precision"), m_precision);
    outer->addWidget(mem);

    auto* comm = new QGroupBox(tr("Communication"));
    auto* commForm = new QFormLayout(comm);
    m_codec = enumCombo(plan::allCodecKinds());
    m_codec->setToolTip(tr("How data-parallel gradients are compressed on the wire. Error feedback (Karimireddy et al. "
                           "2019) adds last step's compression error back."));
    m_topk = new QDoubleSpinBox;
    m_topk->setDecimals(4);
    m_topk->setRange(0.0001, 0.5);
    m_topk->setSingleStep(0.001);
    m_topk->setKeyboardTracking(false);
    m_topk->setToolTip(tr("Top-k: the fraction of gradient entries sent (DGC sends 0.1% with momentum correction)."));
    m_errorFeedback = new QCheckBox(tr("Error feedback"));
    m_overlap = new QCheckBox(tr("Overlap DP all-reduce with backward"));
    m_bucket = new QDoubleSpinBox;
    m_bucket->setRange(0.01, 4096);
    m_bucket->setSuffix(QStringLiteral(" MB"));
    m_bucket->setKeyboardTracking(false);
    m_bucket->setToolTip(
        tr("Gradients are reduced in buckets of this size as soon as each is complete (PyTorch DDP: 25 MB)."));
    m_chunk = new QDoubleSpinBox;
    m_chunk->setRange(1, 1 << 20);
    m_chunk->setDecimals(0);
    m_chunk->setSuffix(QStringLiteral(" KB"));
    m_chunk->setKeyboardTracking(false);
    m_chunk->setToolTip(tr("Chunk size of the chunked ring all-reduce."));
    m_allreduce = enumCombo(plan::allAllreduceAlgorithms());
    m_allreduce->setToolTip(tr("library: MPI's or NCCL's own; ring: Loom's ring; hierarchical: reduce-scatter in the "
                               "node, all-reduce across nodes, all-gather in the node; shm: through a shared-memory "
                               "segment of one machine (CPU ranks; the ring elsewhere); auto: chosen per message "
                               "size and group from a measured table (docs/communication.md)."));
    commForm->addRow(tr("DP codec"), m_codec);
    commForm->addRow(tr("Top-k fraction"), m_topk);
    commForm->addRow(QString(), m_errorFeedback);
    commForm->addRow(QString(), m_overlap);
    commForm->addRow(tr("Bucket"), m_bucket);
    commForm->addRow(tr("Chunk"), m_chunk);
    commForm->addRow(tr("All-reduce"), m_allreduce);
    outer->addWidget(comm);

    m_message = new QLabel;
    m_message->setWordWrap(true);
    m_message->setObjectName(QStringLiteral("refusal"));
    m_message->setStyleSheet(QStringLiteral("QLabel#refusal { color: #C01F1F; }"));
    m_message->setTextInteractionFlags(Qt::TextSelectableByMouse);
    outer->addWidget(m_message);
    outer->addStretch(1);
    // Names for tests and for QSettings-free automation.
    const std::pair<QWidget*, const char*> names[] = { { m_model, "model" }, { m_cluster, "cluster" },
        { m_nodes, "nodes" }, { m_tp, "tp" }, { m_pp, "pp" }, { m_dp, "dp" }, { m_vpp, "vpp" },
        { m_microBatch, "microBatch" }, { m_globalBatch, "globalBatch" }, { m_schedule, "schedule" },
        { m_zero, "zero" }, { m_recompute, "recompute" }, { m_precision, "precision" }, { m_codec, "codec" },
        { m_topk, "topk" }, { m_errorFeedback, "errorFeedback" }, { m_overlap, "overlap" }, { m_bucket, "bucket" },
        { m_chunk, "chunk" }, { m_allreduce, "allreduce" }, { m_order, "order" }, { m_sp, "sp" },
        { m_attention, "attention" }, { m_group, "microbatchGroup" }, { m_endsAsLayers, "endsAsLayers" },
        { m_efficientNorm, "efficientNorm" } };
    for (auto [w, n] : names)
        w->setObjectName(QString::fromLatin1(n));

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
    connect(m_vpp, &QSpinBox::valueChanged, this,
        [this](int v) { requestEdit(withVpp(m_layout, v), tr("Set vpp to %1").arg(v), MergeVpp); });
    connect(m_group, &QSpinBox::valueChanged, this, [this](int v) {
        Layout next = m_layout;
        next.parallel.microbatchGroup = v;
        requestEdit(next,
            v > 0 ? tr("Set the micro-batch group to %1").arg(v) : tr("Use the default micro-batch group"), MergeGroup);
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
        if (next.parallel.schedule != plan::ScheduleKind::Interleaved && next.parallel.vpp != 1)
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

void StrategyPanel::setLayout(const plan::Layout& layout)
{
    m_layout = layout;
    const QList<QWidget*> all = findChildren<QWidget*>();
    std::vector<std::unique_ptr<QSignalBlocker>> blockers;
    for (QWidget* w : all)
        blockers.push_back(std::make_unique<QSignalBlocker>(w));

    auto fillProfiles = [](QComboBox* box, const std::vector<std::string>& names, const std::string& current,
                            const std::string& inlineName) {
        box->clear();
        if (current.empty())
            box->addItem(QObject::tr("%1 (in the file)").arg(QString::fromStdString(inlineName)), QString());
        for (const auto& n : names)
            box->addItem(QString::fromStdString(n), QString::fromStdString(n));
        box->setCurrentIndex(std::max(0, box->findData(QString::fromStdString(current))));
    };
    fillProfiles(m_model, m_profiles ? m_profiles->modelNames() : std::vector<std::string> {}, layout.modelProfile,
        layout.model.name);
    fillProfiles(m_cluster, m_profiles ? m_profiles->clusterNames() : std::vector<std::string> {},
        layout.clusterProfile, layout.cluster.name);
    m_nodes->setValue(int(layout.nodes));
    m_nodes->setEnabled(layout.cluster.interNode.has_value());
    const auto& p = layout.parallel;
    m_cp->setValue(int(p.cp));
    m_vpp->setValue(int(p.vpp));
    m_vpp->setEnabled(p.schedule == plan::ScheduleKind::Interleaved);
    m_group->setValue(int(p.microbatchGroup));
    if (auto* form = qobject_cast<QFormLayout*>(m_group->parentWidget()->layout()))
        form->setRowVisible(m_group, p.schedule == plan::ScheduleKind::Interleaved);
    m_endsAsLayers->setChecked(endsCountedAsLayers(layout));
    m_endsAsLayers->setEnabled(p.pp > 1
        && (m_endsAsLayers->isChecked()
            || !plan::accountedStageSplit(layout.model.layers, layout.virtualStages()).empty()));
    m_microBatch->setValue(int(p.microBatch));
    m_globalBatch->setValue(int(p.globalBatch));
    select(m_schedule, p.schedule);
    select(m_order, p.order);
    m_zero->setCurrentIndex(layout.memory.zero);
    select(m_recompute, layout.memory.recompute);
    select(m_precision, layout.precision);
    m_attention->setCurrentIndex(int(layout.memory.attention));
    m_efficientNorm->setChecked(layout.memory.efficientNorm);
    m_sp->setChecked(p.sp);
    m_sp->setEnabled(p.tp > 1 || p.sp);
    const auto& c = layout.comm;
    select(m_codec, c.dpCodec.kind);
    m_topk->setEnabled(c.dpCodec.kind == plan::Codec::Kind::TopK);
    if (c.dpCodec.kind == plan::Codec::Kind::TopK)
        m_topk->setValue(c.dpCodec.topkFraction);
    else if (m_topk->value() <= 0.0001)
        m_topk->setValue(0.01);
    m_errorFeedback->setChecked(c.errorFeedback);
    m_errorFeedback->setEnabled(c.dpCodec.lossy());
    m_overlap->setChecked(c.overlap);
    m_bucket->setValue(c.bucketMb);
    m_chunk->setValue(c.chunkKb);
    select(m_allreduce, c.allreduce);
    refreshChoices();
}

void StrategyPanel::refreshChoices()
{
    for (Degree d : { Degree::Tp, Degree::Pp, Degree::Dp }) {
        QComboBox* box = degreeBox(d);
        const QSignalBlocker block(box);
        auto* model = static_cast<QStandardItemModel*>(box->model());
        model->clear();
        const std::int64_t current = d == Degree::Tp ? m_layout.parallel.tp
            : d == Degree::Pp                        ? m_layout.parallel.pp
                                                     : m_layout.parallel.dp;
        int currentRow = 0;
        for (const auto& [value, refusal] : degreeChoices(m_layout, d)) {
            auto* item = new QStandardItem(QString::number(value));
            item->setData(qlonglong(value), Qt::UserRole);
            if (!refusal.empty()) {
                item->setEnabled(false);
                item->setToolTip(QString::fromStdString(refusal));
            }
            if (value == current)
                currentRow = model->rowCount();
            model->appendRow(item);
        }
        box->setCurrentIndex(currentRow);
        box->setEditText(QString::number(current));
    }
}

bool StrategyPanel::requestDegree(Degree degree, std::int64_t value)
{
    const EditResult r = withDegree(m_layout, degree, value);
    if (!r.ok()) {
        refuse(QString::fromStdString(r.refusal));
        setLayout(m_layout); // back to the current value
        return false;
    }
    requestEdit(*r.layout, tr("Set %1 to %2").arg(name(degree)).arg(value));
    return true;
}

QString StrategyPanel::message() const
{
    return m_message->text();
}

void StrategyPanel::refuse(const QString& why)
{
    m_message->setText(why);
}

void StrategyPanel::requestEdit(const plan::Layout& next, const QString& text, int mergeId)
{
    m_message->clear();
    if (next == m_layout)
        return;
    emit editRequested(next, text, mergeId);
}

} // namespace loom::views
