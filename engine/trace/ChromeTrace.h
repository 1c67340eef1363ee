#pragma once

#include "engine/trace/TraceEvent.h"

#include <ostream>
#include <string>
#include <vector>

namespace loom::trace {

// Writes events as a Chrome trace (the JSON that Perfetto and chrome://tracing open): one process per rank
// ("rank N"), a thread per lane ("compute", "comm"), complete events ("ph": "X") in microseconds, and
// args carrying step, micro-batch, stage, chunk, bytes, wire bytes, peer, algorithm, codec and source (and, for
// imported GPU work, its stream and correlation id); launches and their device work are also linked by flow events
// ("ph": "s" / "f", category "ac2g", as Kineto writes them), which readChromeTrace skips.
// `otherData` is a JSON object's text stored under "otherData" (Loom puts the layout and run facts there).
void writeChromeTrace(std::ostream& out, const std::vector<TraceEvent>& events,
    const std::vector<GroupInfo>& groups = {}, const std::string& otherData = "{}");

} // namespace loom::trace
