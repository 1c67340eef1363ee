#include "engine/comm/FlightRecorder.h"

#include <chrono>
#include <cstdio>

namespace loom::comm {

namespace {

std::int64_t steadyNs()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

} // namespace

FlightRecorder& FlightRecorder::instance()
{
    static FlightRecorder recorder;
    return recorder;
}

std::uint64_t FlightRecorder::enter(Entry entry)
{
    std::lock_guard lock(m_mutex);
    entry.ticket = ++m_next;
    entry.startNs = steadyNs();
    m_entries[entry.ticket % kSlots] = std::move(entry);
    return m_next;
}

std::uint64_t FlightRecorder::start(
    std::string_view operation, const std::string& group, std::uint64_t sequence, std::uint64_t bytes)
{
    return enter(Entry { 0, std::string(operation), group.substr(0, 80), sequence, bytes, 0, 0, 0, false });
}

std::uint64_t FlightRecorder::startPointToPoint(
    bool isSend, std::int32_t peer, const std::string& group, std::uint64_t bytes)
{
    std::string operation = (isSend ? "send to rank " : "receive from rank ") + std::to_string(peer);
    return enter(Entry { 0, std::move(operation), group.substr(0, 80), 0, bytes, 0, 0, 0, true });
}

void FlightRecorder::finish(std::uint64_t ticket, bool ok)
{
    std::lock_guard lock(m_mutex);
    Entry& e = m_entries[ticket % kSlots];
    if (e.ticket != ticket)
        return; // overwritten by later collectives (kSlots of them ran meanwhile on other threads)
    e.endNs = steadyNs();
    e.state = ok ? 1 : 2;
}

std::string FlightRecorder::text() const
{
    std::lock_guard lock(m_mutex);
    std::string out;
    const std::int64_t now = steadyNs();
    for (std::uint64_t t = m_next; t > 0 && t + kSlots > m_next; --t) {
        const Entry& e = m_entries[t % kSlots];
        if (e.ticket != t)
            continue;
        char line[256];
        const double seconds = static_cast<double>((e.state == 0 ? now : e.endNs) - e.startNs) * 1e-9;
        char sequence[32] = "";
        if (!e.pointToPoint)
            std::snprintf(sequence, sizeof sequence, " #%llu", static_cast<unsigned long long>(e.sequence));
        std::snprintf(line, sizeof line, "%s%s on %s, %llu bytes, %s %.1f s", e.operation.c_str(), sequence,
            e.group.c_str(), static_cast<unsigned long long>(e.bytes),
            e.state == 0       ? "running for"
                : e.state == 1 ? "done in"
                               : "failed after",
            seconds);
        out += (out.empty() ? "" : "; ") + std::string(line);
    }
    return out.empty() ? "none" : out;
}

} // namespace loom::comm
