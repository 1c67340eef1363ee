#include "engine/trace/TraceStats.h"

#include <nlohmann/json.hpp>

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
    return k == EventKind::Forward || k == EventKind::Backward || k == EventKind::Recompute;
}

std::optional<EventKind> kindFromName(const std::string& name)
{
    for (int k = 0; k <= static_cast<int>(EventKind::Barrier); ++k)
        if (name == toString(static_cast<EventKind>(k)))
            return static_cast<EventKind>(k);
    return std::nullopt;
}

}  // namespace

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
        steps.erase(steps.begin());  // the first step warms caches and allocators

    // Step windows: the whole step, and its pipeline phase (first compute to last compute over all ranks).
    std::map<std::int32_t, std::pair<std::int64_t, std::int64_t>> whole, pipeline;
    for (const auto& e : events) {
        if (!steps.count(e.step))
            continue;
        auto& w = whole.try_emplace(e.step, e.startNs, e.endNs).first->second;
        w = {std::min(w.first, e.startNs), std::max(w.second, e.endNs)};
        if (isCompute(e.kind)) {
            auto& p = pipeline.try_emplace(e.step, e.startNs, e.endNs).first->second;
            p = {std::min(p.first, e.startNs), std::max(p.second, e.endNs)};
        }
    }
    double stepTotal = 0;
    for (const auto& [step, w] : whole)
        stepTotal += double(w.second - w.first) * 1e-9;
    if (!whole.empty()) {
        s.stepSeconds = stepTotal / double(whole.size());
        s.tokensPerSecond = s.stepSeconds > 0 ? double(c.tokensPerStep) / s.stepSeconds : 0;
    }

    // Bubble per stage: each rank's idle share of the pipeline phase.
    std::map<std::int32_t, std::int32_t> stageOf;
    std::map<std::pair<std::int32_t, std::int32_t>, double> busy;  // (rank, step) -> seconds
    for (const auto& e : events) {
        if (!isCompute(e.kind))
            continue;
        if (e.stage >= 0)
            stageOf[e.rank] = static_cast<std::int32_t>(e.stage % std::max<std::int64_t>(c.pp, 1));
        if (steps.count(e.step))
            busy[{e.rank, e.step}] += double(e.endNs - e.startNs) * 1e-9;
    }
    std::map<std::int32_t, std::pair<double, int>> bubble;  // stage -> (sum, count)
    for (const auto& [key, seconds] : busy) {
        const auto& w = pipeline.at(key.second);
        const double window = double(w.second - w.first) * 1e-9;
        if (window <= 0)
            continue;
        auto& b = bubble[stageOf[key.first]];
        b.first += std::clamp(1.0 - seconds / window, 0.0, 1.0);
        ++b.second;
    }
    const double p = double(c.pp), m = double(c.microBatches), v = double(c.interleaved ? c.vpp : 1);
    const double theory = c.pp > 1 ? (p - 1) / (v * m + p - 1) : 0.0;
    for (const auto& [stage, b] : bubble)
        s.stages.push_back({stage, b.first / b.second, theory});

    // Collectives: bandwidth per kind and algorithm.
    std::map<std::pair<std::string, std::string>, CollectiveStats> coll;
    std::map<std::pair<std::string, std::string>, double> busWeighted;
    for (const auto& e : events) {
        if (e.lane != Lane::Comm || e.endNs <= e.startNs)
            continue;
        const std::pair key{std::string(toString(e.kind)), std::string(toString(e.algorithm)) + (e.codec.empty() ? "" : "+" + e.codec)};
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
    // and TP or PP collectives when the groups are known) runs on the compute thread inside a compute event:
    // the thread waits, so that time is neither computing nor overlapped.
    std::map<std::int32_t, GroupKind> kindOf;
    for (const auto& g : c.groups)
        kindOf[g.id] = g.kind;
    const auto blocking = [&kindOf](const TraceEvent& e) {
        if (e.kind == EventKind::Send || e.kind == EventKind::Recv)
            return true;
        const auto it = kindOf.find(e.group);
        return it != kindOf.end() && (it->second == GroupKind::Tensor || it->second == GroupKind::Pipeline);
    };
    using Intervals = std::vector<std::pair<std::int64_t, std::int64_t>>;
    std::map<std::int32_t, Intervals> computeIntervals, blockingIntervals;
    for (const auto& e : events) {
        if (e.endNs <= e.startNs)
            continue;
        if (e.lane == Lane::Compute && e.kind != EventKind::Wait)
            computeIntervals[e.rank].emplace_back(e.startNs, e.endNs);
        else if (e.lane == Lane::Comm && blocking(e))
            blockingIntervals[e.rank].emplace_back(e.startNs, e.endNs);
    }
    for (auto* m : {&computeIntervals, &blockingIntervals})
        for (auto& [rank, v2] : *m)
            std::sort(v2.begin(), v2.end());
    // Length of [a, b) covered by sorted, non-overlapping intervals (overlapping ones are counted once).
    const auto covered = [](const Intervals& iv, std::int64_t a, std::int64_t b) {
        std::int64_t total = 0, reached = a;
        auto it = std::lower_bound(iv.begin(), iv.end(), std::pair{a, std::int64_t(0)},
            [](const auto& x, const auto& y) { return x.second < y.first; });
        for (; it != iv.end() && it->first < b; ++it) {
            const std::int64_t lo = std::max({it->first, a, reached}), hi = std::min(it->second, b);
            if (hi > lo) {
                total += hi - lo;
                reached = hi;
            }
        }
        return total;
    };
    double commTime = 0, overlapped = 0;
    for (const auto& e : events) {
        if (e.lane != Lane::Comm || e.endNs <= e.startNs)
            continue;
        commTime += double(e.endNs - e.startNs);
        if (blocking(e))
            continue;
        // Compute inside [start, end), less the stretches where the compute thread itself was blocked.
        const double busy = double(covered(computeIntervals[e.rank], e.startNs, e.endNs));
        const double waiting = double(covered(blockingIntervals[e.rank], e.startNs, e.endNs));
        overlapped += std::max(0.0, busy - waiting);
    }
    s.overlap = commTime > 0 ? overlapped / commTime : 0;
    return s;
}

std::vector<TraceEvent> readChromeTrace(const std::string& text, std::string* otherData, std::vector<GroupInfo>* groups)
{
    const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
    if (doc.is_discarded() || !doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array())
        throw std::runtime_error("not a Chrome trace: a JSON object with a \"traceEvents\" list was expected");
    if (otherData)
        *otherData = doc.contains("otherData") ? doc["otherData"].dump() : "{}";
    std::vector<TraceEvent> out;
    for (const auto& j : doc["traceEvents"]) {
        if (!j.is_object() || j.value("ph", "") != "X")
            continue;
        TraceEvent e;
        const std::string name = j.value("name", "");
        const auto kind = kindFromName(name.substr(0, name.find(" mb")));
        if (!kind)
            continue;  // not one of Loom's kinds
        e.kind = *kind;
        e.rank = j.value("pid", 0);
        e.lane = j.value("tid", 0) == 1 ? Lane::Comm : Lane::Compute;
        e.startNs = static_cast<std::int64_t>(std::llround(j.value("ts", 0.0) * 1000.0));
        e.endNs = e.startNs + static_cast<std::int64_t>(std::llround(j.value("dur", 0.0) * 1000.0));
        if (j.contains("args") && j["args"].is_object()) {
            const auto& a = j["args"];
            e.step = a.value("step", -1);
            e.microBatch = a.value("micro_batch", -1);
            e.stage = a.value("stage", -1);
            e.chunk = a.value("chunk", -1);
            e.bytes = a.value("bytes", std::uint64_t(0));
            e.wireBytes = a.value("wire_bytes", std::uint64_t(0));
            e.peer = a.value("peer", -1);
            e.group = a.value("group", -1);
            e.groupSize = a.value("group_size", 0);
            if (groups && e.group >= 0 && a.contains("group_name") && a["group_name"].is_string()
                && std::none_of(groups->begin(), groups->end(), [&](const GroupInfo& g) { return g.id == e.group; })) {
                GroupInfo g;
                g.id = e.group;
                g.name = a["group_name"].get<std::string>();
                g.kind = groupKindFromName(g.name);
                groups->push_back(std::move(g));
            }
            e.codec = a.value("codec", "");
            e.source = a.value("source", "measured") == "simulated" ? EventSource::Simulated : EventSource::Measured;
            const std::string algorithm = a.value("algorithm", "none");
            for (int k = 0; k <= static_cast<int>(Algorithm::SparseAllGather); ++k)
                if (algorithm == toString(static_cast<Algorithm>(k)))
                    e.algorithm = static_cast<Algorithm>(k);
        }
        out.push_back(std::move(e));
    }
    return out;
}

}  // namespace loom::trace
