// The vocabulary of lesson checks: the facts, how a check is evaluated on them, and the facts a layout and
// its prediction give. The GUI adds the facts of runs, the all-reduce stepper and the docks (LessonDock).

#include "views/teaching/Lesson.h"

#include "engine/plan/RankGrid.h"

#include <QLocale>

#include <cmath>

namespace loom::views {

namespace {
using T = FactType;
const std::vector<FactInfo> kFacts = {
    { "layout.valid", T::Bool, "the layout has no errors" },
    { "layout.model", T::Text, "the model profile's name" },
    { "layout.cluster", T::Text, "the cluster profile's name" },
    { "layout.nodes", T::Number, "nodes used" },
    { "layout.world", T::Number, "ranks: tp·pp·dp" },
    { "layout.tp", T::Number, "tensor-parallel degree" },
    { "layout.pp", T::Number, "pipeline-parallel degree" },
    { "layout.dp", T::Number, "data-parallel degree" },
    { "layout.vpp", T::Number, "virtual stages per pipeline rank" },
    { "layout.microBatch", T::Number, "sequences per micro-batch (b)" },
    { "layout.globalBatch", T::Number, "sequences per step (B)" },
    { "layout.microBatches", T::Number, "micro-batches per pipeline: m = B/(b·dp)" },
    { "layout.schedule", T::Text, plan::wordList(plan::kScheduleWords) },
    { "layout.zero", T::Number, "ZeRO stage (0 or 1)" },
    { "layout.recompute", T::Text, plan::wordList(plan::kRecomputeWords) },
    { "layout.precision", T::Text, plan::wordList(plan::kPrecisionWords) },
    { "layout.codec", T::Text, "the DP codec: " + plan::wordList(plan::kCodecWords) },
    { "layout.errorFeedback", T::Bool, "error feedback on" },
    { "layout.overlap", T::Bool, "DP all-reduce overlapped with backward" },
    { "layout.bucketMb", T::Number, "gradient bucket size (MB)" },
    { "layout.chunkKb", T::Number, "chunk size of the chunked ring (KB)" },
    { "layout.allreduce", T::Text, plan::wordList(plan::kAllreduceWords) },
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
    { "stepper.interNodeBytes", T::Number,
        "the most bytes a member sends over inter-node links in the whole all-reduce" },
    { "view.schedule", T::Bool, "the simulated schedule is in view" },
    { "view.timeline", T::Bool, "the measured timeline is in view" },
    { "view.metrics", T::Bool, "the metrics are in view" },
    { "view.allreduce", T::Bool, "the all-reduce stepper is in view" },
    { "explain.topic", T::Text, "the figure the Explain dock shows (step, bubble, memory, ...)" },
};

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
        || name == "measured.bubble" || name == "predicted.dpShare" || name == "predicted.tpShare";
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
        QStringLiteral("KB"), QStringLiteral("GB/s"), QStringLiteral("points") };
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

// A value as a check message shows it: with its unit when it has one.
QString valueText(const std::string& name, const FactValue& value, const QString& unit)
{
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

const FactInfo* findFact(const std::string& name)
{
    for (const auto& f : kFacts)
        if (name == f.name)
            return &f;
    return nullptr;
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
    // In words, never the fact's internal name ("predicted.optimizerGB is 80.86, needs < 20" read as code).
    const auto [name, unit] = labelAndUnit(check.fact);
    const QString wanted
        = QString::fromStdString(check.op) + QLatin1Char(' ') + valueText(check.fact, check.value, unit);
    const auto it = facts.find(check.fact);
    if (it == facts.end())
        return { false, QObject::tr("%1 is not known yet (needs %2)").arg(name, wanted) };
    const FactValue& v = it->second;
    bool pass = false;
    if (v.index() != check.value.index())
        pass = false;
    else if (const auto* x = std::get_if<double>(&v))
        pass = compare(*x, check.op, std::get<double>(check.value));
    else
        pass = (v == check.value) == (check.op == "==");
    return { pass, QObject::tr("%1 is %2, needs %3").arg(name, valueText(check.fact, v, unit), wanted) };
}

void addLayoutFacts(const plan::Layout& l, bool valid, const plan::Prediction* p, Facts* facts)
{
    Facts& f = *facts;
    const auto& par = l.parallel;
    f["layout.valid"] = valid;
    f["layout.model"] = l.modelProfile.empty() ? l.model.name : l.modelProfile;
    f["layout.cluster"] = l.clusterProfile.empty() ? l.cluster.name : l.clusterProfile;
    f["layout.nodes"] = double(l.nodes);
    f["layout.world"] = double(par.worldSize());
    f["layout.tp"] = double(par.tp);
    f["layout.pp"] = double(par.pp);
    f["layout.dp"] = double(par.dp);
    f["layout.vpp"] = double(par.vpp);
    f["layout.microBatch"] = double(par.microBatch);
    f["layout.globalBatch"] = double(par.globalBatch);
    f["layout.microBatches"] = par.microBatch * par.dp > 0 ? double(par.microBatches()) : 0.0;
    f["layout.schedule"] = std::string(plan::toString(par.schedule));
    f["layout.zero"] = double(l.memory.zero);
    f["layout.recompute"] = std::string(plan::toString(l.memory.recompute));
    f["layout.precision"] = std::string(plan::toString(l.precision));
    const std::string codec = l.comm.dpCodec.toString();
    f["layout.codec"] = codec.substr(0, codec.find(':'));
    f["layout.errorFeedback"] = l.comm.errorFeedback;
    f["layout.overlap"] = l.comm.overlap;
    f["layout.bucketMb"] = l.comm.bucketMb;
    f["layout.chunkKb"] = l.comm.chunkKb;
    f["layout.allreduce"] = std::string(plan::wordOf(plan::kAllreduceWords, l.comm.allreduce));
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
    f["predicted.compute"] = p->compute;
    f["predicted.tpExposed"] = p->tpExposed;
    f["predicted.ppExposed"] = p->ppExposed;
    f["predicted.dpExposed"] = p->dpExposed;
    const double step = std::max(1e-12, p->stepTime);
    f["predicted.dpShare"] = p->dpExposed / step;
    f["predicted.tpShare"] = p->tpExposed / step;
}

} // namespace loom::views
