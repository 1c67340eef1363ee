#include "engine/plan/Calibrate.h"

#include "engine/plan/AllreduceChoice.h"
#include "engine/plan/CalibrateFit.h"
#include "engine/plan/CostModel.h"
#include "engine/plan/RankGrid.h"
#include "engine/plan/Schedule.h"
#include "engine/trace/DeviceStats.h"
#include "engine/trace/TraceStats.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <stdexcept>
#include <tuple>

namespace loom::plan {

CalibrationTrace readCalibrationTrace(const std::string& text)
{
    CalibrationTrace out;
    std::string other;
    // Group kinds from the names loom-train gives its groups; every rank creates them in the same order, so
    // a group id means the same kind of group on every rank.
    std::vector<trace::GroupInfo> groups;
    out.events = trace::readChromeTrace(text, &other, &groups);
    const auto otherData = nlohmann::json::parse(other, nullptr, false);
    if (otherData.is_object() && otherData.contains("layout") && otherData["layout"].is_object())
        out.layoutJson = otherData["layout"].dump();
    for (const auto& g : groups)
        out.groupKinds[g.id] = g.kind;
    return out;
}

namespace {

using fit::Row;

bool isCompute(trace::EventKind k)
{
    return k == trace::EventKind::Forward || k == trace::EventKind::Backward;
}

std::string count(std::size_t n, const char* what)
{
    return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

// The measured events calibration reads and the steps they span: the first of several steps warms caches
// and allocators and is left out.
struct MeasuredSteps {
    std::vector<trace::TraceEvent> events;
    std::int32_t steps = 0;
};

MeasuredSteps measuredSteps(const std::vector<trace::TraceEvent>& all)
{
    std::set<std::int32_t> stepSet;
    for (const auto& e : all)
        if (e.step >= 0)
            stepSet.insert(e.step);
    if (stepSet.size() > 1)
        stepSet.erase(stepSet.begin());
    MeasuredSteps out;
    for (const auto& e : all)
        if (stepSet.count(e.step) && e.source == trace::EventSource::Measured)
            out.events.push_back(e);
    out.steps = static_cast<std::int32_t>(stepSet.size());
    return out;
}

// What a trace's group ids are, Other for an id the trace does not name.
struct GroupKinds {
    const std::map<std::int32_t, trace::GroupKind>& kinds;
    trace::GroupKind operator()(const trace::TraceEvent& e) const
    {
        auto it = kinds.find(e.group);
        return it == kinds.end() ? trace::GroupKind::Other : it->second;
    }
};

// Each rank's tensor-parallel collectives, sorted by start: a forward or backward waits in them.
using Intervals = std::map<std::int32_t, std::vector<std::pair<std::int64_t, std::int64_t>>>;

Intervals tensorParallelByRank(const std::vector<trace::TraceEvent>& events, const GroupKinds& kindOf)
{
    Intervals byRank;
    for (const auto& e : events)
        if (e.lane == trace::Lane::Comm && kindOf(e) == trace::GroupKind::Tensor)
            byRank[e.rank].emplace_back(e.startNs, e.endNs);
    for (auto& [rank, list] : byRank)
        std::sort(list.begin(), list.end());
    return byRank;
}

// Seconds of the intervals that lie inside [startNs, endNs].
double secondsInside(const std::vector<std::pair<std::int64_t, std::int64_t>>& list, const trace::TraceEvent& e)
{
    double inside = 0;
    for (auto it = std::lower_bound(list.begin(), list.end(), std::pair { e.startNs, std::int64_t(0) });
         it != list.end() && it->first < e.endNs; ++it)
        if (it->second <= e.endNs)
            inside += double(it->second - it->first) * 1e-9;
    return inside;
}

// The compute rows of the fit: forward and backward without the TP all-reduces they wait for inside, and
// the optimizer; one row per (rank, kind, virtual stage), its mean duration (the step is their sum, so the
// fit keeps the sum) weighted by count / mean.
struct ComputeSamples {
    std::vector<Row> rows;
    std::size_t passes = 0, optimizerSteps = 0;
};

ComputeSamples computeSamples(
    const Layout& layout, const std::vector<trace::TraceEvent>& events, const GroupKinds& kindOf)
{
    const RankGrid grid = RankGrid::forLayout(layout);
    const std::int64_t chunks = Schedule::forLayout(layout).chunks();
    const std::vector<StageWork> work = stageWork(layout, chunks);
    const std::int64_t virtualStages = layout.parallel.pp * chunks;
    Intervals tpByRank = tensorParallelByRank(events, kindOf);
    struct Samples {
        ComputeWork work;
        std::vector<double> seconds;
    };
    std::map<std::tuple<std::int32_t, int, std::int32_t>, Samples> classes;
    ComputeSamples out;
    for (const auto& e : events) {
        const double seconds = double(e.durationNs()) * 1e-9;
        if (isCompute(e.kind)) {
            if (e.stage < 0 || e.stage >= virtualStages)
                continue;
            const double inside = secondsInside(tpByRank[e.rank], e);
            const StageWork& w = work[static_cast<std::size_t>(e.stage)];
            if (seconds - inside > 0) {
                auto& c = classes[{ e.rank, static_cast<int>(e.kind), e.stage }];
                c.work = e.kind == trace::EventKind::Forward ? w.forward : w.backward;
                c.seconds.push_back(seconds - inside);
                ++out.passes;
            }
        } else if (e.kind == trace::EventKind::Optimizer && e.rank >= 0 && e.rank < grid.size() && seconds > 0) {
            auto& c = classes[{ e.rank, static_cast<int>(e.kind), -1 }];
            c.work = { 0, optimizerBytes(layout, grid.coordOf(e.rank).pp) };
            c.seconds.push_back(seconds);
            ++out.optimizerSteps;
        }
    }
    for (auto& [key, c] : classes) {
        const double mean = std::accumulate(c.seconds.begin(), c.seconds.end(), 0.0) / double(c.seconds.size());
        out.rows.push_back({ c.work.flops, c.work.bytes, mean, double(c.seconds.size()) / mean });
    }
    return out;
}

// Why a trace without forward or backward events of the layout cannot calibrate it.
std::invalid_argument noComputeEvents(const Layout& layout, const std::vector<trace::TraceEvent>& all)
{
    const bool simulated = std::any_of(
        all.begin(), all.end(), [](const trace::TraceEvent& e) { return e.source == trace::EventSource::Simulated; });
    return std::invalid_argument(simulated
            ? "the trace holds simulated events (loom simulate), which are the model's own; calibrate on a run "
              "measured with loom-train --trace-out"
            : "the trace has no forward or backward events of layout \"" + layout.name
                + "\" after its first step; record a run of two or more steps with loom-train --trace-out");
}

// Fits device.gemm_efficiency.max and device.memory_bandwidth_gbs to the compute rows into `after`, and
// records the four device parameters and the compute residual in `out`.
void fitDevice(const Layout& layout, const ComputeSamples& samples, ClusterSpec& after, Calibration& out)
{
    const DeviceSpec& dev = layout.cluster.device;
    const std::vector<Row>& compute = samples.rows;
    const double peak = dev.peakTflops(layout.precision) * 1e12;
    double xFlops = 1.0 / (peak * dev.gemmMax), xBytes = 1.0 / (dev.memoryBandwidthGBs * 1e9);
    const double rmsComputeBefore = fit::residualRms(compute, xFlops, xBytes);
    const fit::Moved computeFit = fit::fitTwo(compute, xFlops, xBytes);
    const bool flopsMoved = computeFit.first;
    bool bytesMoved = computeFit.second;
    const std::string negative = "kept: fitting it as well gives a negative value";
    // No device runs its GEMMs above its peak: a fit that says so has put memory-bound time on the FLOPs.
    // Hold max at 1 and fit the bandwidth alone.
    const bool capped = flopsMoved && xFlops * peak < 1.0;
    if (capped) {
        xFlops = 1.0 / peak;
        bytesMoved = fit::fitSecond(compute, xFlops, xBytes) || bytesMoved;
    }
    out.residuals.push_back({ "compute (forward, backward, optimizer; means per rank and stage)",
        static_cast<std::int64_t>(samples.passes + samples.optimizerSteps), rmsComputeBefore,
        fit::residualRms(compute, xFlops, xBytes) });
    const std::string from
        = count(samples.passes, "forward/backward event") + ", " + count(samples.optimizerSteps, "optimizer step");
    const double newMax = !flopsMoved ? dev.gemmMax : capped ? 1.0 : fit::rounded(1.0 / (xFlops * peak));
    out.parameters.push_back({ "device.gemm_efficiency.max", dev.gemmMax, newMax, flopsMoved,
        capped                        ? "from " + from + "; held at 1 (the peak): the fit put the device above it"
            : flopsMoved              ? "from " + from
            : computeFit.proportional ? "kept: the events do not separate it from the memory-bound part"
                                      : negative });
    after.device.gemmMax = newMax;
    const double newBandwidth = bytesMoved ? fit::rounded(1.0 / (xBytes * 1e9)) : dev.memoryBandwidthGBs;
    out.parameters.push_back({ "device.memory_bandwidth_gbs", dev.memoryBandwidthGBs, newBandwidth, bytesMoved,
        bytesMoved                    ? "from " + from
            : computeFit.proportional ? "kept: the events do not separate it from the GEMM part"
                                      : negative });
    after.device.memoryBandwidthGBs = newBandwidth;
    out.parameters.push_back({ "device.gemm_efficiency.half_width", dev.gemmHalfWidth, dev.gemmHalfWidth, false,
        "kept: one layout has one GEMM width (h/tp)" });
    out.parameters.push_back({ "device.gemm_efficiency.half_rows", dev.gemmHalfRows, dev.gemmHalfRows, false,
        "kept: one layout has one row count (micro-batch x sequence)" });
}

// One all-reduce instance (the k-th of a group in a step) as its members saw it. It lasts, on every member,
// from its own arrival until the last member's: the shortest of the members' durations, the last arrival's,
// is the transfer itself; the others add waiting for a peer that was still computing.
struct Instance {
    trace::GroupKind kind = trace::GroupKind::Other;
    std::int32_t groupSize = 0;
    std::uint64_t bytes = 0;
    double seconds = 0;
    int members = 0;
};
using Instances = std::map<std::tuple<int, std::int64_t, std::int32_t, int>, Instance>; // (kind, first, step, k)

// The uncompressed link all-reduces (library, ring, chunked ring) of groups the grid can place.
Instances linkAllreduces(const std::vector<trace::TraceEvent>& events, const RankGrid& grid, const GroupKinds& kindOf)
{
    std::vector<const trace::TraceEvent*> collectives;
    for (const auto& e : events)
        if (e.kind == trace::EventKind::AllReduce && e.groupSize >= 2 && e.codec.empty() && e.endNs > e.startNs
            && e.rank >= 0 && e.rank < grid.size()
            && (e.algorithm == trace::Algorithm::Library || e.algorithm == trace::Algorithm::Ring
                || e.algorithm == trace::Algorithm::ChunkedRing))
            collectives.push_back(&e);
    std::sort(collectives.begin(), collectives.end(),
        [](const auto* a, const auto* b) { return std::tie(a->rank, a->startNs) < std::tie(b->rank, b->startNs); });
    Instances instances;
    std::map<std::tuple<std::int32_t, int, std::int32_t>, int> seen; // (rank, kind, step) -> count so far
    for (const auto* e : collectives) {
        const trace::GroupKind kind = kindOf(*e);
        std::int64_t first = 0; // the group's first member names the group
        switch (kind) {
        case trace::GroupKind::Tensor:
        case trace::GroupKind::Pipeline:
        case trace::GroupKind::Data:
            first = grid.groupOf(kind, e->rank).front();
            break;
        case trace::GroupKind::World:
            first = 0;
            break;
        default:
            continue; // a group we cannot place
        }
        const int k = seen[{ e->rank, static_cast<int>(kind), e->step }]++;
        Instance& in = instances[{ static_cast<int>(kind), first, e->step, k }];
        const double seconds = double(e->durationNs()) * 1e-9;
        in.seconds = in.members == 0 ? seconds : std::min(in.seconds, seconds);
        in.kind = kind;
        in.groupSize = e->groupSize;
        in.bytes = e->bytes;
        ++in.members;
    }
    return instances;
}

// The link rows of one link class: 2(n-1)·α + 2(n-1)/n · bytes/β against the mean of the complete
// instances of each (group size, bytes), weighted by count / mean; `instancesUsed` counts them.
std::vector<Row> linkRows(
    const Instances& instances, const RankGrid& grid, bool hasInterNode, bool inter, std::size_t& instancesUsed)
{
    std::map<std::pair<std::int32_t, std::uint64_t>, std::vector<double>> bySize;
    for (const auto& [key, in] : instances) {
        if (in.members != in.groupSize)
            continue; // a member's event is missing: no last arrival to read
        const std::int64_t spanned
            = in.kind == trace::GroupKind::World ? grid.nodeOf(grid.size() - 1) + 1 : grid.maxNodesSpanned(in.kind);
        if ((spanned > 1 && hasInterNode) != inter)
            continue;
        bySize[{ in.groupSize, in.bytes }].push_back(in.seconds);
    }
    std::vector<Row> rows;
    instancesUsed = 0;
    for (auto& [key, durations] : bySize) {
        const double mean = std::accumulate(durations.begin(), durations.end(), 0.0) / double(durations.size());
        const double members = double(key.first);
        rows.push_back({ 2.0 * (members - 1.0), 2.0 * (members - 1.0) / members * double(key.second), mean,
            double(durations.size()) / mean });
        instancesUsed += durations.size();
    }
    return rows;
}

// Fits the latency and bandwidth of one link class (intra- or inter-node) into `after`, and records both
// parameters and the link's residual in `out`.
void fitLink(const Instances& instances, const RankGrid& grid, const ClusterSpec& before, bool inter,
    ClusterSpec& after, Calibration& out)
{
    LinkSpec& link = inter ? *after.interNode : after.intraNode;
    const LinkSpec& old = inter ? *before.interNode : before.intraNode;
    const std::string prefix = inter ? "inter_node." : "intra_node.";
    std::size_t n = 0;
    const std::vector<Row> rows = linkRows(instances, grid, before.interNode.has_value(), inter, n);
    double alpha = old.latencyUs * 1e-6, invBeta = 1.0 / (old.bandwidthGBs * 1e9);
    if (rows.empty()) {
        const std::string why = "kept: the trace has no all-reduce over " + std::string(toString(old.kind)) + " links";
        out.parameters.push_back({ prefix + "latency_us", old.latencyUs, old.latencyUs, false, why });
        out.parameters.push_back({ prefix + "bandwidth_gbs", old.bandwidthGBs, old.bandwidthGBs, false, why });
        return;
    }
    const double rmsBefore = fit::residualRms(rows, alpha, invBeta);
    const fit::Moved linkFit = fit::fitTwo(rows, alpha, invBeta);
    const bool alphaMoved = linkFit.first, betaMoved = linkFit.second;
    const std::string fromLinks
        = "from " + count(n, "all-reduce") + " (the last member's time) in " + count(rows.size(), "size");
    const std::string keptWhy = rows.size() == 1 ? "kept: all-reduces of one size only"
        : linkFit.proportional                   ? "kept: the sizes do not separate latency from bandwidth"
                                                 : "kept: fitting it as well gives a negative value";
    if (alphaMoved)
        link.latencyUs = fit::rounded(alpha * 1e6);
    if (betaMoved)
        link.bandwidthGBs = fit::rounded(1.0 / (invBeta * 1e9));
    out.parameters.push_back(
        { prefix + "latency_us", old.latencyUs, link.latencyUs, alphaMoved, alphaMoved ? fromLinks : keptWhy });
    out.parameters.push_back(
        { prefix + "bandwidth_gbs", old.bandwidthGBs, link.bandwidthGBs, betaMoved, betaMoved ? fromLinks : keptWhy });
    out.residuals.push_back({ std::string(toString(old.kind)) + " all-reduce (means per size)",
        static_cast<std::int64_t>(n), rmsBefore, fit::residualRms(rows, alpha, invBeta) });
}

// The shared-memory all-reduces (`shm`, what "auto" runs from 16 MiB on one node): they move bytes through
// memory, not over a link, so they fit no link parameter; each instance (the k-th of a group in a step, its
// members' shortest duration: the last arrival's) is compared with allreduceSeconds, the cost model's price,
// under the cluster before and after the fit. Empty when the events hold none.
std::optional<FitResidual> sharedMemoryResidual(const Layout& layout, const ClusterSpec& before,
    const ClusterSpec& after, const std::vector<trace::TraceEvent>& events)
{
    struct Instance {
        std::int32_t groupSize = 0;
        std::uint64_t bytes = 0;
        double seconds = 0;
        int members = 0;
    };
    std::vector<const trace::TraceEvent*> shm;
    for (const auto& e : events)
        if (e.kind == trace::EventKind::AllReduce && e.algorithm == trace::Algorithm::SharedMemory && e.groupSize >= 2
            && e.codec.empty() && e.endNs > e.startNs && e.bytes > 0)
            shm.push_back(&e);
    std::sort(shm.begin(), shm.end(),
        [](const auto* a, const auto* b) { return std::tie(a->rank, a->startNs) < std::tie(b->rank, b->startNs); });
    std::map<std::tuple<std::int32_t, std::int32_t, std::int32_t>, int> seen; // (rank, group, step) -> count
    std::map<std::tuple<std::int32_t, std::int32_t, int>, Instance> instances; // (group, step, k)
    for (const auto* e : shm) {
        const int k = seen[{ e->rank, e->group, e->step }]++;
        Instance& in = instances[{ e->group, e->step, k }];
        const double seconds = double(e->durationNs()) * 1e-9;
        in.seconds = in.members == 0 ? seconds : std::min(in.seconds, seconds);
        in.groupSize = e->groupSize;
        in.bytes = e->bytes;
        ++in.members;
    }
    Layout was = layout, is = layout;
    was.cluster = before;
    is.cluster = after;
    double sumBefore = 0, sumAfter = 0;
    std::int64_t n = 0;
    for (const auto& [key, in] : instances) {
        if (in.members != in.groupSize)
            continue;
        auto rel = [&](const Layout& l) {
            const double p = allreduceSeconds(
                l, trace::Algorithm::SharedMemory, double(in.bytes), in.groupSize, 1, l.cluster.intraNode);
            return (p - in.seconds) / in.seconds;
        };
        sumBefore += rel(was) * rel(was);
        sumAfter += rel(is) * rel(is);
        ++n;
    }
    if (n == 0)
        return std::nullopt;
    return FitResidual { "shared-memory all-reduce (shm, at memory bandwidth), per instance", n,
        std::sqrt(sumBefore / double(n)), std::sqrt(sumAfter / double(n)) };
}

} // namespace

Calibration calibrate(const Layout& layoutIn, const std::vector<trace::TraceEvent>& traced,
    const std::map<std::int32_t, trace::GroupKind>& groupKinds)
{
    // An imported GPU trace times each pass by its kernels: one event per pass, as long as they kept the GPU busy.
    const std::vector<trace::TraceEvent> all = trace::foldDevicePasses(traced);
    Layout layout = layoutIn;
    const ClusterSpec before = layout.cluster;
    const RankGrid grid = RankGrid::forLayout(layout);
    const GroupKinds kindOf { groupKinds };
    const MeasuredSteps measured = measuredSteps(all);
    const std::vector<trace::TraceEvent>& events = measured.events;

    Calibration out;
    out.steps = measured.steps;
    const ComputeSamples compute = computeSamples(layout, events, kindOf);
    if (compute.passes == 0)
        throw noComputeEvents(layout, all);
    ClusterSpec after = before;
    fitDevice(layout, compute, after, out);

    const Instances instances = linkAllreduces(events, grid, kindOf);
    for (const bool inter : { false, true })
        if (!inter || before.interNode)
            fitLink(instances, grid, before, inter, after, out);
    if (auto shm = sharedMemoryResidual(layout, before, after, events))
        out.residuals.push_back(*shm);

    out.measuredStepSeconds = trace::computeStats(all, statsContext(layout)).stepSeconds;
    out.predictedBefore = predict(layout).stepTime;
    layout.cluster = after;
    out.predictedAfter = predict(layout).stepTime;
    out.cluster = after;
    return out;
}

} // namespace loom::plan
