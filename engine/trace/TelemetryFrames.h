#pragma once

#include "engine/trace/TelemetryStream.h"
#include "engine/trace/TraceEvent.h"

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace loom::trace {

// The telemetry stream's frames as value types (docs/telemetry.md). encode() writes the whole frame line
// (TelemetryStream's envelope around the JSON payload); decode() reads a Frame that StreamReader found
// and checks every field, so a consumer switches over a TelemetryFrame and never reads JSON itself.
//
// Versions: the envelope's "LOOM<n>" and the run frame's "loom_stream" carry the stream version. This code
// writes kStreamVersion and reads versions 1..kStreamVersion; a newer frame is refused with a message that
// names its version. Fields added within a version are optional when read (absent: 0 or empty), so
// streams of older engines still read; fields are never renamed.

enum class FrameType { Run, Groups, Events, Step, Checkpoint, End, Error };
std::string_view toString(FrameType type);
std::optional<FrameType> frameTypeFromString(std::string_view text);

// "run": once, first. The layout is kept as JSON text (engine/trace knows no layouts).
struct RunFrame {
    int streamVersion = kStreamVersion; // "loom_stream"
    std::string layoutJson; // "layout": a JSON object, compact
    std::int64_t ranks = 0;
    std::int64_t firstStep = 1; // 1 unless resumed from a checkpoint
    std::int64_t steps = 0; // the last step the run will reach

    bool operator==(const RunFrame&) const = default;
};

// "groups": once, before the first events; ids name every rank's events' `group`.
struct GroupsFrame {
    std::vector<GroupInfo> groups;

    bool operator==(const GroupsFrame&) const = default;
};

// "events": one step's events of every rank, on rank 0's clock.
struct EventsFrame {
    std::vector<TraceEvent> events;

    bool operator==(const EventsFrame&) const = default;
};

// "step": one finished optimizer step.
struct StepFrame {
    std::int64_t step = 0; // 1-based
    double loss = 0;
    double tokensPerSecond = 0;
    double stepTimeSeconds = 0;
    double gradNorm = 0;
    double lr = 0;
    double flopsPerSecond = 0; // model FLOPs (plan::stepFlops) per second, all ranks together
    std::vector<std::int64_t> memoryHighWaterBytes; // one per rank
    double hardwareFlopsPerSecond = 0; // "hardware_flops_per_s": with recomputation; absent (0) before version 2

    bool operator==(const StepFrame&) const = default;
};

// "checkpoint": a checkpoint was saved.
struct CheckpointFrame {
    std::int64_t step = 0;
    std::string path; // absolute folder, as the engine sees it (on the cluster for remote runs)

    bool operator==(const CheckpointFrame&) const = default;
};

// "end": the engine is done. A run without one did not end by itself.
enum class EndReason { Finished, Sigterm };
std::string_view toString(EndReason reason);
struct EndFrame {
    EndReason reason = EndReason::Finished;

    bool operator==(const EndFrame&) const = default;
};

// "error" (stream version 2): a rank failed and says why before the job is aborted; any rank writes it,
// on its own standard output (mpirun and srun forward every rank's). `kind` is one of kErrorKinds.
inline constexpr const char* kErrorKinds[] = { "communication", "layout", "input", "diverged", "internal" };
struct ErrorFrame {
    std::int64_t rank = -1;
    std::string kind = "internal";
    std::string message;

    bool operator==(const ErrorFrame&) const = default;
};

using TelemetryFrame
    = std::variant<RunFrame, GroupsFrame, EventsFrame, StepFrame, CheckpointFrame, EndFrame, ErrorFrame>;

FrameType typeOf(const TelemetryFrame& frame);

// A frame that cannot be read: the message names the frame type, the field and what was expected
// ("the step frame's field \"loss\" must be a number, not a string").
class FrameError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// What a reader accepts; larger or deeper payloads are refused before they are parsed.
struct FrameLimits {
    static constexpr int kMaxDepth = 64; // nesting of arrays and objects
    static constexpr std::size_t kMaxText = 4096; // a name, a path, a codec
    static constexpr std::size_t kMaxGroups = 1u << 20; // groups in one groups frame
    static constexpr std::size_t kMaxRanks = 1u << 24; // ranks of a group, entries of a per-rank list
};

// The JSON payload of a frame (what encodeFrame wraps).
std::string payloadOf(const TelemetryFrame& frame);
// The whole frame line, ending in '\n'.
std::string encode(const TelemetryFrame& frame);

// Reads a frame found by StreamReader; throws FrameError (unknown type, newer version, bad field).
TelemetryFrame decode(const Frame& frame);
// The same from a type name and payload of the current version.
TelemetryFrame decode(std::string_view type, std::string_view payload);

} // namespace loom::trace
