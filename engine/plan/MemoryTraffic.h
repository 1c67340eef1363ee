#pragma once

// What a layer's compute is made of besides its GEMMs: the bytes its memory-bound kernels move through HBM
// and the attention core as the layout runs it (docs/formulas.md, "Compute"). stageWork (CostModel.h) adds
// these up per virtual stage.

#include "engine/plan/Layout.h"

namespace loom::plan {

// Bytes one layer's memory-bound work (norms, softmax, activation functions, dropout, residuals, FP8 casts)
// moves for one micro-batch on one rank in the forward: its activations (Korthikanti's count, 16-bit) once in
// and once out. With flash attention the s×s scores never reach HBM, so they are not counted; with
// materialised attention they are (the softmax, its mask and dropout read and write them).
double layerTrafficBytes(const Layout& layout);

// The attention core's FLOPs per layer and micro-batch on one rank as the kernel executes them, forward:
// 4·T·s·h/t for materialised attention (the whole s×s product, masked afterwards), half of it with flash
// attention on a causal model, whose kernel skips the blocks above the diagonal. T = b·s/cp.
double attentionCoreFlops(const Layout& layout);

} // namespace loom::plan
