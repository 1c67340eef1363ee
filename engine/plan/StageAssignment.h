#pragma once

#include "engine/plan/Layout.h"

#include <cstdint>
#include <string>
#include <vector>

namespace loom::plan {

// The result of moving transformer blocks to a pipeline stage: the new ranges, or why it cannot be done.
struct StageAssignment {
    std::vector<StageRange> ranges; // empty when refused
    std::string refusal; // a sentence naming the problem and the fix; empty when accepted
    bool ok() const { return refusal.empty(); }
};

// Assigns blocks [first, last] to virtual stage `stage` of `ranges` (contiguous, in order, covering
// 0..layers-1): the stage grows to the hull of its range and the dropped one (stages hold contiguous
// blocks, so blocks in between move with them), and the other stages give up what it takes while keeping
// at least one block each, moving their boundaries as little as possible. This is what dropping a layer
// range on a device of the topology map does. Refused (with the reason) when the stages before or after
// would be left without a block.
StageAssignment assignBlocksToStage(
    const std::vector<StageRange>& ranges, std::int64_t stage, std::int64_t first, std::int64_t last);

// The virtual stage of pipeline rank `pipelineRank` (one of its vpp chunks) closest to blocks [first, last],
// the one a drop on that rank's devices targets.
std::int64_t nearestChunkStage(const Layout& layout, std::int64_t pipelineRank, std::int64_t first, std::int64_t last);

} // namespace loom::plan
