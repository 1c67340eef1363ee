#pragma once

#include "engine/trace/TraceEvent.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace loom::trace {

// What an area of the timeline (a time range × a set of lanes) holds, aggregated by kind and by rank: the
// table of Perfetto's and Nsight Systems' area selection. Events cut by the range count with the part
// inside it (time and bytes pro rata), so the figures of adjacent ranges add up.
struct AreaQuery {
    std::int64_t t0 = 0, t1 = 0;
    // The lanes selected, as (rank, lane); empty selects every lane.
    std::vector<std::pair<std::int32_t, Lane>> lanes;
};

struct AreaRow {
    EventKind kind = EventKind::Forward;
    GroupKind group = GroupKind::Other; // the collective's group kind (Other for compute and unknown)
    std::int32_t rank = -1; // by rank: the rank; by kind: -1
    std::int64_t count = 0; // events overlapping the range
    std::int64_t totalNs = 0; // their time inside the range
    double meanNs = 0; // totalNs / count
    double share = 0; // totalNs ÷ (range × the selected lanes the row covers)
    double bytes = 0; // payload inside the range (pro rata)
    double gbPerSecond = 0; // bytes ÷ totalNs (algbw), 0 without bytes
};

struct AreaAggregates {
    std::int64_t t0 = 0, t1 = 0;
    int lanes = 0; // lanes the area covers
    std::vector<AreaRow> byKind; // ordered by kind, then group kind
    std::vector<AreaRow> byRank; // ordered by rank; share is of that rank's selected lanes
};

AreaAggregates aggregateArea(
    const std::vector<TraceEvent>& events, const std::vector<GroupInfo>& groups, const AreaQuery& query);

// The kind label of a row: "all-reduce (DP)", "forward".
std::string kindLabel(EventKind kind, GroupKind group);

// Busy, bubble and communication shares of a set of ranks over [t0, t1): a track group's header. Busy is
// the compute lanes' time in compute (not waiting), bubble the rest of the compute lanes' time (idle and
// waits), comm the comm lanes' busy time (their union), each ÷ (members × range).
struct TrackSummary {
    int members = 0;
    double busy = 0, bubble = 0, comm = 0;
};
TrackSummary summarizeTracks(
    const std::vector<TraceEvent>& events, const std::vector<std::int32_t>& ranks, std::int64_t t0, std::int64_t t1);
// The same for many groups at once (one pass over the events): groupOf[rank] is the group of a rank (-1
// for none), `groups` the number of groups.
std::vector<TrackSummary> summarizeTrackGroups(const std::vector<TraceEvent>& events, const std::vector<int>& groupOf,
    int groups, std::int64_t t0, std::int64_t t1);

} // namespace loom::trace
