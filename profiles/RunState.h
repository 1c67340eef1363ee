#pragma once

#include <QString>
#include <QStringView>

#include <array>
#include <optional>

namespace loom::profiles {

// Where a run is: going, or how it ended. The launcher, the store and the views speak this enum; only the
// store's `runs.state` column (whose CHECK lists the same words) and text output use toString().
enum class RunState {
    Running, // the engine is going (or Loom died while it was: see Interrupted)
    Finished, // every step done and the end frame seen
    Failed, // the engine stopped early; the run's exit cause says why
    Cancelled, // the user stopped it (SIGTERM to every rank, checkpoint saved when asked)
    Interrupted, // Loom stopped while the run was going (found "running" at the next start)
};

inline constexpr std::array<RunState, 5> kRunStates
    = { RunState::Running, RunState::Finished, RunState::Failed, RunState::Cancelled, RunState::Interrupted };

// "running", "finished", "failed", "cancelled", "interrupted": the text in the database and in output.
inline QString toString(RunState state)
{
    switch (state) {
    case RunState::Running:
        return QStringLiteral("running");
    case RunState::Finished:
        return QStringLiteral("finished");
    case RunState::Failed:
        return QStringLiteral("failed");
    case RunState::Cancelled:
        return QStringLiteral("cancelled");
    case RunState::Interrupted:
        return QStringLiteral("interrupted");
    }
    return QStringLiteral("failed");
}

inline std::optional<RunState> runStateFromString(QStringView text)
{
    for (RunState s : kRunStates)
        if (text == toString(s))
            return s;
    return std::nullopt;
}

// Whether the run has ended (any state but Running).
inline bool isOver(RunState state)
{
    return state != RunState::Running;
}

// Whether it ended badly (the views mark these in red).
inline bool endedBadly(RunState state)
{
    return state == RunState::Failed || state == RunState::Interrupted;
}

} // namespace loom::profiles
