#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

namespace loom::comm {

// c10d's flight-recorder idea for this process: the last kSlots collectives and point-to-point transfers
// it ran, each with its operation (for a send or receive: which rank it goes to or comes from), group,
// sequence number, bytes and state (running, done, failed). When a run hangs, each rank's record says where
// it waits: every rank but the stuck one sits in the same collective of the same group with the same
// sequence number, and the stuck one is behind or silent; a pipeline stage stuck in a receive names the
// stage it waits for. loom-train prints it once it has
// been asked to stop (SIGTERM) and has not stopped within a second (Train.cpp), and the launcher quotes
// those lines in the cause of a run that made no progress.
class FlightRecorder {
public:
    static constexpr std::size_t kSlots = 8;

    static FlightRecorder& instance();

    // A collective starts: returns its slot's ticket for finish().
    std::uint64_t start(
        std::string_view operation, const std::string& group, std::uint64_t sequence, std::uint64_t bytes);
    // A send or receive is posted to `peer` (its global rank): returns its ticket for finish().
    std::uint64_t startPointToPoint(bool isSend, std::int32_t peer, const std::string& group, std::uint64_t bytes);
    void finish(std::uint64_t ticket, bool ok);

    // "all-reduce #12 on DP group of tp=0 pp=0, 4096 bytes, running for 3.2 s; receive from rank 3 on PP
    // group of tp=0 dp=0, 65536 bytes, done in 0.1 s; ...", newest first; "none" before the first entry.
    std::string text() const;

private:
    struct Entry {
        std::uint64_t ticket = 0; // 0: empty
        std::string operation;
        std::string group;
        std::uint64_t sequence = 0, bytes = 0;
        std::int64_t startNs = 0, endNs = 0;
        int state = 0; // 0 running, 1 done, 2 failed
        bool pointToPoint = false; // a send or receive: no sequence number
    };
    mutable std::mutex m_mutex;
    std::uint64_t enter(Entry entry);
    std::array<Entry, kSlots> m_entries {};
    std::uint64_t m_next = 0;
};

} // namespace loom::comm
