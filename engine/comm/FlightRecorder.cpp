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

std::uint64_t FlightRecorder::start(
    std::string_view operation, const std::string& group, std::uint64_t sequence, std::uint64_t bytes)
{
    std::lock_guard lock(m_mutex);
    const std::uint64_t ticket = ++m_next;
    Entry& e = m_entries[ticket % kSlots];
    e = Entry { ticket, std::string(operation), group.substr(0, 80), sequence, bytes, steadyNs(), 0, 0 };
    return ticket;
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
        std::snprintf(line, sizeof line, "%s #%llu on %s, %llu bytes, %s %.1f s", e.operation.c_str(),
            static_cast<unsigned long long>(e.sequence), e.group.c_str(), static_cast<unsigned long long>(e.bytes),
            e.state == 0       ? "running for"
                : e.state == 1 ? "done in"
                               : "failed after",
            seconds);
        out += (out.empty() ? "" : "; ") + std::string(line);
    }
    return out.empty() ? "none" : out;
}

} // namespace loom::comm
