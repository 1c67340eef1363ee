#include "engine/trace/ChromeTrace.h"

#include "engine/json/JsonLimits.h"
#include "engine/trace/TraceFlows.h"
#include "engine/trace/TraceStats.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <optional>
#include <stdexcept>

#include <cstdio>
#include <set>
#include <string>

namespace loom::trace {

namespace {

std::string jsonQuoted(const std::string& s)
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

// Device streams are threads kStreamTid + stream, after the host's compute (0) and comm (1) threads.
constexpr std::int64_t kStreamTid = 100;

std::string microseconds(std::int64_t ns)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", double(ns) / 1000.0);
    return buf;
}

// Kineto's launch-to-kernel flow events ("ac2g"), so that Perfetto draws the arrows Loom draws: one start at
// each launch and one finish (bound to the enclosing slice) at each device event of its correlation.
template <typename Line> void writeLaunchFlows(Line& line, const std::vector<TraceEvent>& events)
{
    const auto flows = launchFlows(events);
    for (std::size_t k = 0; k < flows.size(); ++k) {
        const TraceEvent &from = events[flows[k].from], &to = events[flows[k].to];
        const std::string id = std::to_string(k + 1); // one id a pair: a graph launch feeds several kernels
        line("{\"ph\": \"s\", \"id\": " + id + ", \"cat\": \"ac2g\", \"name\": \"launch\", \"pid\": "
            + std::to_string(from.rank) + ", \"tid\": 0, \"ts\": " + microseconds(from.startNs) + "}");
        line("{\"ph\": \"f\", \"bp\": \"e\", \"id\": " + id + ", \"cat\": \"ac2g\", \"name\": \"launch\", \"pid\": "
            + std::to_string(to.rank) + ", \"tid\": " + std::to_string(kStreamTid + std::max(0, to.stream))
            + ", \"ts\": " + microseconds(to.startNs) + "}");
    }
}

} // namespace

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
    std::set<std::pair<std::int32_t, std::int32_t>> streams;
    for (const auto& e : events) {
        ranks.insert(e.rank);
        if (e.stream >= 0)
            streams.emplace(e.rank, e.stream);
    }
    for (const auto& [r, stream] : streams) // imported GPU work: one lane per device stream
        line("{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " + std::to_string(r)
            + ", \"tid\": " + std::to_string(kStreamTid + stream) + ", \"args\": {\"name\": \"stream "
            + std::to_string(stream) + "\"}}");
    for (auto r : ranks) {
        line("{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": " + std::to_string(r)
            + ", \"args\": {\"name\": \"rank " + std::to_string(r) + "\"}}");
        line("{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": " + std::to_string(r)
            + ", \"args\": {\"sort_index\": " + std::to_string(r) + "}}");
        line("{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " + std::to_string(r)
            + ", \"tid\": 0, \"args\": {\"name\": \"compute\"}}");
        line("{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " + std::to_string(r)
            + ", \"tid\": 1, \"args\": {\"name\": \"comm\"}}");
    }
    for (const auto& e : events) {
        std::string args = "\"step\": " + std::to_string(e.step) + ", \"micro_batch\": " + std::to_string(e.microBatch)
            + ", \"stage\": " + std::to_string(e.stage) + ", \"chunk\": " + std::to_string(e.chunk)
            + ", \"bytes\": " + std::to_string(e.bytes) + ", \"wire_bytes\": " + std::to_string(e.wireBytes)
            + ", \"peer\": " + std::to_string(e.peer) + ", \"group\": " + std::to_string(e.group) + ", \"group_size\": "
            + std::to_string(e.groupSize) + ", \"algorithm\": " + jsonQuoted(std::string(toString(e.algorithm)))
            + ", \"codec\": " + jsonQuoted(e.codec)
            + ", \"source\": " + jsonQuoted(e.source == EventSource::Measured ? "measured" : "simulated");
        if (e.stream >= 0)
            args += ", \"stream\": " + std::to_string(e.stream);
        if (e.correlation >= 0)
            args += ", \"correlation\": " + std::to_string(e.correlation);
        if (e.group >= 0 && static_cast<std::size_t>(e.group) < groups.size())
            args += ", \"group_name\": " + jsonQuoted(groups[static_cast<std::size_t>(e.group)].name);
        std::string name = std::string(toString(e.kind));
        if (e.microBatch >= 0 && isPass(e.kind))
            name += " mb" + std::to_string(e.microBatch);
        line("{\"ph\": \"X\", \"name\": " + jsonQuoted(name) + ", \"cat\": " + jsonQuoted(std::string(toString(e.lane)))
            + ", \"pid\": " + std::to_string(e.rank) + ", \"tid\": "
            + (e.stream >= 0                  ? std::to_string(kStreamTid + e.stream)
                    : e.lane == Lane::Compute ? "0"
                                              : "1")
            + ", \"ts\": " + microseconds(e.startNs) + ", \"dur\": " + microseconds(e.endNs - e.startNs)
            + ", \"args\": {" + args + "}}");
    }
    writeLaunchFlows(line, events);
    out << "\n]}\n";
}

} // namespace loom::trace

// Reading: the parser's callback turns each element of "traceEvents" into a TraceEvent as soon as it is
// complete and drops its JSON, so a trace of any size needs memory for its events only; nesting deeper
// than kMaxJsonDepth stops the parse before anything deep is built.
namespace loom::trace {

namespace {

using nlohmann::json;

std::optional<EventKind> kindFromName(const std::string& name)
{
    for (int k = 0; k <= static_cast<int>(EventKind::Launch); ++k)
        if (name == toString(static_cast<EventKind>(k)))
            return static_cast<EventKind>(k);
    return std::nullopt;
}

// Correlation ids are whole numbers that a double holds exactly (JSON readers such as Perfetto's use doubles).
constexpr std::int64_t kMaxCorrelation = (std::int64_t(1) << 53) - 1;

// ts and dur are microseconds; beyond this they do not fit in nanoseconds of an int64 (292 years).
constexpr double kMaxMicroseconds = 9.0e15;

struct EventReader {
    std::vector<TraceEvent>& out;
    std::vector<GroupInfo>* groups;
    std::size_t index = 0;

    [[noreturn]] void fail(const std::string& field, const std::string& problem) const
    {
        throw std::runtime_error(
            "not a usable trace: event " + std::to_string(index) + " of traceEvents: " + field + " " + problem);
    }
    std::int64_t integer(const json& j, const char* key, std::int64_t fallback, std::int64_t min, std::int64_t max,
        const std::string& where) const
    {
        const auto it = j.find(key);
        if (it == j.end() || it->is_null())
            return fallback;
        const double v = it->is_number() ? it->get<double>() : std::nan("");
        if (!it->is_number() || v != std::floor(v) || v < double(min) || v > double(max))
            fail(where + key,
                "is " + it->dump(-1, ' ', false, json::error_handler_t::replace).substr(0, 40)
                    + "; expected a whole number from " + std::to_string(min) + " to " + std::to_string(max));
        return it->is_number_unsigned() ? static_cast<std::int64_t>(it->get<std::uint64_t>()) : it->get<std::int64_t>();
    }
    std::uint64_t count(const json& j, const char* key) const
    {
        const auto it = j.find(key);
        if (it == j.end() || it->is_null())
            return 0;
        if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<std::int64_t>() >= 0))
            fail(std::string("args.") + key,
                "is " + it->dump().substr(0, 40) + "; expected a whole number of bytes, 0 or more");
        return it->get<std::uint64_t>();
    }
    double microseconds(const json& j, const char* key, bool nonNegative) const
    {
        const auto it = j.find(key);
        if (it == j.end())
            return 0;
        if (!it->is_number())
            fail(key, "is " + it->dump().substr(0, 40) + "; expected a number of microseconds");
        const double v = it->get<double>();
        if (!std::isfinite(v) || std::fabs(v) > kMaxMicroseconds)
            fail(key, "is " + it->dump() + "; expected microseconds between -9e15 and 9e15");
        if (nonNegative && v < 0)
            fail(key, "is " + it->dump() + "; a duration cannot be negative");
        return v;
    }
    std::string text(const json& j, const char* key, const std::string& fallback) const
    {
        const auto it = j.find(key);
        if (it == j.end() || it->is_null())
            return fallback;
        if (!it->is_string())
            fail(std::string("args.") + key, "is " + it->dump().substr(0, 40) + "; expected a string");
        return it->get<std::string>();
    }

    void readArgs(const json& a, TraceEvent& e) const
    {
        constexpr std::int64_t i32 = std::numeric_limits<std::int32_t>::max();
        e.step = static_cast<std::int32_t>(integer(a, "step", -1, -1, i32, "args."));
        e.microBatch = static_cast<std::int32_t>(integer(a, "micro_batch", -1, -1, i32, "args."));
        e.stage = static_cast<std::int32_t>(integer(a, "stage", -1, -1, i32, "args."));
        e.chunk = static_cast<std::int32_t>(integer(a, "chunk", -1, -1, i32, "args."));
        e.bytes = count(a, "bytes");
        e.wireBytes = count(a, "wire_bytes");
        e.peer = static_cast<std::int32_t>(integer(a, "peer", -1, -1, i32, "args."));
        e.group = static_cast<std::int32_t>(integer(a, "group", -1, -1, i32, "args."));
        e.groupSize = static_cast<std::int32_t>(integer(a, "group_size", 0, 0, i32, "args."));
        const std::string groupName = text(a, "group_name", "");
        if (groups && e.group >= 0 && !groupName.empty()
            && std::none_of(groups->begin(), groups->end(), [&](const GroupInfo& g) { return g.id == e.group; })) {
            GroupInfo g;
            g.id = e.group;
            g.name = groupName;
            g.kind = groupKindFromName(g.name);
            groups->push_back(std::move(g));
        }
        e.codec = text(a, "codec", "");
        e.source = text(a, "source", "measured") == "simulated" ? EventSource::Simulated : EventSource::Measured;
        e.stream = static_cast<std::int32_t>(integer(a, "stream", -1, -1, i32, "args."));
        e.correlation = integer(a, "correlation", -1, -1, kMaxCorrelation, "args.");
        if (e.stream >= 0) // a device stream's lane is its own thread: the kind says compute or communication
            e.lane = laneOf(e.kind);
        const std::string algorithm = text(a, "algorithm", "none");
        for (int k = 0; k <= static_cast<int>(Algorithm::SharedMemory); ++k)
            if (algorithm == toString(static_cast<Algorithm>(k)))
                e.algorithm = static_cast<Algorithm>(k);
    }

    // One element of traceEvents; elements that are not Loom's complete events are skipped.
    void read(const json& j)
    {
        if (j.is_object() && j.value("ph", json()) == "X") {
            const auto name = j.find("name");
            const auto kind = name != j.end() && name->is_string()
                ? kindFromName(name->get<std::string>().substr(0, name->get<std::string>().find(" mb")))
                : std::nullopt;
            if (kind) {
                TraceEvent e;
                e.kind = *kind;
                e.rank
                    = static_cast<std::int32_t>(integer(j, "pid", 0, 0, std::numeric_limits<std::int32_t>::max(), ""));
                e.lane = integer(j, "tid", 0, std::numeric_limits<std::int32_t>::min(),
                             std::numeric_limits<std::int32_t>::max(), "")
                        == 1
                    ? Lane::Comm
                    : Lane::Compute;
                const double ts = microseconds(j, "ts", false), dur = microseconds(j, "dur", true);
                e.startNs = static_cast<std::int64_t>(std::llround(ts * 1000.0));
                e.endNs = e.startNs + static_cast<std::int64_t>(std::llround(dur * 1000.0));
                if (const auto a = j.find("args"); a != j.end() && a->is_object())
                    readArgs(*a, e);
                out.push_back(std::move(e));
            }
        }
        ++index;
    }
};

struct TooDeep {
    std::size_t depth;
};

template <typename Input>
std::vector<TraceEvent> readTrace(Input&& input, std::string* otherData, std::vector<GroupInfo>* groups)
{
    std::vector<TraceEvent> out;
    EventReader reader { out, groups };
    std::string topKey;
    bool eventsList = false;
    const json::parser_callback_t callback = [&](int depth, json::parse_event_t event, json& parsed) {
        using E = json::parse_event_t;
        if ((event == E::object_start || event == E::array_start)
            && static_cast<std::size_t>(depth) + 1 > kMaxJsonDepth)
            throw TooDeep { static_cast<std::size_t>(depth) + 1 };
        if (event == E::key && depth == 1)
            topKey = parsed.is_string() ? parsed.get<std::string>() : std::string();
        if (event == E::array_start && depth == 1 && topKey == "traceEvents")
            eventsList = true;
        if (depth == 2 && topKey == "traceEvents"
            && (event == E::object_end || event == E::array_end || event == E::value)) {
            reader.read(parsed);
            return false; // converted: drop its JSON
        }
        return true;
    };
    json doc;
    try {
        doc = json::parse(std::forward<Input>(input), callback);
    } catch (const TooDeep& deep) {
        throw std::runtime_error("not a Chrome trace: arrays and objects are nested deeper than "
            + std::to_string(kMaxJsonDepth) + " levels (event " + std::to_string(reader.index)
            + " of traceEvents or later)");
    } catch (const json::parse_error& e) {
        throw std::runtime_error(
            "not valid JSON (a Chrome trace is JSON) at byte " + std::to_string(e.byte) + ": " + jsonErrorDetail(e));
    } catch (const json::exception& e) {
        throw std::runtime_error("not readable as a Chrome trace: " + jsonErrorDetail(e));
    }
    if (!doc.is_object() || !eventsList || !doc.contains("traceEvents"))
        throw std::runtime_error("not a Chrome trace: a JSON object with a \"traceEvents\" list was expected");
    if (otherData) {
        const auto it = doc.find("otherData");
        *otherData
            = it != doc.end() && it->is_object() ? it->dump(-1, ' ', false, json::error_handler_t::replace) : "{}";
    }
    return out;
}

} // namespace

std::vector<TraceEvent> readChromeTrace(const std::string& text, std::string* otherData, std::vector<GroupInfo>* groups)
{
    return readTrace(text, otherData, groups);
}

std::vector<TraceEvent> readChromeTraceFile(
    const std::string& path, std::string* otherData, std::vector<GroupInfo>* groups)
{
    std::ifstream in(path, std::ios::binary);
    if (!in)
        throw std::runtime_error("not readable: cannot open it");
    return readTrace(in, otherData, groups);
}

} // namespace loom::trace
