#include "engine/trace/PredictedMeasured.h"

#include <algorithm>
#include <array>
#include <map>
#include <set>

namespace loom::trace {

namespace {

constexpr std::array<const char*, 11> kKinds
    = { "forward", "backward", "recompute", "optimizer", "TP", "PP", "DP", "CP", "all-to-all", "bubble", "step" };
constexpr std::size_t kBubble = 9, kStep = 10;

// The row of kKinds an event counts in, or -1 (waits, data, checkpoints count in no row).
int rowOf(const TraceEvent& e, GroupKind group)
{
    switch (e.kind) {
    case EventKind::Forward:
        return 0;
    case EventKind::Backward:
    case EventKind::Weight: // a split backward's W counts with its B
        return 1;
    case EventKind::Recompute:
        return 2;
    case EventKind::Optimizer:
        return 3;
    case EventKind::Send:
    case EventKind::Recv:
        return 5;
    case EventKind::AllToAll:
        return 8;
    default:
        break;
    }
    if (e.lane != Lane::Comm)
        return -1;
    switch (group) {
    case GroupKind::Tensor:
        return 4;
    case GroupKind::Pipeline:
        return 5;
    case GroupKind::Context:
        return 7;
    case GroupKind::Expert:
        return 8;
    default:
        return 6; // data-parallel, and collectives of an unknown group, as the timeline colours them
    }
}

struct Side {
    std::array<double, kKinds.size()> perRank {};
    std::int64_t start = 0, end = 0;
};

Side measure(const std::vector<TraceEvent>& events, const std::vector<GroupInfo>& groups, bool all, std::int32_t step)
{
    std::map<std::int32_t, GroupKind> kinds;
    for (const auto& g : groups)
        kinds[g.id] = g.kind;
    Side s;
    std::set<std::int32_t> ranks;
    std::map<std::int32_t, double> work; // rank -> forward + backward + recompute seconds
    std::int64_t workStart = INT64_MAX, workEnd = INT64_MIN;
    bool first = true;
    for (const auto& e : events) {
        if (!all && e.step != step)
            continue;
        s.start = first ? e.startNs : std::min(s.start, e.startNs);
        s.end = first ? e.endNs : std::max(s.end, e.endNs);
        first = false;
        ranks.insert(e.rank);
        const auto it = kinds.find(e.group);
        const int row = rowOf(e, e.group >= 0 && it != kinds.end() ? it->second : GroupKind::Other);
        if (row < 0)
            continue;
        s.perRank[std::size_t(row)] += double(e.durationNs()) * 1e-9;
        if (row <= 2) {
            work[e.rank] += double(e.durationNs()) * 1e-9;
            workStart = std::min(workStart, e.startNs);
            workEnd = std::max(workEnd, e.endNs);
        }
    }
    if (ranks.empty())
        return s;
    const double n = double(ranks.size());
    for (std::size_t k = 0; k < kBubble; ++k)
        s.perRank[k] /= n;
    // The bubble: each rank's idle part of the pipeline phase (first to last forward or backward of any rank).
    const double phase = workEnd > workStart ? double(workEnd - workStart) * 1e-9 : 0;
    double idle = 0;
    for (std::int32_t r : ranks)
        idle += std::max(0.0, phase - work[r]);
    s.perRank[kBubble] = idle / n;
    s.perRank[kStep] = double(s.end - s.start) * 1e-9;
    return s;
}

} // namespace

std::int32_t lastCompleteStep(const std::vector<TraceEvent>& measured)
{
    std::int32_t last = -1, lastOptimized = -1;
    for (const auto& e : measured) {
        last = std::max(last, e.step);
        if (e.kind == EventKind::Optimizer)
            lastOptimized = std::max(lastOptimized, e.step);
    }
    return lastOptimized >= 0 ? lastOptimized : last;
}

StepComparison compareStep(const std::vector<TraceEvent>& predicted, const std::vector<GroupInfo>& predictedGroups,
    const std::vector<TraceEvent>& measured, const std::vector<GroupInfo>& measuredGroups, std::int32_t step)
{
    StepComparison c;
    c.step = step;
    const Side p = measure(predicted, predictedGroups, true, -1);
    const Side m = measure(measured, measuredGroups, false, step);
    c.predictedStartNs = p.start;
    c.predictedEndNs = p.end;
    c.measuredStartNs = m.start;
    c.measuredEndNs = m.end;
    c.scale = p.end > p.start && m.end > m.start ? double(m.end - m.start) / double(p.end - p.start) : 1.0;
    for (std::size_t k = 0; k < kKinds.size(); ++k) {
        KindComparison row;
        row.kind = kKinds[k];
        row.predicted = p.perRank[k];
        row.measured = m.perRank[k];
        row.ratio = row.predicted > 0 ? row.measured / row.predicted : 0;
        c.kinds.push_back(row);
    }
    return c;
}

} // namespace loom::trace
