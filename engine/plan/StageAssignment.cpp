#include "engine/plan/StageAssignment.h"

#include <algorithm>
#include <cstdlib>

namespace loom::plan {

using std::to_string;

StageAssignment assignBlocksToStage(
    const std::vector<StageRange>& ranges, std::int64_t stage, std::int64_t first, std::int64_t last)
{
    StageAssignment out;
    const auto count = static_cast<std::int64_t>(ranges.size());
    if (count == 0 || stage < 0 || stage >= count) {
        out.refusal = "there is no pipeline stage " + to_string(stage) + "; the layout has " + to_string(count);
        return out;
    }
    const std::int64_t layers = ranges.back().last + 1;
    if (first > last)
        std::swap(first, last);
    if (first < 0 || last >= layers) {
        out.refusal = "blocks " + to_string(first) + "–" + to_string(last) + " are outside the model's "
            + to_string(layers) + " blocks";
        return out;
    }
    // Boundaries: stage i holds [cut[i], cut[i+1]).
    std::vector<std::int64_t> cut(static_cast<std::size_t>(count + 1));
    for (std::int64_t i = 0; i < count; ++i)
        cut[static_cast<std::size_t>(i)] = ranges[static_cast<std::size_t>(i)].first;
    cut.back() = layers;
    const auto s = static_cast<std::size_t>(stage);
    const std::int64_t newFirst = std::min(first, cut[s]);
    const std::int64_t newEnd = std::max(last + 1, cut[s + 1]);
    if (newFirst < stage) {
        out.refusal = "stage " + to_string(stage) + " cannot start at block " + to_string(newFirst) + ": the "
            + to_string(stage) + " stage(s) before it need at least one block each; drop blocks from "
            + to_string(stage) + " onwards, or drop the earlier blocks on an earlier stage";
        return out;
    }
    if (layers - newEnd < count - 1 - stage) {
        out.refusal = "stage " + to_string(stage) + " cannot end at block " + to_string(newEnd - 1) + ": the "
            + to_string(count - 1 - stage) + " stage(s) after it need at least one block each; drop blocks up to "
            + to_string(layers - (count - stage)) + ", or drop the later blocks on a later stage";
        return out;
    }
    cut[s] = newFirst;
    cut[s + 1] = newEnd;
    for (std::int64_t i = stage - 1; i >= 1; --i) {
        auto& c = cut[static_cast<std::size_t>(i)];
        c = std::min(c, cut[static_cast<std::size_t>(i + 1)] - 1);
    }
    for (std::int64_t i = stage + 2; i < count; ++i) {
        auto& c = cut[static_cast<std::size_t>(i)];
        c = std::max(c, cut[static_cast<std::size_t>(i - 1)] + 1);
    }
    out.ranges.resize(static_cast<std::size_t>(count));
    for (std::int64_t i = 0; i < count; ++i)
        out.ranges[static_cast<std::size_t>(i)]
            = { cut[static_cast<std::size_t>(i)], cut[static_cast<std::size_t>(i + 1)] - 1 };
    return out;
}

std::int64_t nearestChunkStage(const Layout& layout, std::int64_t pipelineRank, std::int64_t first, std::int64_t last)
{
    const auto ranges = layout.stageRanges();
    const std::int64_t pp = layout.parallel.pp;
    std::int64_t best = pipelineRank, bestDistance = -1;
    for (std::int64_t vs = pipelineRank; vs < static_cast<std::int64_t>(ranges.size()); vs += pp) {
        const auto& r = ranges[static_cast<std::size_t>(vs)];
        const std::int64_t distance = last < r.first ? r.first - last : first > r.last ? first - r.last : 0;
        if (bestDistance < 0 || distance < bestDistance) {
            best = vs;
            bestDistance = distance;
        }
    }
    return best;
}

} // namespace loom::plan
