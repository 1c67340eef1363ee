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

// Bytes the cross-entropy loss moves over the T·V/t logits of one micro-batch on the last stage (GPU
// clusters), in the passes of Megatron-Core's vocab-parallel cross entropy with its fused steps: forward, the
// 16-bit logits read and widened to fp32 (2 + 4), the maximum (4), the subtraction, exponential and sum in one
// pass writing the exponentials (4 + 4), their division into the softmax kept for the backward (4 + 4): 26
// bytes a logit; backward, the gradient from the softmax in one pass (4 + 4) and narrowed back to 16 bits for
// the head's GEMMs (4 + 2): 14. (The CPU engine's loss is inside its calibrated figures.)
struct LossTraffic {
    double forward = 0, backward = 0;
};
LossTraffic lossTrafficBytes(const Layout& layout);

// Ring attention's merges per layer and micro-batch on one rank (cp > 1, GPU clusters): each of the cp steps
// writes a partial output that is read (2 bytes an element) and folded into the running output (read and
// written, 2 + 2), the softmax statistics beside it; the backward folds each step's dQ into its accumulator
// and each step's dK and dV into theirs alike. Elements: T·h/t for the output and dQ, 2·T·kv·d_head/t for dK
// and dV. Forward 6·cp·T·h/t bytes, backward 6·cp·(T·h + 2·T·kv·d_head)/t.
LossTraffic ringMergeBytes(const Layout& layout);

// The attention core's FLOPs per layer and micro-batch on one rank as the kernel executes them, forward:
// 4·T·s·h/t for materialised attention (the whole s×s product, masked afterwards), half of it with flash
// attention on a causal model, whose kernel skips the blocks above the diagonal. T = b·s/cp.
double attentionCoreFlops(const Layout& layout);

// Whether the attention core runs as a fused flash kernel at the device's own flash efficiency
// (gemm_efficiency.flash): flash attention, 16-bit inputs, on a GPU whose profile gives that efficiency.
bool usesFlashKernel(const Layout& layout);

// How far a layer's GEMMs on one TP rank fall below the device's ceiling, FLOP-weighted over its four products
// (QKV h × (h + 2·kv)/t, the projection h/t × h, FC1 h × f/t (2f/t with SwiGLU), FC2 f/t × h), each on the
// efficiency curve at its own thinner dimension and `rows` tokens: the harmonic mean of
// w/(w + half_width) · r/(r + half_rows) weighted by each product's FLOPs. Tensor parallelism makes the projection
// thin (h/t) but leaves FC1 and FC2 wide (f/t of 7,168 for Llama 3 70B at tp 4). MoE blocks: at h/t.
double layerGemmShape(const Layout& layout, const DeviceSpec& device, double rows);

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
