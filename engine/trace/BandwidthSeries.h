#pragma once

#include "engine/trace/TraceEvent.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace loom::trace {

// One step's bandwidth: the bus bandwidth (GB/s, nccl-tests' factors over the group size) of each kind of
// collective, named by its group kind and operation ("DP all-reduce", "TP all-reduce", "send"), and the
// bytes per second (GB/s, bytes on the wire when known) over each link class ("intra-node", "inter-node").
// Each figure is the step's bytes over the step's time in those operations, summed over ranks.
struct BandwidthPoint {
    std::int32_t step = 0; // 1-based, as the run's steps are shown
    std::map<std::string, double> perCollective;
    std::map<std::string, double> perLinkClass;

    bool operator==(const BandwidthPoint&) const = default;
};

// Builds the per-step series from events as they arrive (live, one frame at a time, or all at once): events
// of a step that come in several batches add up. Only communication events with bytes and a duration count
// (waits do not). An operation is inter-node when its peer, or any member of its group, is on another node
// than the rank that recorded it.
class BandwidthSeries {
public:
    // nodeOfRank[r]: the node of global rank r (ranks past its end, or all when empty, are on node 0).
    explicit BandwidthSeries(std::vector<std::int64_t> nodeOfRank = {});

    // Adds events; `groups` names their `group` ids (an unknown id counts as a group of kind Other).
    void add(const std::vector<TraceEvent>& events, const std::vector<GroupInfo>& groups);
    void clear();
    // Sorted by step.
    const std::vector<BandwidthPoint>& points() const { return m_points; }

    static constexpr const char* kIntraNode = "intra-node";
    static constexpr const char* kInterNode = "inter-node";

private:
    struct Sum {
        double gigabytes = 0;
        double seconds = 0;
    };
    std::int64_t nodeOf(std::int32_t rank) const;
    BandwidthPoint& pointOf(std::int32_t step);

    std::vector<std::int64_t> m_nodeOfRank;
    std::map<std::pair<std::int32_t, std::string>, Sum> m_bus, m_link; // (0-based step, name)
    std::vector<BandwidthPoint> m_points;
};

// The whole series of a finished trace at once.
std::vector<BandwidthPoint> bandwidthSeries(const std::vector<TraceEvent>& events, const std::vector<GroupInfo>& groups,
    const std::vector<std::int64_t>& nodeOfRank = {});

} // namespace loom::trace
