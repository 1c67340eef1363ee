#include "app/cli/CommandLine.h"
#include "app/cli/Commands.h"

#include "engine/plan/CostModel.h"
#include "engine/plan/LayoutParser.h"
#include "engine/trace/DeviceStats.h"
#include "engine/trace/LaunchStats.h"
#include "engine/trace/PlainWhat.h"
#include "engine/trace/TraceStats.h"

#include <QFileInfo>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <optional>

namespace loom::app {

namespace {

std::string fmt(double v, const char* f = "%.3f")
{
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

// The ProfilerStep ranges that loom trace import keeps in otherData.imported.profiler_steps.
std::vector<trace::ProfilerStepRange> profilerSteps(const nlohmann::json& meta)
{
    std::vector<trace::ProfilerStepRange> out;
    if (!meta.is_object() || !meta.contains("imported") || !meta["imported"].is_object())
        return out;
    const auto& list = meta["imported"].value("profiler_steps", nlohmann::json::array());
    if (!list.is_array())
        return out;
    for (const auto& s : list) {
        if (!s.is_object() || !s.value("rank", nlohmann::json()).is_number_integer()
            || !s.value("step", nlohmann::json()).is_number_integer()
            || !s.value("start_ns", nlohmann::json()).is_number_integer()
            || !s.value("end_ns", nlohmann::json()).is_number_integer())
            continue;
        trace::ProfilerStepRange r;
        r.rank = static_cast<std::int32_t>(std::clamp<std::int64_t>(s["rank"].get<std::int64_t>(), -1, 1 << 24));
        r.step = static_cast<std::int32_t>(std::clamp<std::int64_t>(s["step"].get<std::int64_t>(), -1, INT32_MAX));
        r.startNs = s["start_ns"].get<std::int64_t>();
        r.endNs = s["end_ns"].get<std::int64_t>();
        if (r.rank >= 0 && r.step >= 0 && r.endNs >= r.startNs)
            out.push_back(r);
    }
    return out;
}

nlohmann::ordered_json deviceJson(const trace::DeviceStats& d)
{
    auto ranks = nlohmann::ordered_json::array();
    for (const auto& r : d.perRank)
        ranks.push_back({ { "rank", r.rank }, { "idle_pct", r.idlePct }, { "compute_pct", r.computePct },
            { "non_compute_pct", r.nonComputePct },
            { "overlap_pct", r.overlapPct < 0 ? nlohmann::ordered_json() : nlohmann::ordered_json(r.overlapPct) },
            { "kernel_time_s", double(r.kernelNs) * 1e-9 }, { "idle_s", double(r.idleNs) * 1e-9 },
            { "compute_s", double(r.computeNs) * 1e-9 }, { "non_compute_s", double(r.nonComputeNs) * 1e-9 },
            { "steps", r.steps } });
    return ranks;
}

void deviceTable(std::ostream& out, const trace::DeviceStats& d)
{
    if (d.perRank.empty())
        return;
    out << "  GPU time per rank (HTA's temporal breakdown and overlap, "
        << (d.allSteps ? "all profiler steps" : "the profiler steps but the last") << "):\n"
        << "    rank    idle %  compute %  non-compute %  overlap %\n";
    for (const auto& r : d.perRank)
        out << "    " << fmt(r.rank, "%4.0f") << "  " << fmt(r.idlePct, "%8.2f") << "  " << fmt(r.computePct, "%9.2f")
            << "  " << fmt(r.nonComputePct, "%13.2f") << "  "
            << (r.overlapPct < 0 ? std::string("        -") : fmt(r.overlapPct, "%9.2f")) << "\n";
    out << "  GPU kernel types (all ranks):\n";
    for (const auto& k : d.kernelTypes)
        out << "    " << k.type << ": " << fmt(double(k.ns) * 1e-6, "%.3f") << " ms, " << fmt(k.pct, "%.1f") << " %\n";
}

nlohmann::ordered_json launchJson(const trace::LaunchStats& l)
{
    auto ranks = nlohmann::ordered_json::array();
    for (const auto& r : l.perRank)
        ranks.push_back({ { "rank", r.rank }, { "pairs", r.pairs }, { "mean_launch_us", r.meanLaunchNs * 1e-3 },
            { "mean_device_us", r.meanDeviceNs * 1e-3 }, { "mean_launch_delay_us", r.meanDelayNs * 1e-3 },
            { "median_launch_delay_us", r.medianDelayNs * 1e-3 },
            { "max_launch_delay_us", double(r.maxDelayNs) * 1e-3 } });
    auto queues = nlohmann::ordered_json::array();
    for (const auto& q : l.queues)
        queues.push_back({ { "rank", q.rank }, { "stream", q.stream }, { "changes", q.changes },
            { "mean_queue_length", q.meanLength }, { "max_queue_length", q.maxLength } });
    return { { "per_rank", ranks }, { "queues", queues } };
}

// HTA's kernel launch statistics and queue lengths (LaunchStats.h), when the trace keeps its launches.
void launchTable(std::ostream& out, const trace::LaunchStats& l)
{
    if (l.perRank.empty())
        return;
    out << "  kernel launches per rank (launch delay: the device work's start less the launch call's end, HTA):\n"
        << "    rank   pairs  launch µs  device µs  delay mean µs  median µs  max µs\n";
    for (const auto& r : l.perRank)
        out << "    " << fmt(r.rank, "%4.0f") << "  " << fmt(double(r.pairs), "%6.0f") << "  "
            << fmt(r.meanLaunchNs * 1e-3, "%9.2f") << "  " << fmt(r.meanDeviceNs * 1e-3, "%9.2f") << "  "
            << fmt(r.meanDelayNs * 1e-3, "%13.2f") << "  " << fmt(r.medianDelayNs * 1e-3, "%9.2f") << "  "
            << fmt(double(r.maxDelayNs) * 1e-3, "%6.0f") << "\n";
    out << "  launch queue per stream (HTA's queue length: launched, not yet started):\n";
    for (const auto& q : l.queues)
        out << "    rank " << q.rank << " stream " << q.stream << ": mean " << fmt(q.meanLength, "%.2f") << ", max "
            << q.maxLength << "\n";
}

} // namespace

int traceCommand(CliContext& context, const QStringList& argsIn)
{
    if (argsIn.value(0) == QLatin1String("import"))
        return traceImportCommand(context, argsIn.mid(1));
    QStringList args = argsIn;
    const bool json = args.removeAll(QStringLiteral("--json")) > 0;
    const bool allSteps = args.removeAll(QStringLiteral("--all-steps")) > 0;
    if (args.size() != 2 || args[0] != QLatin1String("stats")) {
        context.err
            << "usage: loom trace stats TRACE.json [--json] [--all-steps]\n       loom trace import FILE... [--layout "
               "LAYOUT.json] [--out TRACE.json]\n";
        return ExitUsage;
    }
    if (!QFileInfo(args[1]).isFile()) {
        context.err << "error: \"" << args[1].toStdString() << "\" does not exist or is not a file; check the path\n";
        return ExitFailure;
    }
    std::string other;
    std::vector<trace::TraceEvent> events;
    trace::StatsContext c;
    try {
        events = trace::readChromeTraceFile(args[1].toStdString(), &other, &c.groups);
    } catch (const std::exception& e) {
        context.err << "error: " << args[1].toStdString() << " is " << plainWhat(e) << "\n";
        return ExitInvalid;
    }
    const nlohmann::json meta = nlohmann::json::parse(other, nullptr, false);
    std::optional<plan::Layout> layout;
    if (meta.is_object() && meta.contains("layout")) {
        const auto read = plan::readLayout(meta["layout"].dump(), context.catalog());
        if (read.ok())
            layout = read.layout;
        else // an invalid layout would give wrong figures: say so and use the events alone
            context.err << "warning: " << args[1].toStdString() << ": otherData.layout is not a valid layout ("
                        << (read.diagnostics.errors().empty() ? std::string("unreadable")
                                                              : read.diagnostics.errors().front().message)
                        << "); the statistics use the events alone\n";
        if (layout) {
            auto groups = std::move(c.groups);
            c = plan::statsContext(*read.layout);
            c.groups = std::move(groups);
        }
    }
    if (!layout) {
        for (const auto& e : events)
            c.pp = std::max<std::int64_t>(c.pp, e.stage + 1);
    }
    trace::TraceStats s = trace::computeStats(events, c);
    // Imported traces: step time from the ProfilerStep#N ranges, GPU time per rank as HTA computes it.
    const auto steps = profilerSteps(meta);
    if (const double stepSeconds = trace::profilerStepSeconds(steps); stepSeconds > 0) {
        s.stepSeconds = stepSeconds;
        s.tokensPerSecond = double(c.tokensPerStep) / stepSeconds;
        s.flops = trace::throughput(c.modelFlopsPerStep, c.hardwareFlopsPerStep, stepSeconds, c.devices, c.peakTflops);
    }
    const trace::DeviceStats device = trace::computeDeviceStats(events, steps, allSteps);
    const trace::LaunchStats launches = trace::computeLaunchStats(events);
    // Throughput against the cluster profile's peak, computed in engine/trace from plan::stepFlops (the
    // context carries them when the trace names its layout): MFU from model FLOPs, HFU from hardware FLOPs.
    const trace::Throughput& rate = s.flops;
    const double tflopsPerGpu = rate.tflopsPerDevice, mfu = rate.mfu;
    const double peak = layout ? c.peakTflops : 0;
    std::vector<double> memoryGB; // per rank, from the trace's otherData (loom-train records it)
    if (meta.is_object() && meta.contains("memory_high_water_bytes") && meta["memory_high_water_bytes"].is_array())
        for (const auto& v : meta["memory_high_water_bytes"])
            memoryGB.push_back(v.is_number() ? v.get<double>() / 1e9 : 0.0);
    if (json) {
        auto stages = nlohmann::ordered_json::array();
        for (const auto& st : s.stages)
            stages.push_back({ { "stage", st.stage }, { "bubble_fraction", st.bubbleFraction },
                { "bubble_theory", st.bubbleTheory }, { "busy_s", st.busySeconds } });
        auto coll = nlohmann::ordered_json::array();
        for (const auto& cs : s.collectives)
            coll.push_back(
                { { "kind", cs.kind }, { "algorithm", cs.algorithm }, { "count", cs.count }, { "bytes", cs.bytes },
                    { "seconds", cs.seconds }, { "algbw_gbps", cs.algbwGBs }, { "busbw_gbps", cs.busbwGBs } });
        auto kinds = nlohmann::ordered_json::array();
        for (const auto& k : device.kernelTypes)
            kinds.push_back({ { "type", k.type }, { "seconds", double(k.ns) * 1e-9 }, { "pct", k.pct } });
        context.out << nlohmann::ordered_json(
            { { "ranks", s.ranks }, { "steps", s.steps }, { "step_time_s", s.stepSeconds },
                { "tokens_per_s", s.tokensPerSecond }, { "overlap", s.overlap }, { "tflops_per_gpu", tflopsPerGpu },
                { "mfu", mfu }, { "hardware_tflops_per_gpu", rate.hardwareTflopsPerDevice }, { "hfu", rate.hfu },
                { "memory_high_water_gb", memoryGB }, { "stages", stages }, { "collectives", coll },
                { "per_rank", deviceJson(device) }, { "kernel_types", kinds }, { "launches", launchJson(launches) },
                { "bottleneck_stage", s.bottleneckStage }, { "bottleneck_bubble_fraction", s.bottleneckBubble },
                { "load_imbalance", s.loadImbalance },
                { "window", allSteps ? "all profiler steps" : "profiler steps but the last" } })
                           .dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace)
                    << "\n";
        return ExitOk;
    }
    context.out << events.size() << " events, " << s.ranks << " ranks, " << s.steps << " steps; step "
                << fmt(s.stepSeconds * 1e3, "%.2f") << " ms, " << fmt(s.tokensPerSecond, "%.0f")
                << " tokens/s, overlap " << fmt(100 * s.overlap, "%.1f")
                << " % (compute during communication ÷ communication)\n";
    if (layout && peak > 0) {
        context.out << "  " << fmt(tflopsPerGpu, "%.4g") << " TFLOP/s per device of model FLOPs, MFU "
                    << fmt(100 * mfu, "%.2f") << " % of " << layout->cluster.device.name << "'s " << fmt(peak, "%.4g")
                    << " TFLOP/s\n";
        if (rate.hfu != rate.mfu) // recomputation adds work: the hardware FLOPs beside the model's
            context.out << "  " << fmt(rate.hardwareTflopsPerDevice, "%.4g")
                        << " TFLOP/s per device of hardware FLOPs (with recomputation), HFU "
                        << fmt(100 * rate.hfu, "%.2f") << " %\n";
    }
    if (!memoryGB.empty()) {
        context.out << "  memory high-water per rank (GB):";
        for (double g : memoryGB)
            context.out << " " << fmt(g, "%.3f");
        context.out << "\n";
    }
    // The zero-bubble schedules' closed forms take the ops' costs (Qi et al. 2024; DualPipe's table).
    const char* form = layout && plan::splitsBackward(layout->parallel.schedule) ? "the schedule's form with F, B, W"
                                                                                 : "(p-1)/(v·m+p-1)";
    for (const auto& st : s.stages)
        context.out << "  stage " << st.stage << ": bubble " << fmt(100 * st.bubbleFraction, "%.1f")
                    << " % of the pipeline phase"
                    << " (closed form " << fmt(100 * st.bubbleTheory, "%.1f") << " %: " << form << ")\n";
    if (s.stages.size() > 1) // the bubble the step pays is the busiest stage's; the rest is uneven work
        context.out << "  bottleneck stage " << s.bottleneckStage << " (the busiest): bubble "
                    << fmt(100 * s.bottleneckBubble, "%.1f") << " %; load imbalance "
                    << fmt(100 * s.loadImbalance, "%.1f") << " % (1 − mean busy ÷ the bottleneck's)\n";
    deviceTable(context.out, device);
    launchTable(context.out, launches);
    for (const auto& cs : s.collectives)
        context.out << "  " << cs.kind << " (" << cs.algorithm << "): " << cs.count << " calls, " << cs.bytes
                    << " bytes, " << fmt(cs.seconds * 1e3, "%.2f") << " ms; algbw " << fmt(cs.algbwGBs)
                    << " GB/s, busbw " << fmt(cs.busbwGBs) << " GB/s\n";
    return ExitOk;
}

} // namespace loom::app
