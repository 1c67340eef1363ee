#pragma once

#include "engine/trace/TraceEvent.h"

#include <ostream>
#include <vector>

namespace loom::trace {

// Writes events as a Chrome trace (the JSON that Perfetto and chrome://tracing open): one process per rank
// ("rank N"), a thread per lane ("compute", "comm"), complete events ("ph": "X") in microseconds, and
// args carrying step, micro-batch, stage, chunk, bytes, wire bytes, peer, algorithm, codec and source.
void writeChromeTrace(std::ostream& out, const std::vector<TraceEvent>& events, const std::vector<GroupInfo>& groups = {});

}  // namespace loom::trace
