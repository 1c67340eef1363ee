#include "engine/comm/Work.h"

namespace loom::comm {

void PendingWork::wait()
{
    std::unique_lock lock(m_mutex);
    m_cv.wait(lock, [this] { return m_done.load(std::memory_order_acquire); });
    if (m_error)
        throw CommError(*m_error);
}

std::optional<std::string> PendingWork::error()
{
    std::lock_guard lock(m_mutex);
    return m_error;
}

WorkStats PendingWork::stats()
{
    std::lock_guard lock(m_mutex);
    return m_stats;
}

void PendingWork::complete(const WorkStats& stats)
{
    {
        std::lock_guard lock(m_mutex);
        m_stats = stats;
        m_done.store(true, std::memory_order_release);
    }
    m_cv.notify_all();
}

void PendingWork::fail(std::string message, const WorkStats& stats)
{
    {
        std::lock_guard lock(m_mutex);
        m_stats = stats;
        m_error = std::move(message);
        m_done.store(true, std::memory_order_release);
    }
    m_cv.notify_all();
}

WorkPtr completedWork(const WorkStats& stats)
{
    auto work = std::make_shared<PendingWork>();
    work->complete(stats);
    return work;
}

}  // namespace loom::comm
