#pragma once

#include "engine/trace/TraceEvent.h"

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace loom::views {

// Events arranged for drawing: one row per (rank, lane), each row's events sorted by start with a running
// maximum of their ends, so the events overlapping a time window are found by binary search (Qt Creator's
// tracing and Tracy do the same) whatever the number of events. Qt-free, shared by the simulated schedule
// view and the live timeline.
class TimelineData {
public:
    // What folded events hide, by kind: on a compute lane forward (and recompute), backward, optimizer and
    // other; on a comm lane TP, PP, DP (or unknown group) and other. Durations in ns.
    static constexpr int kMixKinds = 4;
    using Mix = std::array<std::int64_t, kMixKinds>;
    static int mixKind(trace::Lane lane, trace::EventKind kind, trace::GroupKind group);

    struct Row {
        std::int32_t rank = -1;
        trace::Lane lane = trace::Lane::Compute;
        std::int32_t stream = -1; // an imported GPU trace's device stream (its own row), -1 for the host lanes
        std::int32_t stage = -1; // the rank's pipeline stage when known
        std::vector<std::uint32_t> events; // indexes into events(), sorted by start
        std::vector<std::int64_t> start; // start[i], end[i]: of events[i], kept contiguous for the hot loops
        std::vector<std::int64_t> end;
        std::vector<std::int64_t> maxEnd; // maxEnd[i] = max end of events[0..i]
        std::int64_t maxDuration = 0; // of any event in the row
        std::vector<Mix> mixSum; // mixSum[i]: durations by mix kind of events[0, i) (size + 1)
    };

    void setEvents(std::vector<trace::TraceEvent> events, std::vector<trace::GroupInfo> groups = {});
    void clear() { setEvents({}); }
    // Adds events as they stream in. Cheap when each lane's new events start no earlier than its last one
    // (the usual order of a live run); otherwise the lanes concerned are re-sorted.
    void append(const std::vector<trace::TraceEvent>& events);
    void addGroups(const std::vector<trace::GroupInfo>& groups);
    // The row of (rank, lane), or -1.
    int rowIndex(std::int32_t rank, trace::Lane lane) const;
    // The row of an event: its rank's host lane, or its device stream's row; -1 when none yet.
    int rowOf(const trace::TraceEvent& e) const;
    // Whether append(events) would only add rows' tails in order, to existing rows (no new row, no re-sort).
    bool appendsInOrder(const std::vector<trace::TraceEvent>& events) const;

    const std::vector<trace::TraceEvent>& events() const { return m_events; }
    const std::vector<trace::GroupInfo>& groups() const { return m_groups; }
    const std::vector<Row>& rows() const { return m_rows; }
    const trace::TraceEvent& event(std::uint32_t index) const { return m_events[index]; }
    trace::GroupKind groupKindOf(const trace::TraceEvent& e) const;
    // The lowest and highest step of the events (-1 when none carries one).
    std::int32_t firstStep() const { return m_firstStep; }
    std::int32_t lastStep() const { return m_lastStep; }
    std::int64_t beginNs() const { return m_begin; }
    std::int64_t endNs() const { return m_end; }

    // Positions [first, last) in row.events of the events that may overlap [t0, t1]: every overlapping
    // event is inside, and events entirely before t0 are skipped.
    std::pair<std::size_t, std::size_t> visible(const Row& row, std::int64_t t0, std::int64_t t1) const;
    // The summed durations by mix kind of row.events[first, last): what a folded run of them hides.
    Mix mix(const Row& row, std::size_t first, std::size_t last) const;
    // The event of `row` covering time t, or -1.
    std::int64_t eventAt(const Row& row, std::int64_t t) const;

    // One box to draw: an event at least 2 pixels wide (run false), or a run of events narrower than that
    // merged into one box per pixel run (run true; folded when it covers more than one event).
    struct Box {
        double x0 = 0, x1 = 0; // pixels, clipped to [left, right]
        std::uint32_t first = 0, last = 0; // the row positions covered, [first, last]
        bool run = false;
        bool folded() const { return run && last > first; }
    };
    // What `row` draws in the window [t0, t1] mapped onto the pixels [left, right], in drawing order. Hidden
    // events (hidden(e) true) are not drawn and start no run, though a run may cover them. The cost follows
    // the pixels, not the events: the events starting within a run's next two pixels are skipped by binary
    // search when they cannot stick out of it. `out` is cleared first (reused between rows).
    using Hidden = std::function<bool(const trace::TraceEvent&)>;
    void fold(const Row& row, std::int64_t t0, std::int64_t t1, double left, double right, const Hidden& hidden,
        std::vector<Box>& out) const;

private:
    void reindex(Row& row, std::size_t from);
    void remix(Row& row, std::size_t from);
    Row& rowFor(const trace::TraceEvent& e);

    std::vector<trace::TraceEvent> m_events;
    std::vector<trace::GroupInfo> m_groups;
    std::vector<Row> m_rows;
    std::int64_t m_begin = 0, m_end = 0;
    std::int32_t m_firstStep = -1, m_lastStep = -1;
};

} // namespace loom::views
