#pragma once

#include "engine/trace/TraceEvent.h"

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace loom::trace {

// The live telemetry stream, version 1. Rank 0 writes it to its standard output, which mpirun, ssh and
// srun carry back, so no port is opened on the cluster. Every frame is one line:
//
//     \x1e LOOM1 <type> <payload bytes> <crc32 of payload, 8 hex> <payload>\n
//
// starting with the ASCII record separator (0x1e), with a JSON payload (no newlines). Whatever else shares
// the stream (other ranks' output, warnings) is skipped; a frame whose length or CRC does not match (cut,
// or mixed with another line) is counted and skipped. Frame types: "run" (the run's facts), "step" (one
// step's metrics), "events" (one step's trace events of every rank), "end".
struct Frame {
    std::string type;
    std::string payload;  // JSON text
};

// Encodes one frame line (ending in '\n').
std::string encodeFrame(std::string_view type, std::string_view payload);

// Events as the "events" payload: a compact JSON array of arrays, and back.
std::string encodeEvents(const std::vector<TraceEvent>& events);
std::vector<TraceEvent> decodeEvents(std::string_view payload);  // throws std::runtime_error when malformed

std::uint32_t crc32(std::string_view data);

// Parses the stream incrementally from chunks of any size. Qt-free, never throws on bad input.
class StreamReader {
public:
    // Consumes `bytes`; complete frames become available through next().
    void feed(std::string_view bytes);
    // The next complete frame, in arrival order; false when none is waiting.
    bool next(Frame& frame);

    std::uint64_t frames() const { return m_frames; }
    std::uint64_t otherLines() const { return m_otherLines; }    // lines that were not frames (normal output)
    std::uint64_t damagedFrames() const { return m_damaged; }    // frame lines with a bad header, length or CRC
    std::uint64_t droppedBytes() const { return m_droppedBytes; } // over-long lines discarded

    static constexpr std::size_t kMaxLine = 64u << 20;

private:
    void line(std::string_view text);

    std::string m_partial;
    bool m_discarding = false;  // inside an over-long line: drop until its end
    std::deque<Frame> m_ready;
    std::uint64_t m_frames = 0, m_otherLines = 0, m_damaged = 0, m_droppedBytes = 0;
};

}  // namespace loom::trace
