#pragma once

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace loom::comm {

// How pollUntil waits between polls: a few tight polls (a message that is nearly there costs no sleep),
// then yields, then sleeps that grow with the time already waited. Sleeping, not spinning, is what lets
// oversubscribed ranks (more ranks than cores, as on a laptop) give their core to the rank that computes:
// a pipeline stage waiting for its input would otherwise take half a core from the stage it waits for.
// A sleep is at most an eighth of the wait so far (and at most kMaxSleep), so it delays a long wait's end
// by at most about 12 %, and a short wait hardly at all. kMaxSleep bounds what a hand-off between pipeline
// stages costs when the receiver has been waiting a while: at 1 ms the median such hand-off measured 1.0 ms
// (loom-train --trace-out, pp 2, docs/training.md), a fifth of a two-layer op of the zero-bubble bench, paid
// twice as often by the V schedules; 250 µs costs a waiting rank 4,000 wake-ups a second, under 1 % of a core.
struct PollBackoff {
    static constexpr unsigned kSpins = 32;
    static constexpr unsigned kYields = 64;
    static constexpr std::chrono::microseconds kFirstSleep { 10 };
    static constexpr std::chrono::microseconds kMaxSleep { 250 };

    // The sleep after poll number `poll` (0-based) that failed, `waited` after the wait began; zero: none.
    static std::chrono::microseconds sleepAfter(unsigned poll, std::chrono::steady_clock::duration waited)
    {
        if (poll < kSpins + kYields)
            return std::chrono::microseconds(0);
        const auto eighth = std::chrono::duration_cast<std::chrono::microseconds>(waited) / 8;
        return std::clamp(eighth, kFirstSleep, kMaxSleep);
    }
};

// Polls `test` until it returns true or `timeout` passes; false on timeout. Between polls it backs off as
// PollBackoff says.
template <typename Test> bool pollUntil(Test&& test, std::chrono::duration<double> timeout)
{
    const auto start = std::chrono::steady_clock::now();
    // In double seconds, so that any LOOM_COMM_TIMEOUT_S, however large, compares without overflow.
    auto pastDeadline = [&](std::chrono::steady_clock::time_point now) {
        return std::chrono::duration<double>(now - start) > timeout;
    };
    for (unsigned poll = 0;; ++poll) {
        if (test())
            return true;
        if (poll < PollBackoff::kSpins) {
            if ((poll & 15) == 15 && pastDeadline(std::chrono::steady_clock::now()))
                return false;
            continue;
        }
        const auto now = std::chrono::steady_clock::now();
        if (pastDeadline(now))
            return false;
        const auto sleep = PollBackoff::sleepAfter(poll, now - start);
        if (sleep.count() == 0)
            sched_yield();
        else
            std::this_thread::sleep_for(sleep);
    }
}

} // namespace loom::comm
