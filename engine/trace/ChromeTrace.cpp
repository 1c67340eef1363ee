#include "engine/trace/ChromeTrace.h"

#include <cstdio>
#include <set>
#include <string>

namespace loom::trace {

namespace {

std::string quoted(const std::string& s)
{
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\')
            out += '\\';
        if (static_cast<unsigned char>(c) < 0x20)
            continue;
        out += c;
    }
    return out + "\"";
}

std::string microseconds(std::int64_t ns)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", double(ns) / 1000.0);
    return buf;
}

}  // namespace

void writeChromeTrace(std::ostream& out, const std::vector<TraceEvent>& events, const std::vector<GroupInfo>& groups,
                      const std::string& otherData)
{
    out << "{\"displayTimeUnit\": \"ns\", \"otherData\": " << otherData << ", \"traceEvents\": [\n";
    bool first = true;
    auto line = [&](const std::string& s) {
        out << (first ? "" : ",\n") << s;
        first = false;
    };
    std::set<std::int32_t> ranks;
    for (const auto& e : events)
        ranks.insert(e.rank);
    for (auto r : ranks) {
        line("{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": " + std::to_string(r) + ", \"args\": {\"name\": \"rank "
             + std::to_string(r) + "\"}}");
        line("{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": " + std::to_string(r) + ", \"args\": {\"sort_index\": "
             + std::to_string(r) + "}}");
        line("{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " + std::to_string(r) + ", \"tid\": 0, \"args\": {\"name\": \"compute\"}}");
        line("{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " + std::to_string(r) + ", \"tid\": 1, \"args\": {\"name\": \"comm\"}}");
    }
    for (const auto& e : events) {
        std::string args = "\"step\": " + std::to_string(e.step) + ", \"micro_batch\": " + std::to_string(e.microBatch)
                           + ", \"stage\": " + std::to_string(e.stage) + ", \"chunk\": " + std::to_string(e.chunk)
                           + ", \"bytes\": " + std::to_string(e.bytes) + ", \"wire_bytes\": " + std::to_string(e.wireBytes)
                           + ", \"peer\": " + std::to_string(e.peer) + ", \"group\": " + std::to_string(e.group)
                           + ", \"group_size\": " + std::to_string(e.groupSize)
                           + ", \"algorithm\": " + quoted(std::string(toString(e.algorithm))) + ", \"codec\": " + quoted(e.codec)
                           + ", \"source\": " + quoted(e.source == EventSource::Measured ? "measured" : "simulated");
        if (e.group >= 0 && static_cast<std::size_t>(e.group) < groups.size())
            args += ", \"group_name\": " + quoted(groups[static_cast<std::size_t>(e.group)].name);
        std::string name = std::string(toString(e.kind));
        if (e.microBatch >= 0 && (e.kind == EventKind::Forward || e.kind == EventKind::Backward || e.kind == EventKind::Recompute))
            name += " mb" + std::to_string(e.microBatch);
        line("{\"ph\": \"X\", \"name\": " + quoted(name) + ", \"cat\": " + quoted(std::string(toString(e.lane))) + ", \"pid\": "
             + std::to_string(e.rank) + ", \"tid\": " + (e.lane == Lane::Compute ? "0" : "1") + ", \"ts\": "
             + microseconds(e.startNs) + ", \"dur\": " + microseconds(e.endNs - e.startNs) + ", \"args\": {" + args + "}}");
    }
    out << "\n]}\n";
}

}  // namespace loom::trace
