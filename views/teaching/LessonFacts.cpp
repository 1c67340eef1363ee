// The vocabulary of lesson checks: the facts, how a check is evaluated on them, and the facts a layout and
// its prediction give. The GUI adds the facts of runs, the all-reduce stepper and the docks (LessonDock).

#include "views/teaching/Lesson.h"

#include "views/ExplainTopics.h"

#include "engine/plan/RankGrid.h"

#include <QLocale>

#include <cmath>

namespace loom::views {

namespace {
using T = FactType;
const std::vector<FactInfo> kFacts = {
    { "layout.valid", T::Bool, "the layout has no errors" },
    { "model", T::Text, "the model profile's name" },
    { "cluster", T::Text, "the cluster profile's name" },
    { "nodes", T::Number, "nodes used" },
    { "layout.world", T::Number, "ranks: tp·pp·dp" },
    { "parallel.tp", T::Number, "tensor-parallel degree" },
    { "parallel.pp", T::Number, "pipeline-parallel degree" },
    { "parallel.dp", T::Number, "data-parallel degree" },
    { "parallel.vpp", T::Number, "virtual stages per pipeline rank" },
    { "parallel.micro_batch", T::Number, "sequences per micro-batch (b)" },
    { "parallel.global_batch", T::Number, "sequences per step (B)" },
    { "layout.microBatches", T::Number, "micro-batches per pipeline: m = B/(b·dp)" },
    { "parallel.schedule", T::Text, plan::wordList(plan::kScheduleWords) },
    { "memory.zero", T::Number, "ZeRO stage (0 to 3)" },
    { "memory.recompute", T::Text, plan::wordList(plan::kRecomputeWords) },
    { "precision", T::Text, plan::wordList(plan::kPrecisionWords) },
    { "comm.dp_codec", T::Text, "the DP codec: " + plan::wordList(plan::kCodecWords) },
    { "comm.error_feedback", T::Bool, "error feedback on" },
    { "comm.overlap", T::Bool, "DP all-reduce overlapped with backward" },
    { "comm.bucket_mb", T::Number, "gradient bucket size (MB)" },
    { "comm.chunk_kb", T::Number, "chunk size of the chunked ring (KB)" },
    { "comm.allreduce", T::Text, plan::wordList(plan::kAllreduceWords) },
    { "comm.dp_codec.topk", T::Number, "the share of the entries top-k sends (fraction)" },
    { "model.layers", T::Number, "transformer blocks of the model, l" },
    { "model.seq_len", T::Number, "tokens per sequence, s" },
    { "model.vocab", T::Number, "the model's vocabulary, V" },
    { "cluster.device", T::Text, "the cluster's device" },
    { "cluster.devices_per_node", T::Number, "devices per node" },
    { "cluster.intra_node.kind", T::Text, "the link between a node's devices" },
    { "cluster.intra_node.bandwidth_gbs", T::Number, "bandwidth of the intra-node link per device (GB/s)" },
    { "cluster.inter_node.kind", T::Text, "the link between nodes" },
    { "cluster.inter_node.bandwidth_gbs", T::Number, "bandwidth of the inter-node link per adapter (GB/s)" },
    { "formula.activations", T::Text, "the activation formula of one layer and micro-batch (plan's)" },
    { "formula.layerActivationsGB", T::Number, "activations of one layer and micro-batch (GB)" },
    { "layout.stage0Blocks", T::Number, "transformer blocks on the first pipeline stage" },
    { "layout.tpNodes", T::Number, "nodes the widest TP group spans" },
    { "layout.dpNodes", T::Number, "nodes the widest DP group spans" },
    { "predicted.stepTime", T::Number, "predicted step time (s)" },
    { "predicted.tokensPerSecond", T::Number, "predicted tokens/s" },
    { "predicted.tflops", T::Number, "predicted TFLOP/s per GPU" },
    { "predicted.mfu", T::Number, "predicted MFU (fraction)" },
    { "predicted.bubble", T::Number, "simulated bubble (fraction of the step)" },
    { "predicted.bubbleTheory", T::Number, "closed-form bubble (fraction of the step)" },
    { "predicted.memoryGB", T::Number, "memory of the most loaded device (GB)" },
    { "predicted.optimizerGB", T::Number, "optimizer state on the most loaded device (GB)" },
    { "predicted.activationsGB", T::Number, "activations on the most loaded device (GB)" },
    { "predicted.parameters", T::Number, "parameters of the model (billion)" },
    { "predicted.capacityGB", T::Number, "memory of one device (GB)" },
    { "predicted.modelStatesGB", T::Number, "weights, gradients and optimizer state on the most loaded device (GB)" },
    { "predicted.bytesPerParameter", T::Number, "model-state bytes a parameter on each device (bytes)" },
    { "predicted.loadImbalance", T::Number, "load imbalance of the stages (fraction)" },
    { "predicted.fits", T::Bool, "the most loaded device's memory fits" },
    { "predicted.compute", T::Number, "compute of the critical stage (s)" },
    { "predicted.tpExposed", T::Number, "exposed TP communication (s)" },
    { "predicted.ppExposed", T::Number, "exposed PP communication (s)" },
    { "predicted.dpExposed", T::Number, "exposed DP communication (s)" },
    { "predicted.dpShare", T::Number, "exposed DP communication ÷ step time" },
    { "predicted.tpShare", T::Number, "exposed TP communication ÷ step time" },
    { "measured.state", T::Text, "the shown run's state: running, finished, failed, cancelled" },
    { "measured.steps", T::Number, "steps the shown run recorded" },
    { "measured.loss", T::Number, "the shown run's last loss" },
    { "measured.lossDrop", T::Number, "first loss − last loss" },
    { "measured.tokensPerSecond", T::Number, "measured tokens/s (trace statistics)" },
    { "measured.bubble", T::Number, "measured bubble of stage 0 (fraction)" },
    { "measured.bubbleGap", T::Number, "largest |measured − closed-form| bubble over the stages (points)" },
    { "measured.busbw", T::Number, "the highest bus bandwidth among the run's collectives (GB/s)" },
    { "stepper.group", T::Text, "the group the all-reduce stepper shows: dp or tp" },
    { "stepper.algorithm", T::Text, "ring or hierarchical" },
    { "stepper.step", T::Number, "steps shown so far" },
    { "stepper.done", T::Bool, "the stepper reached the last step" },
    { "stepper.steps", T::Number, "steps of the all-reduce the stepper shows" },
    { "stepper.members", T::Number, "members of the group the stepper shows" },
    { "stepper.membersPerNode", T::Number, "members of that group on each node" },
    { "stepper.nodes", T::Number, "nodes that group spans" },
    { "stepper.interNodeSteps", T::Number, "steps of the stepper's all-reduce that cross nodes" },
    { "stepper.ncclAlgorithm", T::Text,
        "the algorithm NCCL's tuner would pick for that all-reduce (ring, tree, nvls)" },
    { "stepper.interNodeBytes", T::Number,
        "the most bytes a member sends over inter-node links in the whole all-reduce" },
    { "view.schedule", T::Bool, "the simulated schedule is in view" },
    { "view.timeline", T::Bool, "the measured timeline is in view" },
    { "view.metrics", T::Bool, "the metrics are in view" },
    { "view.allreduce", T::Bool, "the all-reduce stepper is in view" },
    { "explain.topic", T::Text, "the figure the Explain dock shows (step, bubble, memory, ...)" },
};

// The names facts had before they took the layout file's field paths (lesson files still use them).
const std::pair<const char*, const char*> kOldNames[] = { { "layout.model", "model" }, { "layout.cluster", "cluster" },
    { "layout.nodes", "nodes" }, { "layout.tp", "parallel.tp" }, { "layout.pp", "parallel.pp" },
    { "layout.dp", "parallel.dp" }, { "layout.vpp", "parallel.vpp" }, { "layout.microBatch", "parallel.micro_batch" },
    { "layout.globalBatch", "parallel.global_batch" }, { "layout.schedule", "parallel.schedule" },
    { "layout.zero", "memory.zero" }, { "layout.recompute", "memory.recompute" }, { "layout.precision", "precision" },
    { "layout.codec", "comm.dp_codec" }, { "layout.errorFeedback", "comm.error_feedback" },
    { "layout.overlap", "comm.overlap" }, { "layout.bucketMb", "comm.bucket_mb" },
    { "layout.chunkKb", "comm.chunk_kb" }, { "layout.allreduce", "comm.allreduce" } };

bool compare(double a, const std::string& op, double b)
{
    if (op == "<")
        return a < b;
    if (op == "<=")
        return a <= b;
    if (op == ">")
        return a > b;
    if (op == ">=")
        return a >= b;
    if (op == "==")
        return std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b));
    return !(std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b)));
}

bool isFraction(const std::string& name)
{
    return name == "predicted.mfu" || name == "predicted.bubble" || name == "predicted.bubbleTheory"
        || name == "measured.bubble" || name == "predicted.dpShare" || name == "predicted.tpShare"
        || name == "predicted.loadImbalance" || name == "comm.dp_codec.topk";
}

// A fact's meaning splits into words and a unit: "optimizer state on the most loaded device (GB)" is the
// label "optimizer state on the most loaded device" and the unit "GB". Other parentheses stay in the label.
std::pair<QString, QString> labelAndUnit(const std::string& name)
{
    const FactInfo* info = findFact(name);
    if (!info)
        return { QString::fromStdString(name), QString() };
    const QString meaning = QString::fromUtf8(info->meaning);
    static const QStringList units { QStringLiteral("GB"), QStringLiteral("s"), QStringLiteral("MB"),
        QStringLiteral("KB"), QStringLiteral("GB/s"), QStringLiteral("points"), QStringLiteral("billion"),
        QStringLiteral("bytes") };
    const int open = meaning.lastIndexOf(QLatin1String(" ("));
    if (open > 0 && meaning.endsWith(QLatin1Char(')'))) {
        const QString unit = meaning.mid(open + 2, meaning.size() - open - 3);
        if (unit.startsWith(QLatin1String("fraction"))) // shown as a percentage
            return { meaning.left(open), QString() };
        if (units.contains(unit))
            return { meaning.left(open), unit };
    }
    return { meaning, QString() };
}

// The figures whose meaning is a list of the layout's words (or another sentence for the docs) go by these names
// in a check's feedback: the words the Strategy panel and the lessons use for them.
const std::pair<const char*, const char*> kFigureNames[] = { { "parallel.schedule", "the pipeline schedule" },
    { "memory.recompute", "recomputation" }, { "precision", "the precision" }, { "memory.zero", "the ZeRO stage" },
    { "comm.allreduce", "the all-reduce algorithm" }, { "stepper.algorithm", "the all-reduce stepper's algorithm" },
    { "formula.activations", "the activation formula of one layer and micro-batch" },
    { "explain.topic", "the figure the Explain dock shows" },
    { "stepper.ncclAlgorithm", "the algorithm NCCL's tuner would pick for that all-reduce" } };

// A figure's name in a check's feedback: the fact's label up to any list of choices after a colon ("the DP codec:
// none, fp16, ..." is "the DP codec").
QString figureName(const std::string& fact)
{
    for (const auto& [name, words] : kFigureNames)
        if (fact == name)
            return QObject::tr(words);
    QString label = labelAndUnit(fact).first;
    const int colon = label.indexOf(QLatin1String(": "));
    return colon > 0 ? label.left(colon) : label;
}

// A check's comparison in words: "below 20 GB", "at least 2", "interleaved", "anything but gpipe".
QString wantedText(const std::string& op, const QString& value)
{
    if (op == "<")
        return QObject::tr("below %1").arg(value);
    if (op == "<=")
        return QObject::tr("at most %1").arg(value);
    if (op == ">")
        return QObject::tr("above %1").arg(value);
    if (op == ">=")
        return QObject::tr("at least %1").arg(value);
    if (op == "!=")
        return QObject::tr("anything but %1").arg(value);
    return value;
}

// A value as a check message shows it: with its unit when it has one.
QString valueText(const std::string& name, const FactValue& value, const QString& unit)
{
    if (const auto* topic = std::get_if<std::string>(&value); topic && name == "explain.topic")
        return QStringLiteral("“%1”").arg(explainTopicCaption(QString::fromStdString(*topic)));
    const QString text = describeFact(name, value);
    return unit.isEmpty() || !std::holds_alternative<double>(value) || isFraction(name)
        ? text
        : text + QLatin1Char(' ') + unit;
}

} // namespace

const std::vector<FactInfo>& lessonFacts()
{
    return kFacts;
}

std::string canonicalFactName(const std::string& name)
{
    for (const auto& [old, now] : kOldNames)
        if (name == old)
            return now;
    return name;
}

const FactInfo* findFact(const std::string& name)
{
    const std::string canonical = canonicalFactName(name);
    for (const auto& f : kFacts)
        if (canonical == f.name)
            return &f;
    return nullptr;
}

QString factText(const std::string& name, const FactValue& value)
{
    return valueText(canonicalFactName(name), value, labelAndUnit(canonicalFactName(name)).second);
}

QString describeFact(const std::string& name, const FactValue& value)
{
    if (const auto* b = std::get_if<bool>(&value))
        return *b ? QObject::tr("yes") : QObject::tr("no");
    if (const auto* s = std::get_if<std::string>(&value))
        return QString::fromStdString(*s);
    const double x = std::get<double>(value);
    if (isFraction(name))
        return QLocale().toString(100.0 * x, 'f', 1) + QStringLiteral(" %");
    if (std::abs(x) >= 1e4) // 150,000 tokens/s, never 1.5e+05
        return QLocale().toString(x, 'f', 0);
    return QLocale().toString(x, 'g', 4);
}

CheckResult evaluateCheck(const LessonCheck& check, const Facts& facts)
{
    if (!check.all.empty()) {
        CheckResult out { true, {} };
        QStringList details;
        for (const auto& c : check.all) {
            const CheckResult r = evaluateCheck(c, facts);
            out.pass = out.pass && r.pass;
            details << r.detail;
        }
        out.detail = details.join(QStringLiteral("; "));
        return out;
    }
    // In plain words, never the fact's internal name or the operator ("predicted.optimizerGB is 80.86, needs < 20"
    // and "needs == memory" read as code): "optimizer state on the most loaded device is 80.86 GB, needs to be
    // below 20 GB".
    const std::string fact = canonicalFactName(check.fact);
    const QString unit = labelAndUnit(fact).second;
    const QString name = figureName(fact);
    const QString wanted = wantedText(check.op, valueText(fact, check.value, unit));
    const auto it = facts.find(fact);
    if (it == facts.end())
        return { false, QObject::tr("%1 is not known yet (needs to be %2)").arg(name, wanted) };
    const FactValue& v = it->second;
    bool pass = false;
    if (v.index() != check.value.index())
        pass = false;
    else if (const auto* x = std::get_if<double>(&v))
        pass = compare(*x, check.op, std::get<double>(check.value));
    else
        pass = (v == check.value) == (check.op == "==");
    if (std::holds_alternative<bool>(check.value)) // "the most loaded device's memory fits: no, needs yes"
        return { pass, QObject::tr("%1: %2, needs %3").arg(name, valueText(fact, v, unit), wanted) };
    return { pass, QObject::tr("%1 is %2, needs to be %3").arg(name, valueText(fact, v, unit), wanted) };
}

namespace {
// A link as a text names it ("NVLink", not the profile's "nvlink").
std::string linkWord(plan::LinkKind kind)
{
    switch (kind) {
    case plan::LinkKind::NvLink:
        return "NVLink";
    case plan::LinkKind::Pcie:
        return "PCIe";
    case plan::LinkKind::InfiniBand:
        return "InfiniBand";
    case plan::LinkKind::Ethernet:
        return "Ethernet";
    case plan::LinkKind::Shm:
        return "shared memory";
    case plan::LinkKind::Xgmi:
        return "Infinity Fabric";
    }
    return std::string(plan::toString(kind));
}

// What the model and the cluster are, and the activation formula for the layout (plan's, as Explain prints it).
void addModelAndClusterFacts(const plan::Layout& l, Facts& f)
{
    f["model.layers"] = double(l.model.layers);
    f["model.seq_len"] = double(l.model.seqLen);
    f["model.vocab"] = double(l.model.vocab);
    f["cluster.device"] = l.cluster.device.name;
    f["cluster.devices_per_node"] = double(l.cluster.devicesPerNode);
    f["cluster.intra_node.kind"] = linkWord(l.cluster.intraNode.kind);
    f["cluster.intra_node.bandwidth_gbs"] = l.cluster.intraNode.bandwidthGBs;
    if (l.cluster.interNode) {
        f["cluster.inter_node.kind"] = linkWord(l.cluster.interNode->kind);
        f["cluster.inter_node.bandwidth_gbs"] = l.cluster.interNode->bandwidthGBs;
    }
    if (l.comm.dpCodec.kind == plan::Codec::Kind::TopK)
        f["comm.dp_codec.topk"] = l.comm.dpCodec.topkFraction;
    const auto& m = l.memory;
    f["formula.activations"]
        = plan::layerActivationFormula(l.model, l.parallel.sp, m.attention, m.recompute, m.efficientNorm);
    if (l.parallel.tp >= 1 && l.parallel.microBatch >= 1) {
        const double width = l.precision == plan::Precision::Fp32 ? 2.0 : 1.0; // the formula counts 16-bit values
        f["formula.layerActivationsGB"] = plan::layerActivationBytes(l.model, l.parallel.microBatch, l.parallel.tp,
                                              l.parallel.sp, m.attention, m.recompute, m.efficientNorm)
            * width / double(std::max<std::int64_t>(1, l.parallel.cp)) / 1e9;
    }
}
} // namespace

void addLayoutFacts(const plan::Layout& l, bool valid, const plan::Prediction* p, Facts* facts)
{
    Facts& f = *facts;
    const auto& par = l.parallel;
    f["layout.valid"] = valid;
    f["model"] = l.modelProfile.empty() ? l.model.name : l.modelProfile;
    f["cluster"] = l.clusterProfile.empty() ? l.cluster.name : l.clusterProfile;
    f["nodes"] = double(l.nodes);
    f["layout.world"] = double(par.worldSize());
    f["parallel.tp"] = double(par.tp);
    f["parallel.pp"] = double(par.pp);
    f["parallel.dp"] = double(par.dp);
    f["parallel.vpp"] = double(par.vpp);
    f["parallel.micro_batch"] = double(par.microBatch);
    f["parallel.global_batch"] = double(par.globalBatch);
    f["layout.microBatches"] = par.microBatch * par.dp > 0 ? double(par.microBatches()) : 0.0;
    f["parallel.schedule"] = std::string(plan::toString(par.schedule));
    f["memory.zero"] = double(l.memory.zero);
    f["memory.recompute"] = std::string(plan::toString(l.memory.recompute));
    f["precision"] = std::string(plan::toString(l.precision));
    const std::string codec = l.comm.dpCodec.toString();
    f["comm.dp_codec"] = codec.substr(0, codec.find(':'));
    f["comm.error_feedback"] = l.comm.errorFeedback;
    f["comm.overlap"] = l.comm.overlap;
    f["comm.bucket_mb"] = l.comm.bucketMb;
    f["comm.chunk_kb"] = l.comm.chunkKb;
    f["comm.allreduce"] = std::string(plan::wordOf(plan::kAllreduceWords, l.comm.allreduce));
    addModelAndClusterFacts(l, f);
    if (par.pp * par.vpp <= l.model.layers && par.pp >= 1 && par.vpp >= 1)
        f["layout.stage0Blocks"] = double(l.stageRanges().front().size());
    if (par.tp >= 1 && par.pp >= 1 && par.dp >= 1) {
        const plan::RankGrid grid = plan::RankGrid::forLayout(l);
        f["layout.tpNodes"] = double(grid.maxNodesSpanned(plan::GroupKind::Tensor));
        f["layout.dpNodes"] = double(grid.maxNodesSpanned(plan::GroupKind::Data));
    }
    if (!p)
        return;
    f["predicted.stepTime"] = p->stepTime;
    f["predicted.tokensPerSecond"] = p->tokensPerSecond;
    f["predicted.tflops"] = p->tflopsPerGpu;
    f["predicted.mfu"] = p->mfu;
    f["predicted.bubble"] = p->bubbleFraction;
    f["predicted.bubbleTheory"] = p->bubbleTheory;
    f["predicted.memoryGB"] = p->memory.total();
    f["predicted.optimizerGB"] = p->memory.optimizer;
    f["predicted.activationsGB"] = p->memory.activations;
    f["predicted.fits"] = p->fits;
    f["predicted.parameters"] = p->totalParameters / 1e9;
    f["predicted.capacityGB"] = p->memoryCapacityGB;
    f["predicted.modelStatesGB"] = p->memory.modelStates();
    f["predicted.bytesPerParameter"]
        = plan::modelStateBytesPerParameter(l.precision, l.optimizer, l.memory.zero, std::max<std::int64_t>(1, par.dp))
              .total();
    f["predicted.loadImbalance"] = p->loadImbalance;
    f["predicted.compute"] = p->compute;
    f["predicted.tpExposed"] = p->tpExposed;
    f["predicted.ppExposed"] = p->ppExposed;
    f["predicted.dpExposed"] = p->dpExposed;
    const double step = std::max(1e-12, p->stepTime);
    f["predicted.dpShare"] = p->dpExposed / step;
    f["predicted.tpShare"] = p->tpExposed / step;
}

} // namespace loom::views
