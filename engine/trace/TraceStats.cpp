#include "engine/trace/TraceStats.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>

namespace loom::trace {

namespace {

bool isCompute(EventKind k)
{
    return isPass(k);
}

// A union of intervals: add them in any order, finish(), then ask how much of [a, b) they cover
// (overlapping intervals count once).
class Coverage {
public:
    void add(std::int64_t a, std::int64_t b) { m_iv.emplace_back(a, b); }
    void finish()
    {
        std::sort(m_iv.begin(), m_iv.end());
        std::vector<std::pair<std::int64_t, std::int64_t>> merged;
        for (const auto& iv : m_iv) {
            if (!merged.empty() && iv.first <= merged.back().second)
                merged.back().second = std::max(merged.back().second, iv.second);
            else
                merged.push_back(iv);
        }
        m_iv = std::move(merged);
        m_before.assign(m_iv.size() + 1, 0);
        for (std::size_t i = 0; i < m_iv.size(); ++i)
            m_before[i + 1] = m_before[i] + (m_iv[i].second - m_iv[i].first);
    }
    std::int64_t within(std::int64_t a, std::int64_t b) const { return b > a ? upTo(b) - upTo(a) : 0; }

private:
    // Covered length before t.
    std::int64_t upTo(std::int64_t t) const
    {
        const auto it = std::upper_bound(
            m_iv.begin(), m_iv.end(), t, [](std::int64_t x, const auto& iv) { return x < iv.first; });
        if (it == m_iv.begin())
            return 0;
        const auto k = static_cast<std::size_t>(it - m_iv.begin()) - 1;
        return m_before[k] + (std::min(m_iv[k].second, t) - m_iv[k].first);
    }
    std::vector<std::pair<std::int64_t, std::int64_t>> m_iv;
    std::vector<std::int64_t> m_before;
};

// The busiest stage, its idle share and the load imbalance (TraceStats).
void findBottleneck(TraceStats& s)
{
    double mean = 0;
    const StageStats* busiest = nullptr;
    for (const auto& st : s.stages) {
        mean += st.busySeconds / double(s.stages.size());
        if (!busiest || st.busySeconds > busiest->busySeconds)
            busiest = &st;
    }
    if (!busiest)
        return;
    s.bottleneckStage = busiest->stage;
    s.bottleneckBubble = busiest->bubbleFraction;
    s.loadImbalance = busiest->busySeconds > 0 ? std::max(0.0, 1.0 - mean / busiest->busySeconds) : 0.0;
}
} // namespace

TraceStats computeStats(const std::vector<TraceEvent>& events, const StatsContext& c)
{
    TraceStats s;
    std::set<std::int32_t> ranks, steps;
    for (const auto& e : events) {
        ranks.insert(e.rank);
        if (e.step >= 0)
            steps.insert(e.step);
    }
    s.ranks = static_cast<std::int32_t>(ranks.size());
    s.steps = static_cast<std::int32_t>(steps.size());
    if (steps.size() > 1)
        steps.erase(steps.begin()); // the first step warms caches and allocators

    // Step windows: the whole step, and its pipeline phase (first compute to last compute over all ranks).
    std::map<std::int32_t, std::pair<std::int64_t, std::int64_t>> whole, pipeline;
    for (const auto& e : events) {
        if (!steps.count(e.step) || e.kind == EventKind::Launch) // a launch is host time before the work
            continue;
        auto& w = whole.try_emplace(e.step, e.startNs, e.endNs).first->second;
        w = { std::min(w.first, e.startNs), std::max(w.second, e.endNs) };
        if (isCompute(e.kind)) {
            auto& p = pipeline.try_emplace(e.step, e.startNs, e.endNs).first->second;
            p = { std::min(p.first, e.startNs), std::max(p.second, e.endNs) };
        }
    }
    double stepTotal = 0;
    for (const auto& [step, w] : whole)
        stepTotal += double(w.second - w.first) * 1e-9;
    if (!whole.empty()) {
        s.stepSeconds = stepTotal / double(whole.size());
        s.tokensPerSecond = s.stepSeconds > 0 ? double(c.tokensPerStep) / s.stepSeconds : 0;
        s.flops = throughput(c.modelFlopsPerStep, c.hardwareFlopsPerStep, s.stepSeconds, c.devices, c.peakTflops);
    }

    // Bubble per stage: each rank's idle share of the pipeline phase. A rank's stage is its pipeline rank, its
    // lowest virtual stage: with several chunks a rank also runs later ones (chunk·pp + r interleaved, 2p−1−r
    // on the V's way back, whose remainder mod pp is another rank's).
    std::map<std::int32_t, std::int32_t> stageOf;
    std::map<std::pair<std::int32_t, std::int32_t>, double> busy; // (rank, step) -> seconds
    for (const auto& e : events) {
        if (!isCompute(e.kind))
            continue;
        if (e.stage >= 0) {
            auto& lowest = stageOf.try_emplace(e.rank, e.stage).first->second;
            lowest = std::min(lowest, e.stage);
        }
        if (steps.count(e.step))
            busy[{ e.rank, e.step }] += double(e.endNs - e.startNs) * 1e-9;
    }
    struct Sums {
        double idle = 0, busy = 0;
        int count = 0;
    };
    std::map<std::int32_t, Sums> bubble; // stage -> sums over its (rank, step)s
    for (const auto& [key, seconds] : busy) {
        const auto& w = pipeline.at(key.second);
        const double window = double(w.second - w.first) * 1e-9;
        if (window <= 0)
            continue;
        auto& b = bubble[static_cast<std::int32_t>(stageOf[key.first] % std::max<std::int64_t>(c.pp, 1))];
        b.idle += std::clamp(1.0 - seconds / window, 0.0, 1.0);
        b.busy += seconds;
        ++b.count;
    }
    const double p = double(c.pp), m = double(c.microBatches), v = double(c.interleaved ? c.vpp : 1);
    const double theory = c.bubbleTheory >= 0 ? c.bubbleTheory : c.pp > 1 ? (p - 1) / (v * m + p - 1) : 0.0;
    for (const auto& [stage, b] : bubble)
        s.stages.push_back({ stage, b.idle / b.count, theory, b.busy / b.count });
    findBottleneck(s);

    // Collectives: bandwidth per kind and algorithm.
    std::map<std::pair<std::string, std::string>, CollectiveStats> coll;
    std::map<std::pair<std::string, std::string>, double> busWeighted;
    for (const auto& e : events) {
        if (e.lane != Lane::Comm || e.endNs <= e.startNs)
            continue;
        const std::pair key { std::string(toString(e.kind)),
            std::string(toString(e.algorithm)) + (e.codec.empty() ? "" : "+" + e.codec) };
        auto& cs = coll[key];
        cs.kind = key.first;
        cs.algorithm = key.second;
        ++cs.count;
        cs.bytes += e.bytes;
        const double secs = double(e.endNs - e.startNs) * 1e-9;
        cs.seconds += secs;
        busWeighted[key] += double(e.bytes) * busBandwidthFactor(e.kind, e.groupSize);
    }
    for (auto& [key, cs] : coll) {
        cs.algbwGBs = cs.seconds > 0 ? double(cs.bytes) / cs.seconds / 1e9 : 0;
        cs.busbwGBs = cs.seconds > 0 ? busWeighted[key] / cs.seconds / 1e9 : 0;
        s.collectives.push_back(cs);
    }

    // Overlap: compute time inside communication intervals, per rank. Blocking communication (send / recv,
    // and TP, PP or EP collectives when the groups are known) runs on the compute thread inside a compute event:
    // the thread waits, so that time is neither computing nor overlapped.
    std::map<std::int32_t, GroupKind> kindOf;
    for (const auto& g : c.groups)
        kindOf[g.id] = g.kind;
    const auto blocking = [&kindOf](const TraceEvent& e) {
        if (e.kind == EventKind::Send || e.kind == EventKind::Recv)
            return true;
        const auto it = kindOf.find(e.group);
        return it != kindOf.end()
            && (it->second == GroupKind::Tensor || it->second == GroupKind::Pipeline
                || it->second == GroupKind::Expert); // MoE dispatch and combine: the trainer waits for them
    };
    // Per rank, the union of its compute intervals and of its blocking ones, each as sorted disjoint
    // intervals with a running total, so the covered length of any window is two binary searches: the
    // whole computation is a sort and a sweep, O(n log n) in the events.
    std::map<std::int32_t, Coverage> computeCover, blockingCover;
    for (const auto& e : events) {
        if (e.endNs <= e.startNs)
            continue;
        if (e.lane == Lane::Compute && e.kind != EventKind::Wait && e.kind != EventKind::Launch)
            computeCover[e.rank].add(e.startNs, e.endNs);
        else if (e.lane == Lane::Comm && blocking(e))
            blockingCover[e.rank].add(e.startNs, e.endNs);
    }
    for (auto* m : { &computeCover, &blockingCover })
        for (auto& [rank, cover] : *m)
            cover.finish();
    const Coverage none;
    const auto coverOf = [&none](const std::map<std::int32_t, Coverage>& m, std::int32_t rank) -> const Coverage& {
        const auto it = m.find(rank);
        return it == m.end() ? none : it->second;
    };
    double commTime = 0, overlapped = 0;
    for (const auto& e : events) {
        if (e.lane != Lane::Comm || e.endNs <= e.startNs)
            continue;
        commTime += double(e.endNs - e.startNs);
        if (blocking(e))
            continue;
        // Compute inside [start, end), less the stretches where the compute thread itself was blocked.
        const double busy = double(coverOf(computeCover, e.rank).within(e.startNs, e.endNs));
        const double waiting = double(coverOf(blockingCover, e.rank).within(e.startNs, e.endNs));
        overlapped += std::max(0.0, busy - waiting);
    }
    s.overlap = commTime > 0 ? overlapped / commTime : 0;
    return s;
}

Throughput throughput(
    double modelFlopsPerStep, double hardwareFlopsPerStep, double stepSeconds, std::int64_t devices, double peakTflops)
{
    Throughput t;
    if (stepSeconds <= 0 || devices <= 0)
        return t;
    t.tflopsPerDevice = modelFlopsPerStep / (stepSeconds * double(devices)) / 1e12;
    t.hardwareTflopsPerDevice = hardwareFlopsPerStep / (stepSeconds * double(devices)) / 1e12;
    if (peakTflops > 0) {
        t.mfu = t.tflopsPerDevice / peakTflops;
        t.hfu = t.hardwareTflopsPerDevice / peakTflops;
    }
    return t;
}

} // namespace loom::trace
