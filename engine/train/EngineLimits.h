#pragma once

#include "engine/plan/Layout.h"

namespace loom::train {

// What loom-train refuses of a layout's model and optimizer section that the planner accepts, each with a
// sentence naming the field (std::runtime_error). Kept apart from the trainer so that the rule can move to
// the plan library's engine-support rules: bf16 optimizer states (optimizer.exp_avg_dtype,
// exp_avg_sq_dtype: loom-train keeps AdamW's moments in fp32).
void checkOptimizerTrainable(const plan::Layout& layout);

} // namespace loom::train
