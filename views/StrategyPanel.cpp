#include "views/StrategyPanel.h"

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

enum MergeId { MergeVpp = 1, MergeMicro, MergeGlobal, MergeTopk, MergeBucket, MergeChunk, MergeNodes };

QString name(Degree d) { return d == Degree::Tp ? QStringLiteral("tp") : d == Degree::Pp ? QStringLiteral("pp") : QStringLiteral("dp"); }

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
    m_nodes->setToolTip(tr("Nodes of the cluster this layout uses; dp follows from nodes × devices per node ÷ (tp·pp)."));
    whereForm->addRow(tr("Model"), m_model);
    whereForm->addRow(tr("Cluster"), m_cluster);
    whereForm->addRow(tr("Nodes"), m_nodes);
    outer->addWidget(where);

    auto* par = new QGroupBox(tr("Parallelism"));
    auto* parForm = new QFormLayout(par);
    for (Degree d : {Degree::Tp, Degree::Pp, Degree::Dp}) {
        auto* box = new QComboBox;
        box->setEditable(true);
        box->setInsertPolicy(QComboBox::NoInsert);
        box->setValidator(new QIntValidator(1, 1 << 20, box));
        box->setModel(new QStandardItemModel(box));
        (d == Degree::Tp ? m_tp : d == Degree::Pp ? m_pp : m_dp) = box;
        connect(box, &QComboBox::activated, this, [this, box, d](int index) {
            requestDegree(d, box->itemData(index).toLongLong());
        });
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
    m_vpp = spin(1, 64);
    m_vpp->setToolTip(tr("Virtual stages (model chunks) per pipeline rank for the interleaved schedule: bubble "
                         "(p−1)/(v·m) of the ideal time, at v× the pipeline traffic."));
    m_microBatch = spin(1, 65536);
    m_microBatch->setToolTip(tr("Sequences per micro-batch (b)."));
    m_globalBatch = spin(1, 1 << 24);
    m_globalBatch->setToolTip(tr("Sequences per optimizer step over all replicas (B); m = B / (b·dp) micro-batches per pipeline."));
    m_schedule = combo({QStringLiteral("gpipe"), QStringLiteral("1f1b"), QStringLiteral("interleaved")});
    m_schedule->setToolTip(tr("GPipe: all forwards then all backwards (holds m micro-batches); 1F1B: one forward, one "
                              "backward (holds at most p); interleaved 1F1B: v chunks per rank, needs m divisible by p."));
    parForm->addRow(tr("Virtual stages (vpp)"), m_vpp);
    parForm->addRow(tr("Micro-batch"), m_microBatch);
    parForm->addRow(tr("Global batch"), m_globalBatch);
    parForm->addRow(tr("Schedule"), m_schedule);
    outer->addWidget(par);

    auto* mem = new QGroupBox(tr("Memory and precision"));
    auto* memForm = new QFormLayout(mem);
    m_zero = combo({tr("0 (none)"), tr("1 (optimizer state sharded)")});
    m_zero->setToolTip(tr("ZeRO-1 divides the 12 bytes of Adam state per parameter by dp (Rajbhandari et al.)."));
    m_recompute = combo({QStringLiteral("none"), QStringLiteral("selective"), QStringLiteral("full")});
    m_recompute->setToolTip(tr("Activation recomputation (Korthikanti et al. 2022): selective keeps s·b·h·(10 + 24/t) "
                               "bytes a layer; full keeps only the 2·s·b·h input and re-runs the forward."));
    m_precision = combo({QStringLiteral("fp32"), QStringLiteral("fp16"), QStringLiteral("bf16")});
    memForm->addRow(tr("ZeRO"), m_zero);
    memForm->addRow(tr("Recompute"), m_recompute);
    memForm->addRow(tr("Precision"), m_precision);
    outer->addWidget(mem);

    auto* comm = new QGroupBox(tr("Communication"));
    auto* commForm = new QFormLayout(comm);
    m_codec = combo({QStringLiteral("none"), QStringLiteral("fp16"), QStringLiteral("bf16"), QStringLiteral("int8"),
        QStringLiteral("int4"), QStringLiteral("topk"), QStringLiteral("lz4")});
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
    m_bucket->setToolTip(tr("Gradients are reduced in buckets of this size as soon as each is complete (PyTorch DDP: 25 MB)."));
    m_chunk = new QDoubleSpinBox;
    m_chunk->setRange(1, 1 << 20);
    m_chunk->setDecimals(0);
    m_chunk->setSuffix(QStringLiteral(" KB"));
    m_chunk->setKeyboardTracking(false);
    m_chunk->setToolTip(tr("Chunk size of the chunked ring all-reduce."));
    m_allreduce = combo({QStringLiteral("library"), QStringLiteral("ring"), QStringLiteral("hierarchical")});
    m_allreduce->setToolTip(tr("library: MPI's or NCCL's own; ring: Loom's ring; hierarchical: reduce-scatter in the "
                               "node, all-reduce across nodes, all-gather in the node."));
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
    const std::pair<QWidget*, const char*> names[] = {{m_model, "model"}, {m_cluster, "cluster"}, {m_nodes, "nodes"},
        {m_tp, "tp"}, {m_pp, "pp"}, {m_dp, "dp"}, {m_vpp, "vpp"}, {m_microBatch, "microBatch"},
        {m_globalBatch, "globalBatch"}, {m_schedule, "schedule"}, {m_zero, "zero"}, {m_recompute, "recompute"},
        {m_precision, "precision"}, {m_codec, "codec"}, {m_topk, "topk"}, {m_errorFeedback, "errorFeedback"},
        {m_overlap, "overlap"}, {m_bucket, "bucket"}, {m_chunk, "chunk"}, {m_allreduce, "allreduce"}};
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
            if (devices % (next.parallel.tp * next.parallel.pp) == 0)
                next.parallel.dp = devices / (next.parallel.tp * next.parallel.pp);
        }
        requestEdit(next, tr("Use cluster %1").arg(QString::fromStdString(n)));
    });
    connect(m_nodes, &QSpinBox::valueChanged, this, [this](int nodes) {
        Layout next = m_layout;
        next.nodes = nodes;
        const auto& c = next.cluster;
        if (!c.autoDevices()) {
            const std::int64_t devices = std::int64_t(nodes) * c.devicesPerNode;
            const std::int64_t tpp = next.parallel.tp * next.parallel.pp;
            if (devices % tpp != 0) {
                refuse(tr("%1 node(s) of %2 devices cannot be split into tp·pp = %3 groups; choose a node count whose "
                          "%2·nodes devices tp·pp divides")
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
    connect(m_vpp, &QSpinBox::valueChanged, this, [this](int v) {
        requestEdit(withVpp(m_layout, v), tr("Set vpp to %1").arg(v), MergeVpp);
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
        next.parallel.schedule = static_cast<plan::ScheduleKind>(i);
        if (next.parallel.schedule != plan::ScheduleKind::Interleaved && next.parallel.vpp != 1)
            next = withVpp(next, 1);
        if (next.parallel.schedule == plan::ScheduleKind::Interleaved && next.parallel.vpp == 1)
            next = withVpp(next, 2);
        requestEdit(next, tr("Use the %1 schedule").arg(m_schedule->currentText()));
    });
    connect(m_zero, &QComboBox::activated, this, [this](int i) {
        Layout next = m_layout;
        next.memory.zero = i;
        requestEdit(next, tr("Set ZeRO to %1").arg(i));
    });
    connect(m_recompute, &QComboBox::activated, this, [this](int i) {
        Layout next = m_layout;
        next.memory.recompute = static_cast<plan::Recompute>(i);
        requestEdit(next, tr("Recompute %1").arg(m_recompute->currentText()));
    });
    connect(m_precision, &QComboBox::activated, this, [this](int) {
        Layout next = m_layout;
        next.precision = plan::precisionFromString(m_precision->currentText().toStdString()).value_or(plan::Precision::Fp32);
        requestEdit(next, tr("Use %1").arg(m_precision->currentText()));
    });
    auto codecEdit = [this] {
        Layout next = m_layout;
        const QString kind = m_codec->currentText();
        const std::string text = kind == QLatin1String("topk")
            ? "topk:" + QString::number(m_topk->value(), 'g', 6).toStdString()
            : kind.toStdString();
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
        next.comm.allreduce = plan::kLayoutAllreduceAlgorithms.at(static_cast<std::size_t>(i));
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
    fillProfiles(m_model, m_profiles ? m_profiles->modelNames() : std::vector<std::string>{}, layout.modelProfile,
        layout.model.name);
    fillProfiles(m_cluster, m_profiles ? m_profiles->clusterNames() : std::vector<std::string>{}, layout.clusterProfile,
        layout.cluster.name);
    m_nodes->setValue(int(layout.nodes));
    m_nodes->setEnabled(layout.cluster.interNode.has_value());
    const auto& p = layout.parallel;
    m_vpp->setValue(int(p.vpp));
    m_vpp->setEnabled(p.schedule == plan::ScheduleKind::Interleaved);
    m_microBatch->setValue(int(p.microBatch));
    m_globalBatch->setValue(int(p.globalBatch));
    m_schedule->setCurrentIndex(int(p.schedule));
    m_zero->setCurrentIndex(layout.memory.zero);
    m_recompute->setCurrentIndex(int(layout.memory.recompute));
    m_precision->setCurrentText(QString::fromStdString(std::string(plan::toString(layout.precision))));
    const auto& c = layout.comm;
    static const char* kinds[] = {"none", "fp16", "bf16", "int8", "int4", "topk", "lz4"};
    m_codec->setCurrentText(QString::fromLatin1(kinds[int(c.dpCodec.kind)]));
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
    const auto& algorithms = plan::kLayoutAllreduceAlgorithms;
    m_allreduce->setCurrentIndex(int(std::find(algorithms.begin(), algorithms.end(), c.allreduce) - algorithms.begin()));
    refreshChoices();
}

void StrategyPanel::refreshChoices()
{
    for (Degree d : {Degree::Tp, Degree::Pp, Degree::Dp}) {
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

QString StrategyPanel::message() const { return m_message->text(); }

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
