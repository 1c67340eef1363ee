#pragma once

#include "engine/plan/Layout.h"

#include <cstdint>

namespace loom::plan {

// The FLOPs of one optimizer step, the one count that the planner, loom-train, `loom trace stats`, the
// run view and the lessons use (docs/formulas.md, "FLOPs, MFU and HFU"):
//  - model FLOPs: what the model needs, whatever the layout: three passes (forward, two backward GEMMs)
//    of every block's matrix products and attention, plus the LM head (modelFlops without recomputation;
//    Narayanan et al. eq. 3's 72·B·s·l·h² form for GPT blocks). MFU divides these, so it moves with
//    tokens/s;
//  - hardware FLOPs: the model FLOPs plus what memory.recompute makes the devices compute again: the whole
//    forward of every block with full recomputation (eq. 3's 96·B·s·l·h² form), the attention core
//    (4·s·h per token and block: the scores and their use) with selective recomputation. HFU divides these.
struct StepFlops {
    double model = 0;
    double hardware = 0;
};
StepFlops stepFlops(const ModelSpec& model, std::int64_t globalBatch, Recompute recompute);
StepFlops stepFlops(const Layout& layout);

} // namespace loom::plan
