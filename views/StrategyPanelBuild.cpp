// The Strategy panel's widgets: one group box per part of the layout, each control with its tooltip.
#include "views/StrategyPanel.h"
#include "views/StrategyWidgets.h"

#include "engine/plan/Choices.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QIntValidator>
#include <QLabel>
#include <QLineEdit>
#include <QSpinBox>
#include <QStandardItemModel>

namespace loom::views {

using namespace strategy;

QGroupBox* StrategyPanel::buildWhere()
{
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

    return where;
}

QGroupBox* StrategyPanel::buildParallelism()
{
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
           "group that fits m). Zero-bubble (backward split into B, input gradients, and W, weight gradients, "
           "which fill the bubbles): zb-h1 at 1F1B's memory, zb-h2 with more warm-up forwards, zb-v with two "
           "chunks per rank in a V, dualpipe (DualPipeV's order, m ≥ 2p) on the same V."));
    // The schedule and the batch are a tab of their own: with the degrees in one form the tab was 353 px tall, too
    // tall beside Prediction at 1280×800.
    m_scheduleGroup = new QGroupBox(tr("Schedule and batch"));
    auto* schedForm = new QFormLayout(m_scheduleGroup);
    schedForm->addRow(tr("Schedule"), m_schedule);
    schedForm->addRow(tr("Virtual stages (vpp)"), m_vpp);
    m_group = spin(0, 1 << 24);
    m_group->setSpecialValueText(tr("pp (default)"));
    m_group->setToolTip(
        tr("Micro-batch group N of the interleaved schedule (Megatron-LM's --microbatch-group-size-per-virtual-"
           "pipeline-stage): N micro-batches run through one chunk before the next chunk. Rank r warms up with "
           "(p−r−1)·2 + (v−1)·N forwards, so a larger N holds more activations; the bubble stays (p−1)/(v·m). Needs "
           "p ≤ N ≤ m, and m mod N zero or at least p."));
    schedForm->addRow(tr("Micro-batch group"), m_group);
    m_weightFill = new QCheckBox(tr("W fills idle time"));
    m_weightFill->setToolTip(
        tr("Zero-bubble schedules (parallel.weight_fill): on, a rank whose next input has not arrived runs the W "
           "of an earlier B instead of waiting (each chunk's last W stays where listed, since it releases the "
           "gradients to the data-parallel reduction); off (the default), every W runs where the schedule lists "
           "it, the paper's order. The prediction replays the same rule."));
    schedForm->addRow(QString(), m_weightFill);
    m_endsAsLayers = new QCheckBox(tr("Embedding and LM head count as a layer"));
    m_endsAsLayers->setToolTip(
        tr("Llama 3's pipeline (Megatron-LM's --account-for-embedding-in-pipeline-split and "
           "--account-for-loss-in-pipeline-split): the first and the last virtual stage hold one layer fewer than "
           "the others, or only the embedding and only the LM head when the others hold one. Needs pp·vpp to divide "
           "the layers + 2."));
    schedForm->addRow(m_endsAsLayers); // across both columns, so the label column does not widen the panel
    schedForm->addRow(tr("Micro-batch"), m_microBatch);
    schedForm->addRow(tr("Global batch"), m_globalBatch);
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
    parForm->addRow(m_sp);

    return par;
}

QGroupBox* StrategyPanel::buildMemory()
{
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

    return mem;
}

QGroupBox* StrategyPanel::buildComm()
{
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
    commForm->addRow(m_errorFeedback);
    commForm->addRow(m_overlap);
    commForm->addRow(tr("Bucket"), m_bucket);
    commForm->addRow(tr("Chunk"), m_chunk);
    commForm->addRow(tr("All-reduce"), m_allreduce);

    return comm;
}

void StrategyPanel::nameControls()
{
    // Names for tests and for QSettings-free automation.
    const std::pair<QWidget*, const char*> names[] = { { m_model, "model" }, { m_cluster, "cluster" },
        { m_nodes, "nodes" }, { m_tp, "tp" }, { m_pp, "pp" }, { m_dp, "dp" }, { m_vpp, "vpp" },
        { m_microBatch, "microBatch" }, { m_globalBatch, "globalBatch" }, { m_schedule, "schedule" },
        { m_zero, "zero" }, { m_recompute, "recompute" }, { m_precision, "precision" }, { m_codec, "codec" },
        { m_topk, "topk" }, { m_errorFeedback, "errorFeedback" }, { m_overlap, "overlap" }, { m_bucket, "bucket" },
        { m_chunk, "chunk" }, { m_allreduce, "allreduce" }, { m_order, "order" }, { m_sp, "sp" },
        { m_attention, "attention" }, { m_group, "microbatchGroup" }, { m_endsAsLayers, "endsAsLayers" },
        { m_weightFill, "weightFill" }, { m_efficientNorm, "efficientNorm" } };
    for (auto [w, n] : names)
        w->setObjectName(QString::fromLatin1(n));
}

} // namespace loom::views
