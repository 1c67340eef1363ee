#pragma once

#include "engine/trace/TraceEvent.h"

#include <cstdint>
#include <vector>

namespace loom::trace {

// Flow arrows between events, as Perfetto's flows: from each pipeline send to the event on the peer that it
// feeds. Indexes are into the events given.
struct Flow {
    std::uint32_t from = 0, to = 0;
};

// Every send with a peer, matched to its receive: the peer's n-th recv from the sender for the sender's
// n-th send to it (point-to-point messages between two ranks arrive in order). A trace without receives
// (the simulated schedule records only sends) gets the peer's first compute event of the same step and
// micro-batch that starts no earlier than the send: the work the data feeds. Ordered by the sends' start.
std::vector<Flow> pipelineFlows(const std::vector<TraceEvent>& events);

// Launch → device work flows of imported GPU traces: from each Launch event (the host call) to every device event
// (one with a stream) of the same rank and correlation id, as HTA and Perfetto link a kernel to its launch. Device
// work whose launch is not in the trace (launched before the profiler started) has none. Ordered by the
// launches' start.
std::vector<Flow> launchFlows(const std::vector<TraceEvent>& events);

// Every flow the timeline draws: pipelineFlows and launchFlows together, ordered by the start of their origin.
std::vector<Flow> allFlows(const std::vector<TraceEvent>& events);

// The parts of one collective on every member: the events of the same kind, group and step as events[index]
// that are, on their rank, the same (n-th) such event as it is on its own. Sorted by rank; it is among them.
// A point-to-point event or a compute event has only itself.
std::vector<std::uint32_t> collectiveMembers(const std::vector<TraceEvent>& events, std::uint32_t index);

} // namespace loom::trace
