#pragma once

#include <sched.h>

#include <chrono>

namespace loom::comm {

// Polls `test` until it returns true (yielding between polls, so oversubscribed ranks make progress) or
// `timeout` passes; false on timeout.
template <typename Test> bool pollUntil(Test&& test, std::chrono::duration<double> timeout)
{
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (unsigned spins = 0;; ++spins) {
        if (test())
            return true;
        if (spins > 32)
            sched_yield();
        if ((spins & 255) == 255 && std::chrono::steady_clock::now() > deadline)
            return false;
    }
}

} // namespace loom::comm
