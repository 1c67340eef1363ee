#include "engine/trace/TelemetryFrames.h"

#include "engine/json/JsonLimits.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace loom::trace {

namespace {

using Json = nlohmann::ordered_json;

constexpr std::array<std::string_view, 7> kTypeNames
    = { "run", "groups", "events", "step", "checkpoint", "end", "error" };

// The event fields in the order of an events frame's inner arrays (docs/telemetry.md).
constexpr std::array<std::string_view, 17> kEventFields
    = { "rank", "lane", "kind", "source", "step", "micro_batch", "stage", "chunk", "start_ns", "end_ns", "bytes",
          "wire_bytes", "group", "group_size", "peer", "algorithm", "codec" };

[[noreturn]] void fail(std::string_view frame, const std::string& what)
{
    throw FrameError("the " + std::string(frame) + " frame " + what);
}

// Refuses payloads nested deeper than the limit before the parser sees them.
void checkDepth(std::string_view text, std::string_view frame)
{
    if (!jsonNestingProblem(text, FrameLimits::kMaxDepth).empty())
        fail(frame, "is nested deeper than " + std::to_string(FrameLimits::kMaxDepth) + " levels");
}

Json parse(std::string_view payload, std::string_view frame)
{
    checkDepth(payload, frame);
    try {
        return Json::parse(payload);
    } catch (const Json::parse_error& e) {
        fail(frame,
            "is not valid JSON (at byte " + std::to_string(e.byte) + " of " + std::to_string(payload.size()) + ")");
    } catch (const Json::exception&) { // a number beyond double's range (out_of_range.406)
        fail(frame, "holds a number too large for a double (or is otherwise not valid JSON)");
    }
}

// One JSON value of a frame, with the words that name it in messages ("field \"loss\"", "entry 3 of ...").
struct Value {
    const Json& j;
    std::string_view frame;
    std::string name;

    [[noreturn]] void wrong(const std::string& expected) const
    {
        fail(frame, "has " + name + " that must be " + expected + ", not " + std::string(j.type_name()));
    }

    std::int64_t integer(std::int64_t min = std::numeric_limits<std::int64_t>::min(),
        std::int64_t max = std::numeric_limits<std::int64_t>::max()) const
    {
        if (!j.is_number_integer())
            wrong("an integer");
        const bool huge = j.is_number_unsigned() && j.get<std::uint64_t>() > std::uint64_t(max);
        const auto v = j.get<std::int64_t>();
        if (huge || v < min || v > max)
            fail(frame,
                "has " + name + " = " + (huge ? std::to_string(j.get<std::uint64_t>()) : std::to_string(v))
                    + "; it must be in [" + std::to_string(min) + ", " + std::to_string(max) + "]");
        return v;
    }
    std::uint64_t unsignedInteger() const
    {
        if (!j.is_number_unsigned())
            wrong("a non-negative integer");
        return j.get<std::uint64_t>();
    }
    // JSON has no NaN: the engine writes a diverged loss as null, read back as NaN.
    double number() const
    {
        if (j.is_null())
            return std::numeric_limits<double>::quiet_NaN();
        if (!j.is_number())
            wrong("a number");
        return j.get<double>();
    }
    std::string text() const
    {
        if (!j.is_string())
            wrong("a string");
        const auto& s = j.get_ref<const std::string&>();
        if (s.size() > FrameLimits::kMaxText)
            fail(frame, "has " + name + " longer than " + std::to_string(FrameLimits::kMaxText) + " bytes");
        return s;
    }
    const Json& array(std::size_t maxSize) const
    {
        if (!j.is_array())
            wrong("an array");
        if (j.size() > maxSize)
            fail(frame,
                "has " + name + " with " + std::to_string(j.size()) + " entries; at most " + std::to_string(maxSize)
                    + " are read");
        return j;
    }
};

// The fields of a frame's JSON object.
struct Object {
    const Json& j;
    std::string_view frame;

    Object(const Json& json, std::string_view frameName, const std::string& what = "payload")
        : j(json)
        , frame(frameName)
    {
        if (!j.is_object())
            fail(frame, "has a " + what + " that must be a JSON object, not " + std::string(j.type_name()));
    }
    static std::string fieldName(std::string_view key) { return "field \"" + std::string(key) + "\""; }
    Value required(std::string_view key) const
    {
        const auto it = j.find(key);
        if (it == j.end())
            fail(frame, "lacks its " + fieldName(key));
        return { *it, frame, fieldName(key) };
    }
    std::optional<Value> optional(std::string_view key) const
    {
        const auto it = j.find(key);
        if (it == j.end())
            return std::nullopt;
        return Value { *it, frame, fieldName(key) };
    }
};

constexpr std::int64_t kInt32Max = std::numeric_limits<std::int32_t>::max();
constexpr std::int64_t kInt32Min = std::numeric_limits<std::int32_t>::min();

Json eventsJson(const std::vector<TraceEvent>& events)
{
    Json a = Json::array();
    for (const auto& e : events)
        a.push_back({ e.rank, static_cast<int>(e.lane), static_cast<int>(e.kind), static_cast<int>(e.source), e.step,
            e.microBatch, e.stage, e.chunk, e.startNs, e.endNs, e.bytes, e.wireBytes, e.group, e.groupSize, e.peer,
            static_cast<int>(e.algorithm), e.codec });
    return a;
}

TraceEvent eventFrom(const Json& x, std::size_t index)
{
    constexpr std::string_view frame = "events";
    if (!x.is_array() || x.size() != kEventFields.size())
        fail(frame,
            "has event " + std::to_string(index) + " that must be an array of " + std::to_string(kEventFields.size())
                + " values, not " + (x.is_array() ? std::to_string(x.size()) + " values" : std::string(x.type_name())));
    auto at = [&](std::size_t i) {
        return Value { x[i], frame,
            "event " + std::to_string(index) + "'s field \"" + std::string(kEventFields[i]) + "\"" };
    };
    auto int32 = [&](std::size_t i) { return static_cast<std::int32_t>(at(i).integer(kInt32Min, kInt32Max)); };
    TraceEvent e;
    e.rank = int32(0);
    e.lane = static_cast<Lane>(at(1).integer(0, static_cast<int>(Lane::Comm)));
    // Kinds and algorithms are checked by name, so values added to the enums are read without a change here.
    const auto kind = at(2).integer(0, 255);
    if (toString(static_cast<EventKind>(kind)) == "unknown")
        fail(frame, "has event " + std::to_string(index) + " of unknown kind " + std::to_string(kind));
    e.kind = static_cast<EventKind>(kind);
    e.source = static_cast<EventSource>(at(3).integer(0, static_cast<int>(EventSource::Simulated)));
    e.step = int32(4);
    e.microBatch = int32(5);
    e.stage = int32(6);
    e.chunk = int32(7);
    e.startNs = at(8).integer();
    e.endNs = at(9).integer();
    e.bytes = at(10).unsignedInteger();
    e.wireBytes = at(11).unsignedInteger();
    e.group = int32(12);
    e.groupSize = int32(13);
    e.peer = int32(14);
    const auto algorithm = at(15).integer(0, 255);
    if (algorithm != 0 && toString(static_cast<Algorithm>(algorithm)) == toString(Algorithm::None))
        fail(frame, "has event " + std::to_string(index) + " with unknown algorithm " + std::to_string(algorithm));
    e.algorithm = static_cast<Algorithm>(algorithm);
    e.codec = at(16).text();
    return e;
}

std::vector<TraceEvent> eventsFrom(const Json& a)
{
    const Value all { a, "events", "a payload" };
    all.array(std::numeric_limits<std::size_t>::max()); // the line length limits its size
    std::vector<TraceEvent> out;
    out.reserve(a.size());
    for (std::size_t i = 0; i < a.size(); ++i)
        out.push_back(eventFrom(a[i], i));
    return out;
}

RunFrame runFrom(const Json& j)
{
    const Object o(j, "run");
    RunFrame f;
    f.streamVersion = static_cast<int>(o.required("loom_stream").integer(1, kInt32Max));
    if (f.streamVersion > kStreamVersion)
        fail("run",
            "says telemetry stream version " + std::to_string(f.streamVersion) + "; this Loom reads versions up to "
                + std::to_string(kStreamVersion) + ": update Loom");
    const auto layout = o.required("layout");
    if (!layout.j.is_object())
        layout.wrong("a JSON object (the layout)");
    f.layoutJson = layout.j.dump();
    f.ranks = o.required("ranks").integer(1, kInt32Max);
    if (const auto first = o.optional("first_step"))
        f.firstStep = first->integer(0);
    f.steps = o.required("steps").integer(0);
    return f;
}

GroupsFrame groupsFrom(const Json& j)
{
    constexpr std::string_view frame = "groups";
    const Json& a = Value { j, frame, "a payload" }.array(FrameLimits::kMaxGroups);
    GroupsFrame f;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const Object g(a[i], frame, "group " + std::to_string(i));
        GroupInfo info;
        info.id = static_cast<std::int32_t>(g.required("id").integer(kInt32Min, kInt32Max));
        if (const auto name = g.optional("name"))
            info.name = name->text();
        // "kind" as toString writes it; absent, the name's first word says it (groupKindFromName).
        const auto kind = g.optional("kind");
        info.kind = groupKindFromName(kind ? kind->text() : info.name);
        const auto ranks = g.required("ranks");
        for (const auto& r : ranks.array(FrameLimits::kMaxRanks))
            info.ranks.push_back(static_cast<std::int32_t>(
                Value { r, frame, "a rank of group " + std::to_string(i) }.integer(0, kInt32Max)));
        f.groups.push_back(std::move(info));
    }
    return f;
}

StepFrame stepFrom(const Json& j)
{
    const Object o(j, "step");
    StepFrame f;
    f.step = o.required("step").integer(0);
    f.loss = o.required("loss").number();
    auto number = [&](std::string_view key) { return o.optional(key) ? o.optional(key)->number() : 0.0; };
    f.tokensPerSecond = number("tokens_per_s");
    f.stepTimeSeconds = number("step_time_s");
    f.gradNorm = number("grad_norm");
    f.lr = number("lr");
    f.flopsPerSecond = number("flops_per_s");
    f.hardwareFlopsPerSecond = number("hardware_flops_per_s");
    if (const auto memory = o.optional("memory_high_water_bytes"))
        for (const auto& m : memory->array(FrameLimits::kMaxRanks))
            f.memoryHighWaterBytes.push_back(
                Value { m, "step", "an entry of field \"memory_high_water_bytes\"" }.integer(0));
    return f;
}

CheckpointFrame checkpointFrom(const Json& j)
{
    const Object o(j, "checkpoint");
    return { o.required("step").integer(0), o.required("path").text() };
}

EndFrame endFrom(const Json& j)
{
    const Object o(j, "end");
    const auto reason = o.required("reason");
    const std::string text = reason.text();
    for (auto r : { EndReason::Finished, EndReason::Sigterm })
        if (text == toString(r))
            return { r };
    fail("end", "has field \"reason\" = \"" + text.substr(0, 64) + "\"; it must be \"finished\" or \"sigterm\"");
}

ErrorFrame errorFrom(const Json& j)
{
    const Object o(j, "error");
    ErrorFrame f;
    f.rank = o.required("rank").integer(0, kInt32Max);
    f.kind = o.required("kind").text();
    if (std::find(std::begin(kErrorKinds), std::end(kErrorKinds), f.kind) == std::end(kErrorKinds))
        fail("error",
            "has field \"kind\" = \"" + f.kind.substr(0, 64)
                + "\"; it must be communication, layout, input, diverged or internal");
    f.message = o.required("message").text();
    return f;
}

Json payloadJson(const TelemetryFrame& frame)
{
    struct Encoder {
        Json operator()(const RunFrame& f) const
        {
            Json layout = Json::parse(
                f.layoutJson.empty() ? std::string_view("{}") : std::string_view(f.layoutJson), nullptr, false);
            if (layout.is_discarded() || !layout.is_object())
                throw FrameError("the run frame's layout must be a JSON object");
            return { { "loom_stream", f.streamVersion }, { "layout", std::move(layout) }, { "ranks", f.ranks },
                { "first_step", f.firstStep }, { "steps", f.steps } };
        }
        Json operator()(const GroupsFrame& f) const
        {
            Json a = Json::array();
            for (const auto& g : f.groups)
                a.push_back({ { "id", g.id }, { "kind", std::string(toString(g.kind)) }, { "ranks", g.ranks },
                    { "name", g.name } });
            return a;
        }
        Json operator()(const EventsFrame& f) const { return eventsJson(f.events); }
        Json operator()(const StepFrame& f) const
        {
            return { { "step", f.step }, { "loss", f.loss }, { "tokens_per_s", f.tokensPerSecond },
                { "step_time_s", f.stepTimeSeconds }, { "grad_norm", f.gradNorm }, { "lr", f.lr },
                { "flops_per_s", f.flopsPerSecond }, { "memory_high_water_bytes", f.memoryHighWaterBytes },
                { "hardware_flops_per_s", f.hardwareFlopsPerSecond } };
        }
        Json operator()(const CheckpointFrame& f) const { return { { "step", f.step }, { "path", f.path } }; }
        Json operator()(const EndFrame& f) const { return { { "reason", std::string(toString(f.reason)) } }; }
        Json operator()(const ErrorFrame& f) const
        {
            return { { "rank", f.rank }, { "kind", f.kind }, { "message", f.message } };
        }
    };
    return std::visit(Encoder {}, frame);
}

} // namespace

std::string_view toString(FrameType type)
{
    return kTypeNames[static_cast<std::size_t>(type)];
}

std::optional<FrameType> frameTypeFromString(std::string_view text)
{
    for (std::size_t i = 0; i < kTypeNames.size(); ++i)
        if (kTypeNames[i] == text)
            return static_cast<FrameType>(i);
    return std::nullopt;
}

std::string_view toString(EndReason reason)
{
    return reason == EndReason::Finished ? "finished" : "sigterm";
}

FrameType typeOf(const TelemetryFrame& frame)
{
    return static_cast<FrameType>(frame.index()); // the variant's alternatives follow FrameType's order
}

std::string payloadOf(const TelemetryFrame& frame)
{
    return payloadJson(frame).dump();
}

std::string encode(const TelemetryFrame& frame)
{
    return encodeFrame(toString(typeOf(frame)), payloadOf(frame));
}

TelemetryFrame decode(std::string_view type, std::string_view payload)
{
    const auto known = frameTypeFromString(type);
    if (!known)
        throw FrameError("a frame of unknown type \"" + std::string(type.substr(0, 64))
            + "\" (this Loom reads run, groups, "
              "events, step, checkpoint, end and error)");
    const std::string_view name = toString(*known);
    const Json j = parse(payload, name);
    switch (*known) {
    case FrameType::Run:
        return runFrom(j);
    case FrameType::Groups:
        return groupsFrom(j);
    case FrameType::Events:
        return EventsFrame { eventsFrom(j) };
    case FrameType::Step:
        return stepFrom(j);
    case FrameType::Checkpoint:
        return checkpointFrom(j);
    case FrameType::End:
        return endFrom(j);
    case FrameType::Error:
        return errorFrom(j);
    }
    throw FrameError("a frame of unknown type");
}

TelemetryFrame decode(const Frame& frame)
{
    if (frame.version < 1 || frame.version > kStreamVersion)
        throw FrameError("a " + frame.type.substr(0, 64) + " frame of telemetry stream version "
            + std::to_string(frame.version) + "; this Loom reads versions 1 to " + std::to_string(kStreamVersion)
            + ": update Loom");
    return decode(frame.type, frame.payload);
}

std::string encodeEvents(const std::vector<TraceEvent>& events)
{
    return eventsJson(events).dump();
}

std::vector<TraceEvent> decodeEvents(std::string_view payload)
{
    return eventsFrom(parse(payload, "events"));
}

} // namespace loom::trace
