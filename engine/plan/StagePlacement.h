#pragma once

#include "engine/plan/Layout.h"

#include <algorithm>
#include <cstdint>

namespace loom::plan {

// The inverse of stageOfChunk (Layout.h): the pipeline rank that holds virtual stage vs, and which of its
// chunks vs is. Interleaved: chunk·pp + rank (Megatron-LM's order); in a V (ZB-V, DualPipe) rank r holds
// r and 2·pp − 1 − r, so the last virtual stage, with the LM head, is on rank 0.
inline std::int64_t rankOfStage(ScheduleKind kind, std::int64_t pp, std::int64_t vs)
{
    pp = std::max<std::int64_t>(1, pp);
    return vShaped(kind) && vs >= pp ? 2 * pp - 1 - vs : vs % pp;
}

inline std::int64_t chunkOfStage(ScheduleKind kind, std::int64_t pp, std::int64_t vs)
{
    pp = std::max<std::int64_t>(1, pp);
    return vShaped(kind) ? (vs >= pp ? 1 : 0) : vs / pp;
}

} // namespace loom::plan
