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

// Whether the attention core runs as a fused flash kernel at the device's own flash efficiency
// (gemm_efficiency.flash): flash attention, 16-bit inputs, on a GPU whose profile gives that efficiency.
bool usesFlashKernel(const Layout& layout);

// FP8 (layout key "fp8"): how many times faster the linear layers' GEMMs run than at `precision`, the ratio of
// the device's FP8 peak to its 16-bit one (1 without FP8).
double fp8Speedup(const Layout& layout);
// The HBM bytes FP8's casts add per layer and micro-batch in the forward (the backward casts its gradients
// alike): each linear layer's input read in 16 bits and written in 8 (3 bytes an element; current scaling
// reads it once more for the amax, 5), plus the transposed copy the backward's GEMMs read (1). Elements:
// T·(2h + (h + f)/t), the inputs of QKV and FC1 whole and those of the projection and FC2 split over t.
double fp8CastBytes(const Layout& layout);
// What FP8 saves of one layer's activations per micro-batch of `microBatch` sequences: Transformer Engine keeps
// the FP8 casts of the linear layers' inputs for their weight gradients, one byte an element instead of two
// (QKV and FC1 inputs, the attention output, FC2's input); nothing with full recomputation.
double fp8ActivationSavingBytes(const Layout& layout, std::int64_t microBatch);

} // namespace loom::plan
