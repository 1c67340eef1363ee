#pragma once

#include "engine/plan/Schedule.h"
#include "engine/trace/TraceEvent.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace loom::plan {

// Seconds one micro-batch spends in one virtual stage: its compute plus the communication that blocks the
// compute stream (tensor-parallel collectives).
struct StageCost {
    double forward = 0, backward = 0; // seconds per micro-batch, compute and TP communication
    double forwardTp = 0, backwardTp = 0; // of which TP collectives
};

// What the replay measured on one pipeline rank.
struct RankTimes {
    double busy = 0, tp = 0, end = 0, lastBackwardStart = 0, lastBackwardEnd = 0;
};

// How the replay labels the events it records: the global rank of pipeline rank r's representative
// (tp = 0, dp = 0) and the bytes of one point-to-point activation transfer.
struct EventNaming {
    std::function<std::int32_t(std::int64_t pipelineRank)> rankOf;
    std::uint64_t sendBytes = 0;
};

// Replays `schedule` on one representative rank per pipeline stage: each op starts when its rank is free
// and its input has arrived (`transfer` seconds after the op that produced it), and lasts its stage's cost.
// Runs in time linear in the number of ops. When `events` is given, appends one compute event per op and
// one send event per transfer, source = simulated.
std::vector<RankTimes> replaySchedule(const Schedule& schedule, const std::vector<StageCost>& cost, double transfer,
    const EventNaming* naming = nullptr, std::vector<trace::TraceEvent>* events = nullptr);

} // namespace loom::plan
