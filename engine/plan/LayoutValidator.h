#pragma once

#include "engine/plan/CostModel.h"
#include "engine/plan/Diagnostics.h"
#include "engine/plan/Layout.h"

#include <cstdint>

namespace loom::plan {

// The most ranks Loom plans for; larger grids are refused before anything allocates per rank.
constexpr std::int64_t kMaxRanks = 1 << 20;

// The semantic rules of a layout (the JSON reader has already checked types and ranges). Every rule that
// fails adds one error naming the field, the value and a fix; warnings note legal but doubtful choices.
// `alreadyReported` holds problems found while reading: rules that involve a field with an error there are
// skipped, so one mistake is not reported twice. Used on layouts from files and on layouts the GUI edits.
Diagnostics validateLayout(const Layout& layout, const Diagnostics& alreadyReported = {});

// The memory-fit warning of validateLayout, for callers that already have the layout's prediction.
void warnIfItDoesNotFit(const Layout& layout, const Prediction& prediction, Diagnostics& diagnostics);

// The same rules without the memory-fit check (which runs the planner): microseconds, for editors that
// test many candidate values.
Diagnostics validateRules(const Layout& layout);

// Tensor-parallel degrees that divide the heads, KV heads, ffn_hidden and the padded vocabulary.
std::vector<std::int64_t> validTensorParallelDegrees(const ModelSpec& model);

} // namespace loom::plan
