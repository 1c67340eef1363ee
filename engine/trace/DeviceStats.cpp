#include "engine/trace/DeviceStats.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace loom::trace {

namespace {

using Intervals = std::vector<std::pair<std::int64_t, std::int64_t>>;

// HTA's merge_kernel_intervals: the union as sorted disjoint intervals.
Intervals merged(Intervals iv)
{
    std::sort(iv.begin(), iv.end());
    Intervals out;
    for (const auto& i : iv) {
        if (!out.empty() && i.first <= out.back().second)
            out.back().second = std::max(out.back().second, i.second);
        else
            out.push_back(i);
    }
    return out;
}

std::int64_t length(const Intervals& iv)
{
    std::int64_t n = 0;
    for (const auto& i : iv)
        n += i.second - i.first;
    return n;
}

enum Type { Computation = 1, Communication = 2, Memory = 4, Other = 8 };

Type typeOf(const TraceEvent& e)
{
    if (e.lane == Lane::Comm)
        return Communication;
    if (e.kind == EventKind::Memcpy || e.kind == EventKind::Memset)
        return Memory;
    if (e.kind == EventKind::Wait)
        return Other;
    return Computation;
}

// Time per combination of types running (bit mask), by a sweep over the merged intervals of each.
std::map<int, std::int64_t> combinations(const std::map<int, Intervals>& byType)
{
    std::vector<std::pair<std::int64_t, int>> edges; // (time, +bit or -bit)
    for (const auto& [bit, iv] : byType)
        for (const auto& i : iv) {
            edges.emplace_back(i.first, bit);
            edges.emplace_back(i.second, -bit);
        }
    std::sort(edges.begin(), edges.end());
    std::map<int, std::int64_t> out;
    int running = 0;
    for (std::size_t k = 0; k < edges.size(); ++k) {
        running += edges[k].second;
        if (running > 0 && k + 1 < edges.size())
            out[running] += edges[k + 1].first - edges[k].first;
    }
    return out;
}

std::string label(int mask)
{
    std::string s;
    for (auto [bit, name] :
        { std::pair { Computation, "COMPUTATION" }, { Communication, "COMMUNICATION" }, { Memory, "MEMORY" } })
        if (mask & bit)
            s += (s.empty() ? "" : " overlapping ") + std::string(name);
    return s;
}

} // namespace

DeviceStats computeDeviceStats(
    const std::vector<TraceEvent>& events, const std::vector<ProfilerStepRange>& steps, bool allSteps)
{
    DeviceStats out;
    out.allSteps = allSteps;
    std::map<std::int32_t, std::pair<std::int64_t, std::int32_t>> last; // rank -> (start, step) of its last step
    std::map<std::int32_t, std::set<std::int32_t>> stepsOf;
    for (const auto& s : steps) {
        stepsOf[s.rank].insert(s.step);
        auto [it, fresh] = last.try_emplace(s.rank, s.startNs, s.step);
        if (!fresh && s.startNs > it->second.first)
            it->second = { s.startNs, s.step };
    }
    std::map<std::int32_t, std::map<int, Intervals>> work; // rank -> type -> intervals
    std::map<std::int32_t, std::set<std::int32_t>> windowSteps;
    for (const auto& e : events) {
        if (e.stream < 0 || e.endNs < e.startNs)
            continue;
        const auto& mine = stepsOf[e.rank];
        if (mine.size() >= 2) { // HTA filters kernels by their launch only with two steps or more
            if (e.step < 0 || (!allSteps && e.step == last[e.rank].second))
                continue;
            windowSteps[e.rank].insert(e.step);
        }
        work[e.rank][typeOf(e)].emplace_back(e.startNs, e.endNs);
    }
    std::map<int, std::int64_t> typeTotals;
    for (auto& [rank, byType] : work) {
        Intervals all;
        for (auto& [type, iv] : byType) {
            iv = merged(std::move(iv));
            all.insert(all.end(), iv.begin(), iv.end());
        }
        all = merged(std::move(all));
        RankDeviceStats r;
        r.rank = rank;
        r.steps.assign(windowSteps[rank].begin(), windowSteps[rank].end());
        r.kernelNs = all.empty() ? 0 : all.back().second - all.front().first;
        r.idleNs = r.kernelNs - length(all);
        r.computeNs = byType.count(Computation) ? length(byType[Computation]) : 0;
        r.nonComputeNs = r.kernelNs - r.computeNs - r.idleNs;
        r.commNs = byType.count(Communication) ? length(byType[Communication]) : 0;
        const double k = r.kernelNs > 0 ? double(r.kernelNs) : 1.0;
        r.idlePct = 100.0 * double(r.idleNs) / k;
        r.computePct = 100.0 * double(r.computeNs) / k;
        r.nonComputePct = 100.0 * double(r.nonComputeNs) / k;
        std::map<int, Intervals> analysed; // HTA's breakdown looks at computation, communication and memory
        for (int t : { Computation, Communication, Memory })
            if (byType.count(t))
                analysed[t] = byType[t];
        const auto combos = combinations(analysed);
        for (const auto& [mask, ns] : combos) {
            typeTotals[mask] += ns;
            if ((mask & Computation) && (mask & Communication))
                r.overlapNs += ns;
        }
        if (r.commNs > 0)
            r.overlapPct = 100.0 * double(r.overlapNs) / double(r.commNs);
        out.perRank.push_back(std::move(r));
    }
    std::int64_t total = 0;
    for (const auto& [mask, ns] : typeTotals)
        total += ns;
    for (const auto& [mask, ns] : typeTotals)
        out.kernelTypes.push_back({ label(mask), ns, total > 0 ? 100.0 * double(ns) / double(total) : 0 });
    std::stable_sort(out.kernelTypes.begin(), out.kernelTypes.end(),
        [](const KernelTypeTime& a, const KernelTypeTime& b) { return a.ns > b.ns; });
    return out;
}

std::vector<TraceEvent> foldDevicePasses(const std::vector<TraceEvent>& events)
{
    std::vector<TraceEvent> out;
    using Key = std::tuple<std::int32_t, int, std::int32_t, std::int32_t, std::int32_t, std::int32_t>;
    std::map<Key, std::pair<TraceEvent, Intervals>> passes;
    for (const auto& e : events) {
        if (e.stream < 0 || (e.kind != EventKind::Forward && e.kind != EventKind::Backward)) {
            out.push_back(e);
            continue;
        }
        const Key key { e.rank, int(e.kind), e.step, e.microBatch, e.stage, e.chunk };
        auto [it, fresh] = passes.try_emplace(key, e, Intervals {});
        it->second.first.startNs = std::min(it->second.first.startNs, e.startNs);
        it->second.second.emplace_back(e.startNs, e.endNs);
    }
    for (auto& [key, pass] : passes) {
        TraceEvent e = pass.first;
        e.stream = -1;
        e.endNs = e.startNs + length(merged(std::move(pass.second)));
        out.push_back(e);
    }
    return out;
}

double profilerStepSeconds(const std::vector<ProfilerStepRange>& steps)
{
    std::set<std::int32_t> numbers;
    for (const auto& s : steps)
        numbers.insert(s.step);
    if (numbers.size() > 1)
        numbers.erase(numbers.begin());
    double sum = 0;
    int n = 0;
    for (const auto& s : steps)
        if (numbers.count(s.step)) {
            sum += double(s.endNs - s.startNs) * 1e-9;
            ++n;
        }
    return n > 0 ? sum / n : 0;
}

} // namespace loom::trace
