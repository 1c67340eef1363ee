#include "app/cli/CommandLine.h"
#include "app/cli/Commands.h"

#include "engine/plan/CostModel.h"
#include "engine/plan/LayoutParser.h"
#include "engine/plan/Search.h"
#include "engine/plan/Simulator.h"
#include "engine/trace/ChromeTrace.h"
#include "engine/trace/PlainWhat.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>

namespace loom::app {

namespace {

// The model states' dtypes and bytes per parameter before ZeRO's sharding (plan::modelStateBytesPerParameter).
nlohmann::ordered_json optimizerStateJson(const plan::Layout& l)
{
    const auto& o = l.optimizer;
    const plan::ModelStateBytes b = plan::modelStateBytesPerParameter(l.precision, o, 0, 1);
    const double grads = plan::gradientBytesPerValue(l.precision, o);
    return { { "main_params_dtype", l.precision == plan::Precision::Fp32 ? "none" : plan::toString(o.mainParamsDtype) },
        { "exp_avg_dtype", plan::toString(o.expAvgDtype) }, { "exp_avg_sq_dtype", plan::toString(o.expAvgSqDtype) },
        { "main_grads_dtype",
            o.mainGradsDtype ? plan::toString(*o.mainGradsDtype)
                             : (grads == 4.0 ? "fp32" : std::string(plan::toString(l.precision))) },
        { "bytes_per_parameter", { { "params", b.params }, { "grads", b.grads }, { "optimizer", b.optimizer } } } };
}

std::string fixed(double v, int digits)
{
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", digits, v);
    return buf;
}

// The stack as `plan predict --json` shows it: its figures and, for a built-in one, what fixed them.
nlohmann::ordered_json stackJson(const plan::Layout& l)
{
    nlohmann::ordered_json j = { { "name", l.stack.name },
        { "elementwise", plan::wordOf(plan::kElementwiseWords, l.stack.elementwise) }, { "compute", l.stack.compute },
        { "eager_elementwise_bytes_per_layer", plan::eagerElementwiseBytes(l) }, { "applies", plan::stackApplies(l) } };
    if (const plan::BuiltinStack* b = plan::findBuiltinStack(l.stack.name); b && b->spec == l.stack)
        j["source"] = std::string(b->source);
    return j;
}

int predictCommand(CliContext& context, const QString& file, bool json, const QString& stack)
{
    const auto read = plan::readLayoutFile(file.toStdString(), context.catalog());
    if (!read.ok()) {
        context.err << read.diagnostics.format();
        return ExitInvalid;
    }
    plan::Layout l = *read.layout;
    if (!stack.isEmpty()) { // --stack prices the layout on another framework's kernels
        const plan::BuiltinStack* b = plan::findBuiltinStack(stack.toStdString());
        if (!b) {
            context.err << "loom plan predict: --stack " << stack.toStdString() << " is not a known stack; write "
                        << plan::builtinStackList() << "\n";
            return ExitUsage;
        }
        l.stack = b->spec;
    }
    if (!plan::simulatable(l)) {
        context.err
            << "error: " << l.parallel.microBatches() << " micro-batches on " << l.parallel.pp
            << " pipeline stages are too many to simulate; use a larger micro_batch or a smaller global_batch\n";
        return ExitInvalid;
    }
    const plan::Prediction p = plan::predict(l);
    if (json) {
        nlohmann::ordered_json j = { { "layout", l.name }, { "step_time_s", p.stepTime },
            { "tokens_per_s", p.tokensPerSecond }, { "tflops_per_gpu", p.tflopsPerGpu }, { "mfu", p.mfu },
            { "bubble_fraction", p.bubbleFraction }, { "bubble_theory", p.bubbleTheory },
            { "step_split_s",
                { { "compute", p.compute }, { "tp_exposed", p.tpExposed }, { "pp_exposed", p.ppExposed },
                    { "bubble", p.bubble }, { "dp_exposed", p.dpExposed }, { "optimizer", p.optimizer },
                    { "cp_exposed", p.cpExposed } } },
            { "memory_gb",
                { { "params", p.memory.params }, { "grads", p.memory.grads }, { "optimizer", p.memory.optimizer },
                    { "activations", p.memory.activations }, { "reserve", p.memory.reserve },
                    { "total", p.memory.total() } } },
            { "memory_capacity_gb", p.memoryCapacityGB }, { "fits", p.fits }, { "model_flops_per_step", p.modelFlops },
            { "gpus", l.parallel.worldSize() }, { "hardware_flops_per_step", p.hardwareFlops },
            { "hardware_tflops_per_gpu", p.hardwareTflopsPerGpu }, { "hfu", p.hfu } };
        nlohmann::ordered_json collectives = nlohmann::ordered_json::array();
        for (const auto& c : p.collectives)
            collectives.push_back({ { "group", c.group }, { "collective", c.collective }, { "algorithm", c.algorithm },
                { "bytes", c.bytes }, { "ranks", c.ranks }, { "nodes", c.nodes }, { "seconds", c.seconds },
                { "bus_bandwidth_gbs", c.busBandwidthGBs } });
        j["collectives"] = collectives;
        j["memory_gb"]["gathered"] = p.memory.gathered;
        j["memory_gb"]["fp8_state"] = p.memory.fp8State;
        j["memory_gb"]["codec_residual"] = p.memory.residual;
        j["bottleneck_stage"] = p.bottleneckStage;
        j["bottleneck_bubble_fraction"] = p.bottleneckBubbleFraction;
        j["load_imbalance"] = p.loadImbalance;
        j["fsdp_overheads_s"] = { { "exposed_edges", p.shardEdges }, { "buffer_copies", p.shardCopies } };
        j["optimizer_state"] = optimizerStateJson(l);
        j["fp8"] = std::string(plan::toString(l.fp8));
        j["stack"] = stackJson(l);
        j["overlap"]
            = { { "tp_comm_overlap", l.comm.tpCommOverlap }, { "overlap_grad_reduce", l.comm.gradReduceOverlapped() },
                  { "overlap_param_gather", l.comm.overlapParamGather } };
        if (l.model.isMoe()) {
            j["step_split_s"]["ep_exposed"] = p.epExposed;
            j["parameters"] = { { "total", p.totalParameters }, { "active", p.activeParameters } };
        }
        context.out << j.dump(2) << "\n";
        return ExitOk;
    }
    auto& o = context.out;
    o << "layout " << l.name << ": " << l.parallel.worldSize() << " × " << l.cluster.device.name
      << " (tp=" << l.parallel.tp << (l.parallel.cp > 1 ? " cp=" + std::to_string(l.parallel.cp) : std::string())
      << " pp=" << l.parallel.pp << " dp=" << l.parallel.dp << ", " << plan::toString(l.parallel.schedule) << ", "
      << l.parallel.microBatches() << " micro-batches of " << l.parallel.microBatch
      << (l.parallel.microbatchGroup > 0 ? " in groups of " + std::to_string(l.parallel.microbatchGroup) + " per chunk"
                                         : std::string())
      << ")\n";
    if (l.stack != plan::StackSpec {})
        o << "  stack          " << l.stack.name << ": " << plan::wordOf(plan::kElementwiseWords, l.stack.elementwise)
          << " element-wise ops, " << fixed(100 * l.stack.compute, 0) << " % of the profile's compute efficiency\n";
    o << "  step time      " << fixed(p.stepTime, 3) << " s   (" << fixed(p.tokensPerSecond, 0) << " tokens/s)\n";
    o << "  per GPU        " << fixed(p.tflopsPerGpu, 1) << " TFLOP/s of model FLOPs, MFU " << fixed(100 * p.mfu, 1)
      << " %";
    if (p.hardwareFlops > p.modelFlops) // recomputation adds work the model does not need
        o << "; " << fixed(p.hardwareTflopsPerGpu, 1) << " TFLOP/s of hardware FLOPs, HFU " << fixed(100 * p.hfu, 1)
          << " %";
    o << "\n";
    o << "  step split     compute " << fixed(p.compute, 3) << " s, TP comm " << fixed(p.tpExposed, 3) << " s, PP comm "
      << fixed(p.ppExposed, 3) << " s, bubble " << fixed(p.bubble, 3) << " s, DP comm " << fixed(p.dpExposed, 3)
      << " s, optimizer " << fixed(p.optimizer, 3) << " s";
    if (l.parallel.cp > 1)
        o << ", CP comm " << fixed(p.cpExposed, 3) << " s";
    if (l.model.isMoe())
        o << ", expert all-to-all " << fixed(p.epExposed, 3) << " s";
    o << "\n";
    if (l.model.isMoe())
        o << "  experts        " << l.model.experts << " (top-" << l.model.effectiveTopK()
          << ") over ep=" << l.parallel.ep << ": " << fixed(p.totalParameters / 1e9, 2) << " B parameters, "
          << fixed(p.activeParameters / 1e9, 2) << " B active per token\n";
    o << "  bubble         " << fixed(100 * p.bubbleFraction, 1) << " % of the step (closed form "
      << fixed(100 * p.bubbleTheory, 1)
      << " %: " << (plan::splitsBackward(l.parallel.schedule) ? "the schedule's form with F, B, W" : "(p-1)/(v·m+p-1)")
      << ")\n";
    o << "  memory/device  params " << fixed(p.memory.params, 2) << " GB, grads " << fixed(p.memory.grads, 2)
      << " GB, optimizer " << fixed(p.memory.optimizer, 2) << " GB, activations " << fixed(p.memory.activations, 2)
      << " GB, reserve " << fixed(p.memory.reserve, 2) << " GB = " << fixed(p.memory.total(), 2) << " of "
      << fixed(p.memoryCapacityGB, 0) << " GB: " << (p.fits ? "fits" : "DOES NOT FIT") << "\n";
    for (const auto& n : p.notes)
        o << "  note: " << n << "\n";
    return ExitOk;
}

} // namespace

int simulateCommand(CliContext& context, const QStringList& args)
{
    const int outAt = static_cast<int>(args.indexOf(QStringLiteral("--out")));
    if (args.size() != 3 || outAt < 1 || outAt + 1 >= args.size()) {
        context.err << "usage: loom simulate LAYOUT.json --out trace.json\n";
        return ExitUsage;
    }
    const QString layoutFile = outAt == 0 ? args[2] : args[0];
    const QString out = args[outAt + 1];
    const auto read = plan::readLayoutFile(layoutFile.toStdString(), context.catalog());
    if (!read.ok()) {
        context.err << read.diagnostics.format();
        return ExitInvalid;
    }
    if (!plan::simulatable(*read.layout)) {
        context.err << "error: too many micro-batches to simulate; use a larger micro_batch\n";
        return ExitInvalid;
    }
    const plan::Prediction p = plan::predict(*read.layout);
    std::ofstream file(out.toStdString(), std::ios::trunc);
    if (!file) {
        context.err << "error: cannot write " << out.toStdString() << "\n";
        return ExitFailure;
    }
    const nlohmann::ordered_json other = { { "generator", "loom simulate" }, { "loom_trace", 1 },
        { "layout", nlohmann::ordered_json::parse(plan::writeLayout(*read.layout)) } };
    trace::writeChromeTrace(file, p.events, {}, other.dump());
    if (!file.flush()) {
        context.err << "error: writing " << out.toStdString() << " failed (is the disk full?)\n";
        return ExitFailure;
    }
    context.out << "wrote " << p.events.size() << " simulated events of one step (" << fixed(p.stepTime, 3) << " s, "
                << read.layout->parallel.pp << " pipeline stages, one rank each) to " << out.toStdString()
                << "; open it in Perfetto (ui.perfetto.dev) or chrome://tracing\n";
    return ExitOk;
}

namespace {

// Why nothing was ranked, with the fix that fits the cause.
std::string searchAdvice(const plan::SearchResult& r, long long devices, long long batch)
{
    if (r.cancelled)
        return "the search was stopped before it ranked anything";
    if (r.evaluated + r.pruned == 0)
        return "no split of " + std::to_string(devices) + " devices into tp·pp·dp suits a global batch of "
            + std::to_string(batch)
            + " (dp·micro_batch must divide it, tp must divide the heads, pp at most the layers); choose a global "
              "batch that is "
              "a multiple of the device count, or fewer nodes";
    if (r.fitting == 0)
        return "none of the " + std::to_string(r.evaluated + r.pruned)
            + " layouts fits in memory; add nodes, or choose a smaller global "
              "batch or model";
    if (r.unsimulatable == r.fitting)
        return "every layout that fits has too many micro-batches to replay; choose a smaller global batch";
    return "no layout fits once replayed in full; add nodes, or choose a smaller global batch or model";
}

} // namespace

int searchCommand(CliContext& context, const QStringList& args, bool json)
{
    QString model, cluster;
    long long nodes = 0, batch = 0, top = 5, seqLen = 0;
    QString precision = QStringLiteral("bf16");
    for (int i = 0; i + 1 < args.size(); i += 2) {
        const QString& k = args[i];
        const QString& v = args[i + 1];
        bool ok = true;
        if (k == QLatin1String("--model"))
            model = v;
        else if (k == QLatin1String("--cluster"))
            cluster = v;
        else if (k == QLatin1String("--nodes"))
            nodes = v.toLongLong(&ok);
        else if (k == QLatin1String("--global-batch"))
            batch = v.toLongLong(&ok);
        else if (k == QLatin1String("--top"))
            top = v.toLongLong(&ok);
        else if (k == QLatin1String("--precision"))
            precision = v;
        else if (k == QLatin1String("--seq-len")) // a longer context than the profile's (context parallelism)
            ok = (seqLen = v.toLongLong(&ok)) >= 1 && seqLen <= (1LL << 24);
        else
            ok = false;
        if (!ok) {
            context.err << "loom plan search: " << k.toStdString() << " " << v.toStdString() << " is not valid\n";
            return ExitUsage;
        }
    }
    if (args.size() % 2 || model.isEmpty() || cluster.isEmpty() || nodes < 1 || batch < 1 || top < 1
        || !plan::precisionFromString(precision.toStdString())) {
        context.err << "usage: loom plan search --model M --cluster C --nodes N --global-batch B [--top K] "
                       "[--precision fp32|fp16|bf16] [--seq-len S] [--json]\n";
        return ExitUsage;
    }
    plan::SearchRequest request;
    auto m = context.catalog().findModel(model.toStdString());
    auto c = context.catalog().findCluster(cluster.toStdString());
    if (!m || !c) {
        context.err << "error: "
                    << (!m ? "no model profile is called \"" + model.toStdString() + "\""
                           : "no cluster profile is called \"" + cluster.toStdString() + "\"")
                    << "; see loom profiles list\n";
        return ExitInvalid;
    }
    request.model = *m;
    request.modelProfile = model.toStdString();
    if (seqLen > 0 && seqLen != m->seqLen) { // the layouts then carry the model inline, with its new length
        request.model.seqLen = seqLen;
        request.modelProfile.clear();
    }
    request.cluster = *c;
    request.clusterProfile = cluster.toStdString();
    request.nodes = nodes;
    request.globalBatch = batch;
    request.top = static_cast<int>(top);
    request.precision = *plan::precisionFromString(precision.toStdString());
    plan::SearchResult result;
    try {
        result = plan::search(request);
    } catch (const std::invalid_argument& e) {
        context.err << "error: " << plainWhat(e) << "\n";
        return ExitInvalid;
    }
    if (json) {
        auto list = nlohmann::ordered_json::array();
        for (const auto& cand : result.ranked) {
            const auto& p = cand.prediction;
            list.push_back({ { "layout", nlohmann::ordered_json::parse(plan::writeLayout(cand.layout)) },
                { "step_time_s", p.stepTime }, { "tokens_per_s", p.tokensPerSecond },
                { "tflops_per_gpu", p.tflopsPerGpu }, { "mfu", p.mfu }, { "bubble_fraction", p.bubbleFraction },
                { "memory_gb", p.memory.total() } });
        }
        context.out << nlohmann::ordered_json(
            { { "evaluated", result.evaluated }, { "pruned", result.pruned }, { "fitting", result.fitting },
                { "bounded", result.bounded }, { "unsimulatable", result.unsimulatable }, { "why", result.why },
                { "ranked", list },
                { "advice", result.ranked.empty() ? searchAdvice(result, nodes * c->devicesPerNode, batch) : "" } })
                           .dump(2)
                    << "\n";
        return ExitOk;
    }
    context.out << "evaluated " << result.evaluated << " valid layouts of " << model.toStdString() << " on " << nodes
                << " × " << cluster.toStdString() << " (global batch " << batch << "); " << result.fitting
                << " fit in memory"
                << (result.pruned > 0 ? "; " + std::to_string(result.pruned)
                               + " more ruled out by a memory floor, before any estimate"
                                      : std::string())
                << (result.bounded > 0 ? "; " + std::to_string(result.bounded)
                               + " more not estimated: even their compute and bubble alone are slower than the "
                                 "best found"
                                       : std::string())
                << "\n";
    int rank = 0;
    for (const auto& cand : result.ranked) {
        const auto& l = cand.layout;
        const auto& p = cand.prediction;
        context.out << "  " << ++rank << ". " << plan::describeCandidate(l) << ": " << fixed(p.stepTime, 3)
                    << " s/step, " << fixed(p.tokensPerSecond, 0) << " tokens/s, " << fixed(p.tflopsPerGpu, 1)
                    << " TFLOP/s per GPU, " << fixed(p.memory.total(), 1) << " GB\n";
    }
    if (!result.why.empty())
        context.out << result.why << "\n";
    if (result.unsimulatable > 0)
        context.out << result.unsimulatable << " layout" << (result.unsimulatable == 1 ? "" : "s")
                    << " that fit were left out: their micro-batches make " << plan::replayLimitText()
                    << "; a smaller global batch brings them in\n";
    if (result.ranked.empty())
        context.out << searchAdvice(result, nodes * c->devicesPerNode, batch) << "\n";
    return ExitOk;
}

int planCommand(CliContext& context, const QStringList& argsIn)
{
    QStringList args = argsIn;
    const bool json = args.removeAll(QStringLiteral("--json")) > 0;
    if (args.value(0) == QLatin1String("predict") && args.size() == 2)
        return predictCommand(context, args[1], json, {});
    if (args.value(0) == QLatin1String("predict") && args.size() == 4 && args.indexOf(QStringLiteral("--stack")) >= 1) {
        const int at = static_cast<int>(args.indexOf(QStringLiteral("--stack")));
        if (at + 1 < args.size()) {
            const QString stack = args[at + 1];
            args.remove(at, 2);
            return predictCommand(context, args[1], json, stack);
        }
    }
    if (args.value(0) == QLatin1String("search"))
        return searchCommand(context, args.mid(1), json);
    if (args.value(0) == QLatin1String("calibrate"))
        return calibrateCommand(context, args.mid(1), json);
    context.err
        << "usage: loom plan predict LAYOUT.json [--stack NAME] [--json]\n"
           "       loom plan search --model M --cluster C --nodes N --global-batch B [--top K] [--seq-len S] [--json]\n"
           "       loom plan calibrate TRACE.json --cluster C [--name NAME] [--json]\n";
    return ExitUsage;
}

} // namespace loom::app
