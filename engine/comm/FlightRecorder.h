#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

namespace loom::comm {

// c10d's flight-recorder idea for this process: the last kSlots collectives it ran, each with its
// operation, group, sequence number, bytes and state (running, done, failed). When a run hangs, each rank's
// record says where it waits: every rank but the stuck one sits in the same collective of the same group
// with the same sequence number, and the stuck one is behind or silent. loom-train prints it once it has
// been asked to stop (SIGTERM) and has not stopped within a second (Train.cpp), and the launcher quotes
// those lines in the cause of a run that made no progress.
class FlightRecorder {
public:
    static constexpr std::size_t kSlots = 8;

    static FlightRecorder& instance();

    // A collective starts: returns its slot's ticket for finish().
    std::uint64_t start(
        std::string_view operation, const std::string& group, std::uint64_t sequence, std::uint64_t bytes);
    void finish(std::uint64_t ticket, bool ok);

    // "all-reduce #12 on DP group of tp=0 pp=0, 4096 bytes, running for 3.2 s; broadcast #11 ..., done",
    // newest first; "none" before the first collective.
    std::string text() const;

private:
    struct Entry {
        std::uint64_t ticket = 0; // 0: empty
        std::string operation;
        std::string group;
        std::uint64_t sequence = 0, bytes = 0;
        std::int64_t startNs = 0, endNs = 0;
        int state = 0; // 0 running, 1 done, 2 failed
    };
    mutable std::mutex m_mutex;
    std::array<Entry, kSlots> m_entries {};
    std::uint64_t m_next = 0;
};

} // namespace loom::comm
