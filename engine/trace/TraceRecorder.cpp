#include "engine/trace/TraceRecorder.h"

namespace loom::trace {

void TraceRecorder::setEnabled(bool enabled)
{
    std::lock_guard lock(m_mutex);
    m_enabled = enabled;
}

bool TraceRecorder::enabled() const
{
    std::lock_guard lock(m_mutex);
    return m_enabled;
}

void TraceRecorder::setStep(std::int32_t step)
{
    std::lock_guard lock(m_mutex);
    m_step = step;
}

void TraceRecorder::record(TraceEvent event)
{
    event.rank = m_rank;
    event.lane = laneOf(event.kind);
    std::lock_guard lock(m_mutex);
    if (event.step < 0)
        event.step = m_step;
    if (m_enabled)
        m_events.push_back(std::move(event));
}

std::int32_t TraceRecorder::addGroup(GroupKind kind, std::vector<std::int32_t> ranks, std::string name)
{
    std::lock_guard lock(m_mutex);
    const auto id = static_cast<std::int32_t>(m_groups.size());
    m_groups.push_back({ id, kind, std::move(ranks), std::move(name) });
    return id;
}

std::vector<TraceEvent> TraceRecorder::take()
{
    std::lock_guard lock(m_mutex);
    std::vector<TraceEvent> out;
    out.swap(m_events);
    return out;
}

std::vector<TraceEvent> TraceRecorder::snapshot() const
{
    std::lock_guard lock(m_mutex);
    return m_events;
}

std::vector<GroupInfo> TraceRecorder::groups() const
{
    std::lock_guard lock(m_mutex);
    return m_groups;
}

} // namespace loom::trace
