#include "engine/trace/TraceFlows.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace loom::trace {

namespace {

bool isCollective(EventKind k)
{
    return laneOf(k) == Lane::Comm && k != EventKind::Send && k != EventKind::Recv;
}

bool isWork(EventKind k)
{
    return isPass(k);
}

// Indexes of `events` sorted by start (stable, so equal starts keep the record's order).
std::vector<std::uint32_t> byStart(const std::vector<TraceEvent>& events)
{
    std::vector<std::uint32_t> order(events.size());
    for (std::size_t i = 0; i < order.size(); ++i)
        order[i] = std::uint32_t(i);
    std::stable_sort(order.begin(), order.end(),
        [&events](std::uint32_t a, std::uint32_t b) { return events[a].startNs < events[b].startNs; });
    return order;
}

// Orders flows by the start of the event they leave from.
auto bySourceStart(const std::vector<TraceEvent>& events)
{
    return [&events](const Flow& a, const Flow& b) { return events[a.from].startNs < events[b.from].startNs; };
}

} // namespace

std::vector<Flow> pipelineFlows(const std::vector<TraceEvent>& events)
{
    const auto order = byStart(events);
    // (sender, receiver) -> the receives in order, and how many have been matched.
    std::map<std::pair<std::int32_t, std::int32_t>, std::pair<std::vector<std::uint32_t>, std::size_t>> recvs;
    // (rank, step, micro-batch) -> that rank's compute events of the micro-batch, in order of start.
    std::map<std::tuple<std::int32_t, std::int32_t, std::int32_t>, std::vector<std::uint32_t>> work;
    bool anyRecv = false;
    for (std::uint32_t i : order) {
        const auto& e = events[i];
        if (e.kind == EventKind::Recv && e.peer >= 0) {
            recvs[{ e.peer, e.rank }].first.push_back(i);
            anyRecv = true;
        } else if (isWork(e.kind) && e.microBatch >= 0) {
            work[{ e.rank, e.step, e.microBatch }].push_back(i);
        }
    }
    std::vector<Flow> out;
    for (std::uint32_t i : order) {
        const auto& s = events[i];
        if (s.kind != EventKind::Send || s.peer < 0)
            continue;
        if (anyRecv) {
            auto it = recvs.find({ s.rank, s.peer });
            if (it != recvs.end() && it->second.second < it->second.first.size())
                out.push_back({ i, it->second.first[it->second.second++] });
            continue;
        }
        const auto w = work.find({ s.peer, s.step, s.microBatch });
        if (w == work.end())
            continue;
        const auto target = std::find_if(
            w->second.begin(), w->second.end(), [&](std::uint32_t j) { return events[j].startNs >= s.startNs; });
        if (target != w->second.end())
            out.push_back({ i, *target });
    }
    return out;
}

std::vector<Flow> launchFlows(const std::vector<TraceEvent>& events)
{
    // (rank, correlation) -> the launch; the first one when a trace repeats a correlation on its host.
    std::map<std::pair<std::int32_t, std::int64_t>, std::uint32_t> launches;
    for (std::uint32_t i = 0; i < events.size(); ++i)
        if (events[i].kind == EventKind::Launch && events[i].correlation >= 0)
            launches.try_emplace({ events[i].rank, events[i].correlation }, i);
    std::vector<Flow> out;
    if (launches.empty())
        return out;
    for (std::uint32_t i = 0; i < events.size(); ++i) {
        const auto& e = events[i];
        if (e.stream < 0 || e.correlation < 0 || e.kind == EventKind::Launch)
            continue;
        if (const auto it = launches.find({ e.rank, e.correlation }); it != launches.end())
            out.push_back({ it->second, i });
    }
    std::stable_sort(out.begin(), out.end(), bySourceStart(events));
    return out;
}

std::vector<Flow> allFlows(const std::vector<TraceEvent>& events)
{
    std::vector<Flow> out = pipelineFlows(events);
    const std::vector<Flow> launched = launchFlows(events);
    if (launched.empty())
        return out;
    const auto pipelineEnd = out.size();
    out.insert(out.end(), launched.begin(), launched.end());
    std::inplace_merge(out.begin(), out.begin() + std::ptrdiff_t(pipelineEnd), out.end(), bySourceStart(events));
    return out;
}

std::vector<std::uint32_t> collectiveMembers(const std::vector<TraceEvent>& events, std::uint32_t index)
{
    if (index >= events.size())
        return {};
    const auto& x = events[index];
    if (!isCollective(x.kind) || x.group < 0)
        return { index };
    const auto same = [&x](const TraceEvent& e) { return e.kind == x.kind && e.group == x.group && e.step == x.step; };
    // The selected event's ordinal among its rank's like events, then the event of that ordinal on each rank.
    const auto order = byStart(events);
    std::map<std::int32_t, int> seen;
    int ordinal = -1;
    for (std::uint32_t i : order) {
        if (!same(events[i]))
            continue;
        const int n = seen[events[i].rank]++;
        if (i == index)
            ordinal = n;
    }
    std::map<std::int32_t, int> count;
    std::vector<std::uint32_t> out;
    for (std::uint32_t i : order)
        if (same(events[i]) && count[events[i].rank]++ == ordinal)
            out.push_back(i);
    std::sort(out.begin(), out.end(), [&events](std::uint32_t a, std::uint32_t b) {
        return std::tie(events[a].rank, a) < std::tie(events[b].rank, b);
    });
    return out;
}

} // namespace loom::trace
