#pragma once

#include "engine/comm/CommError.h"
#include "engine/trace/TraceEvent.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace loom::comm {

// What a finished operation did: its byte counts (logical and on the wire, sent by this rank) and the
// algorithm it ran with after any fallback.
struct WorkStats {
    std::uint64_t bytes = 0;
    std::uint64_t wireBytes = 0;
    trace::Algorithm algorithm = trace::Algorithm::None;
    std::int64_t startNs = 0;
    std::int64_t endNs = 0;
};

// The handle every communication call returns, so callers can overlap communication with compute.
// Contract: wait() returns once the operation is complete and its buffers may be reused, or throws
// CommError (failure, timeout, mismatch); it may be called more than once. isCompleted() never blocks.
// The caller keeps the buffers alive until the operation completes; dropping the handle does not cancel.
class Work {
public:
    virtual ~Work() = default;
    virtual bool isCompleted() = 0;
    // Whether isCompleted() can turn true before wait() (Gloo's point-to-point calls cannot: they finish in
    // wait), so that a caller may do other work while it is false.
    virtual bool completesUnwaited() const { return true; }
    virtual void wait() = 0;
    // The failure message once completed with an error; nullopt while running or after success.
    virtual std::optional<std::string> error() = 0;
    virtual WorkStats stats() = 0;
};
using WorkPtr = std::shared_ptr<Work>;

// A Work whose outcome a mutex guards: error() and stats() read m_error and m_stats under m_mutex, which the
// implementation sets when the operation ends.
class GuardedWork : public Work {
public:
    std::optional<std::string> error() override
    {
        std::lock_guard lock(m_mutex);
        return m_error;
    }
    WorkStats stats() override
    {
        std::lock_guard lock(m_mutex);
        return m_stats;
    }

protected:
    std::mutex m_mutex;
    std::optional<std::string> m_error;
    WorkStats m_stats;
};

// A Work completed by someone else (a worker thread): complete() or fail() exactly once.
class PendingWork final : public GuardedWork {
public:
    bool isCompleted() override { return m_done.load(std::memory_order_acquire); }
    void wait() override;

    void complete(const WorkStats& stats);
    void fail(std::string message, const WorkStats& stats = {});

private:
    std::condition_variable m_cv;
    std::atomic<bool> m_done { false };
};

// A Work that completes when all of its parts have (stats are those of the first part, bytes summed).
WorkPtr allOf(std::vector<WorkPtr> parts);

// A Work that is already finished (synchronous paths, empty operations).
WorkPtr completedWork(const WorkStats& stats = {});

} // namespace loom::comm
