#include "engine/trace/TraceAggregates.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace loom::trace {

namespace {

GroupKind kindOfGroup(const std::map<std::int32_t, GroupKind>& kinds, std::int32_t id)
{
    const auto it = kinds.find(id);
    return it == kinds.end() ? GroupKind::Other : it->second;
}

void finish(AreaRow& r, double laneSpan)
{
    r.meanNs = r.count > 0 ? double(r.totalNs) / double(r.count) : 0;
    r.share = laneSpan > 0 ? double(r.totalNs) / laneSpan : 0;
    r.gbPerSecond = r.totalNs > 0 && r.bytes > 0 ? r.bytes / double(r.totalNs) : 0; // bytes/ns = GB/s
}

} // namespace

std::string kindLabel(EventKind kind, GroupKind group)
{
    std::string s(toString(kind));
    if (laneOf(kind) == Lane::Comm && group != GroupKind::Other)
        s += " (" + std::string(toString(group)) + ")";
    return s;
}

AreaAggregates aggregateArea(
    const std::vector<TraceEvent>& events, const std::vector<GroupInfo>& groups, const AreaQuery& q)
{
    AreaAggregates out;
    out.t0 = std::min(q.t0, q.t1);
    out.t1 = std::max(q.t0, q.t1);
    std::map<std::int32_t, GroupKind> kinds;
    for (const auto& g : groups)
        kinds[g.id] = g.kind;
    const std::set<std::pair<std::int32_t, Lane>> wanted(q.lanes.begin(), q.lanes.end());
    // The lanes the area covers: the selected ones, or every lane the events have.
    std::set<std::pair<std::int32_t, Lane>> lanes = wanted;
    if (wanted.empty())
        for (const auto& e : events)
            lanes.emplace(e.rank, e.lane);
    out.lanes = int(lanes.size());
    std::map<std::int32_t, int> lanesOfRank;
    for (const auto& l : lanes)
        ++lanesOfRank[l.first];
    std::map<std::pair<int, int>, AreaRow> byKind;
    std::map<std::int32_t, AreaRow> byRank;
    for (const auto& e : events) {
        const std::int64_t a = std::max(e.startNs, out.t0), b = std::min(e.endNs, out.t1);
        if (b <= a || (!wanted.empty() && !wanted.count({ e.rank, e.lane })))
            continue;
        const GroupKind g = e.group >= 0 ? kindOfGroup(kinds, e.group) : GroupKind::Other;
        const double bytes = e.durationNs() > 0 ? double(e.bytes) * double(b - a) / double(e.durationNs()) : 0;
        for (AreaRow* r : { &byKind[{ int(e.kind), int(g) }], &byRank[e.rank] }) {
            ++r->count;
            r->totalNs += b - a;
            r->bytes += bytes;
        }
        auto& k = byKind[{ int(e.kind), int(g) }];
        k.kind = e.kind;
        k.group = g;
        byRank[e.rank].rank = e.rank;
    }
    const double span = double(out.t1 - out.t0);
    for (auto& [key, r] : byKind) {
        // A kind runs on one lane of each rank: its share is of the lanes of that lane type selected.
        const Lane lane = laneOf(r.kind);
        const auto n = std::count_if(lanes.begin(), lanes.end(), [lane](const auto& l) { return l.second == lane; });
        finish(r, span * double(n));
        out.byKind.push_back(r);
    }
    for (auto& [rank, r] : byRank) {
        finish(r, span * double(lanesOfRank[rank]));
        out.byRank.push_back(r);
    }
    return out;
}

std::vector<TrackSummary> summarizeTrackGroups(const std::vector<TraceEvent>& events, const std::vector<int>& groupOf,
    int groups, std::int64_t t0, std::int64_t t1)
{
    std::vector<TrackSummary> out(std::size_t(std::max(0, groups)));
    if (groups <= 0 || t1 <= t0)
        return out;
    const auto groupAt = [&groupOf](std::int32_t rank) {
        return rank >= 0 && std::size_t(rank) < groupOf.size() ? groupOf[std::size_t(rank)] : -1;
    };
    for (std::size_t r = 0; r < groupOf.size(); ++r)
        if (groupOf[r] >= 0 && groupOf[r] < groups)
            ++out[std::size_t(groupOf[r])].members;
    // Comm lanes may overlap themselves: their busy time is the union, per rank.
    std::map<std::int32_t, std::vector<std::pair<std::int64_t, std::int64_t>>> comm;
    std::vector<double> busy(out.size()), commNs(out.size());
    for (const auto& e : events) {
        const int g = groupAt(e.rank);
        const std::int64_t a = std::max(e.startNs, t0), b = std::min(e.endNs, t1);
        if (g < 0 || g >= groups || b <= a)
            continue;
        if (e.lane == Lane::Comm)
            comm[e.rank].emplace_back(a, b);
        else if (e.kind != EventKind::Wait && e.kind != EventKind::Launch) // the host launching is not work
            busy[std::size_t(g)] += double(b - a);
    }
    for (auto& [rank, iv] : comm) {
        std::sort(iv.begin(), iv.end());
        std::int64_t covered = 0, to = INT64_MIN;
        for (const auto& [a, b] : iv) {
            if (b > to)
                covered += b - std::max(a, to);
            to = std::max(to, b);
        }
        commNs[std::size_t(groupAt(rank))] += double(covered);
    }
    const double span = double(t1 - t0);
    for (std::size_t g = 0; g < out.size(); ++g) {
        if (out[g].members == 0)
            continue;
        const double lanes = span * out[g].members;
        out[g].busy = std::min(1.0, busy[g] / lanes);
        out[g].bubble = 1.0 - out[g].busy;
        out[g].comm = std::min(1.0, commNs[g] / lanes);
    }
    return out;
}

TrackSummary summarizeTracks(
    const std::vector<TraceEvent>& events, const std::vector<std::int32_t>& ranks, std::int64_t t0, std::int64_t t1)
{
    std::vector<int> groupOf;
    for (std::int32_t r : ranks)
        if (r >= 0) {
            if (std::size_t(r) >= groupOf.size())
                groupOf.resize(std::size_t(r) + 1, -1);
            groupOf[std::size_t(r)] = 0;
        }
    return summarizeTrackGroups(events, groupOf, 1, t0, t1).front();
}

} // namespace loom::trace
