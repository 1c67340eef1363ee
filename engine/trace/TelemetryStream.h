#pragma once

#include "engine/trace/TraceEvent.h"

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace loom::trace {

// The version this code writes (the "LOOM<n>" of every frame and the run frame's "loom_stream").
constexpr int kStreamVersion = 2; // 2 added the error frame; version 1 streams still read

// The live telemetry stream, version 1. Rank 0 writes it to its standard output, which mpirun, ssh and
// srun carry back, so no port is opened on the cluster. Every frame is one line:
//
//     \x1e LOOM1 <type> <payload bytes> <crc32 of payload, 8 hex> <payload>\n
//
// starting with the ASCII record separator (0x1e), with a JSON payload (no newlines). Whatever else shares
// the stream (other ranks' output, warnings) is skipped; a frame whose length or CRC does not match (cut,
// or mixed with another line) is counted and skipped. The reader accepts any version ("LOOM<n>") and
// hands it on: the typed decoder (TelemetryFrames.h) says which versions it reads. Frame types: "run",
// "groups", "events", "step", "checkpoint", "end" (TelemetryFrames.h has them as types).
struct Frame {
    std::string type;
    std::string payload; // JSON text
    int version = kStreamVersion;
};

// Encodes one frame line (ending in '\n').
std::string encodeFrame(std::string_view type, std::string_view payload);

// Events as the "events" payload: a compact JSON array of arrays, and back (the events frame of
// TelemetryFrames.h; decodeEvents throws its FrameError, a std::runtime_error, when malformed).
std::string encodeEvents(const std::vector<TraceEvent>& events);
std::vector<TraceEvent> decodeEvents(std::string_view payload);

std::uint32_t crc32(std::string_view data);

// A frame line longer than the reader's limit: refused while it arrives, never buffered whole. `type` and
// `declaredBytes` come from its header ("" and 0 when the header itself was cut or damaged).
struct RefusedFrame {
    std::string type;
    std::uint64_t declaredBytes = 0;
};

// Parses the stream incrementally from chunks of any size. Qt-free, never throws on bad input. A line
// (frame or not) longer than `maxLine` bytes is dropped as it arrives, so the reader holds at most about
// `maxLine` bytes of one line; a frame whose header already declares more is dropped from its header on.
class StreamReader {
public:
    explicit StreamReader(std::size_t maxLine = kMaxLine)
        : m_maxLine(maxLine)
    {
    }
    // Consumes `bytes`; complete frames become available through next().
    void feed(std::string_view bytes);
    // The next complete frame, in arrival order; false when none is waiting.
    bool next(Frame& frame);
    // The next frame refused for its size, in arrival order; false when none is waiting.
    bool nextRefused(RefusedFrame& refused);

    std::uint64_t frames() const { return m_frames; }
    std::uint64_t otherLines() const { return m_otherLines; } // lines that were not frames (normal output)
    std::uint64_t damagedFrames() const { return m_damaged; } // frame lines with a bad header, length or CRC
    std::uint64_t droppedBytes() const { return m_droppedBytes; } // over-long lines discarded

    static constexpr std::size_t kMaxLine = 64u << 20;

private:
    void line(std::string_view text);
    void startDiscarding();

    std::size_t m_maxLine;
    std::string m_partial;
    bool m_discarding = false; // inside an over-long line: drop until its end
    std::deque<Frame> m_ready;
    std::deque<RefusedFrame> m_refused;
    std::uint64_t m_frames = 0, m_otherLines = 0, m_damaged = 0, m_droppedBytes = 0;
};

} // namespace loom::trace
