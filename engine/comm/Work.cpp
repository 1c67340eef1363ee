#include "engine/comm/Work.h"

#include <algorithm>

namespace loom::comm {

void PendingWork::wait()
{
    std::unique_lock lock(m_mutex);
    m_cv.wait(lock, [this] { return m_done.load(std::memory_order_acquire); });
    if (m_error)
        throw CommError(*m_error);
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

namespace {
class AllOf final : public Work {
public:
    explicit AllOf(std::vector<WorkPtr> parts)
        : m_parts(std::move(parts))
    {
    }
    bool isCompleted() override
    {
        for (auto& p : m_parts)
            if (!p->isCompleted())
                return false;
        return true;
    }
    void wait() override
    {
        for (auto& p : m_parts)
            p->wait();
    }
    std::optional<std::string> error() override
    {
        for (auto& p : m_parts)
            if (auto e = p->error())
                return e;
        return std::nullopt;
    }
    WorkStats stats() override
    {
        WorkStats s = m_parts.front()->stats();
        for (std::size_t i = 1; i < m_parts.size(); ++i) {
            const WorkStats o = m_parts[i]->stats();
            s.bytes += o.bytes;
            s.wireBytes += o.wireBytes;
            s.startNs = std::min(s.startNs, o.startNs);
            s.endNs = std::max(s.endNs, o.endNs);
        }
        return s;
    }

private:
    std::vector<WorkPtr> m_parts;
};
} // namespace

WorkPtr allOf(std::vector<WorkPtr> parts)
{
    return std::make_shared<AllOf>(std::move(parts));
}

WorkPtr completedWork(const WorkStats& stats)
{
    auto work = std::make_shared<PendingWork>();
    work->complete(stats);
    return work;
}

} // namespace loom::comm
