#pragma once

#include "engine/trace/TraceEvent.h"

#include <mutex>
#include <vector>

namespace loom::trace {

// Collects one rank's events and the groups they refer to. Thread-safe: the communication layer records
// from its worker threads while the training loop records compute. take() hands the events over (the
// telemetry stream drains it once per step).
class TraceRecorder {
public:
    explicit TraceRecorder(std::int32_t rank)
        : m_rank(rank)
    {
    }

    std::int32_t rank() const { return m_rank; }
    void setEnabled(bool enabled);
    bool enabled() const;

    // The training step events without one are attributed to (communication knows no steps).
    void setStep(std::int32_t step);
    // Records `event` with this recorder's rank (and its lane derived from the kind).
    void record(TraceEvent event);
    // Registers a group and returns its id (stable for the recorder's lifetime).
    std::int32_t addGroup(GroupKind kind, std::vector<std::int32_t> ranks, std::string name);

    std::vector<TraceEvent> take();
    std::vector<TraceEvent> snapshot() const;
    std::vector<GroupInfo> groups() const;

private:
    const std::int32_t m_rank;
    mutable std::mutex m_mutex;
    bool m_enabled = true;
    std::int32_t m_step = -1;
    std::vector<TraceEvent> m_events;
    std::vector<GroupInfo> m_groups;
};

} // namespace loom::trace
