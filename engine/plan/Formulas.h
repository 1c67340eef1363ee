#pragma once

// The closed forms the cost model is built from, each in docs/formulas.md.

#include "engine/plan/ClusterSpec.h"
#include "engine/plan/Layout.h"

#include <cstdint>
#include <string>

namespace loom::plan {

// Model FLOPs of one step (Narayanan et al., SC21, eq. 3): 96·B·s·l·h²·(1 + s/6h + V/16lh) with full
// recomputation, 72·B·s·l·h²·(1 + s/6h + V/12lh) without.
double megatronModelFlops(const ModelSpec& model, std::int64_t globalBatch, bool fullRecompute);
// The same count for any block shape (grouped KV heads, SwiGLU): per token and layer 2 FLOPs per matmul
// weight plus 4·s·h for the attention scores and their use, three times (forward, two backward GEMMs; four
// with full recomputation), plus 6·h·V for the LM head. Equals megatronModelFlops for GPT blocks (ffn 4h).
double modelFlops(const ModelSpec& model, std::int64_t globalBatch, bool fullRecompute);
// Weights of one block that take part in matrix multiplications (no biases, no norms):
// h·(h + 2·kv·d_head) + h·h + (2 or 3 for SwiGLU)·h·f. For a mixture of experts, the weights a token
// goes through, averaged over the blocks: MoE blocks count the router (h·E) and top_k experts of f_moe.
double blockMatmulParameters(const ModelSpec& model);

// All-to-all over n members, S the bytes each member sends in all (its whole buffer, its own block
// included, as nccl-tests counts): (n-1)·α + (n-1)/n·S/β (bus factor (n-1)/n: the own block stays).
double allToAllSeconds(double bytes, std::int64_t ranks, const LinkSpec& link);
// The buffer one MoE dispatch (or combine) all-to-all moves per member for one micro-batch: every token
// once per chosen expert, b·s·top_k·h values of `activationBytes`.
double moeAllToAllBytes(const ModelSpec& model, std::int64_t microBatch, double activationBytes);

// What a zero-bubble schedule's deferred W keeps of block `layer` for each token of a micro-batch (this TP
// rank's share): loom-train copies the input X (K wide) and the output gradient dY (N wide) of every weight
// product dW += Xᵀ·dY from B to W, so Σ (K + N) over the block's weight matrices, in floats. GPT-2 form (fused
// QKV, GELU MLP): 4h + (4h + 2f)/t. Llama form: q, k, v, out, and gate, up, down (fc, proj without SwiGLU),
// each column-parallel matrix N/t, each row-parallel K/t. MoE blocks: the router (h + E) and each token's
// top_k experts' matrices whole (dropless: capacity only lowers it), plus the shared experts.
double deferredWeightFloatsPerToken(const ModelSpec& model, std::int64_t layer, std::int64_t tp);

// Activation bytes of one transformer layer for one micro-batch (Korthikanti et al. 2022), 16-bit
// activations: s·b·h·(34 + 5as/h) with no parallelism; s·b·h·(10 + 24/t + 5as/(h·t)) with tensor
// parallelism; s·b·h/t·(34 + 5as/h) with sequence parallelism too; s·b·h·(10 + 24/t) with selective
// recomputation (34·s·b·h/t with sequence parallelism); 2·s·b·h with full recomputation.
double activationBytesPerLayer(const ModelSpec& model, std::int64_t microBatch, std::int64_t tp, Recompute recompute,
    bool sequenceParallel = false);

// The activation count for the layout's block shape and choices, in units of s·b·h (16-bit): `replicated`
// is what every tensor-parallel rank keeps whole without sequence parallelism (norm inputs, the inputs of
// the attention and MLP blocks, dropout masks), `split` what tensor parallelism divides by t, `scores` the
// coefficient of a·s/h (the s×s attention scores: 5 with dropout, 2 without). GPT form (GELU MLP, dropout):
// 10, 24·(f/4h), 5 with kv = a; Llama form (SwiGLU, no dropout): 8, 4 + 4·kv/a + 6f/h, 2. Memory-efficient
// norms (`efficientNorm`) keep their outputs, which the products keep anyway, and not their inputs: 4 less.
struct ActivationTerms {
    double replicated = 0, split = 0, scores = 0;
};
ActivationTerms activationTerms(const ModelSpec& model, bool efficientNorm = false);
// Bytes one layer keeps for one micro-batch: s·b·h·(replicated/(t if sp) + split/t) + s·b·h·scores·a·s/(h·t)
// when the scores are materialised and not recomputed; 2·s·b·h (/t with sp) with full recomputation.
double layerActivationBytes(const ModelSpec& model, std::int64_t microBatch, std::int64_t tp, bool sp,
    Attention attention, Recompute recompute, bool efficientNorm = false);
// The same count as a formula in s, b, h, a and t with the model's coefficients filled in, as the workbench
// prints it (Explain, lessons): "s·b·h·(8 + 15.75/t + 2·a·s/(h·t))", "2·s·b·h/t". Every place that shows
// the formula takes it from here, so that it is the one layerActivationBytes computes.
std::string layerActivationFormula(
    const ModelSpec& model, bool sp, Attention attention, Recompute recompute, bool efficientNorm = false);

// Model-state bytes per parameter on one device under ZeRO stage `zero` over `dp` ranks (Rajbhandari et al.
// 2020): 16-bit weights and gradients (2 + 2) and K = 12 bytes of fp32 Adam state; fp32 training 4 + 4 + 8.
// Stage 1 divides the optimizer state by dp, stage 2 the gradients too, stage 3 the weights too.
struct ModelStateBytes {
    double params = 0, grads = 0, optimizer = 0;
    double total() const { return params + grads + optimizer; }
};
ModelStateBytes modelStateBytesPerParameter(Precision precision, int zero, std::int64_t dp);
// The same with the optimizer section's state dtypes (Megatron-LM's precision-aware optimizer): weights at
// the training precision; gradients at main_grads_dtype (absent: the training precision, as before the field
// existed; Megatron-Core's own default for bf16 is fp32); the optimizer a master copy at main_params_dtype (none
// for fp32 training, whose weights are the master) plus exp_avg and exp_avg_sq at theirs. bf16 training
// with fp32 gradients: 2 + 4 + 12 = 18 bytes (Megatron's distributed-optimizer table).
ModelStateBytes modelStateBytesPerParameter(
    Precision precision, const OptimizerSpec& optimizer, int zero, std::int64_t dp);
// FP8 delayed scaling's state of one block (Transformer Engine): its four FP8 linear modules (QKV,
// projection, FC1, FC2) each keep an amax history of kFp8AmaxHistory fp32 values for each of their five FP8
// tensors (input, weight and output forward; output and input gradients backward), and a scale and its
// inverse for each: 4·5·(history + 2)·4 bytes.
inline constexpr int kFp8AmaxHistory = 1024; // TE's DelayedScaling default, and NeMo's fp8_amax_history_len
double fp8ScalingStateBytesPerLayer();
// Bytes per gradient value as kept and reduced over DP (main_grads_dtype, or its default above).
double gradientBytesPerValue(Precision precision, const OptimizerSpec& optimizer);

// α-β ring collectives over n members whose slowest link is `link` (nccl-tests' bus-bandwidth factors):
// all-reduce 2(n-1)·α + 2(n-1)/n·S/β; all-gather and reduce-scatter (n-1)·α + (n-1)/n·S/β, S the whole array.
double ringAllReduceSeconds(double bytes, std::int64_t ranks, const LinkSpec& link);
double ringAllGatherSeconds(double bytes, std::int64_t ranks, const LinkSpec& link);

// Ring attention (context parallelism over cp ranks) for one layer and one micro-batch of b sequences on one
// rank: a K/V block is the keys and values of the rank's s/cp tokens, 2·b·(s/cp)·kv·d_head/t values of
// `bytesPerValue`; the forward sends cp-1 blocks to the next CP rank, the backward cp-1 K/V blocks and cp
// dK/dV accumulators (each returns to its owner). Zero blocks when cp = 1.
struct RingAttentionVolume {
    double blockBytes = 0;
    std::int64_t forwardBlocks = 0, backwardBlocks = 0;
    double forwardBytes() const { return blockBytes * double(forwardBlocks); }
    double backwardBytes() const { return blockBytes * double(backwardBlocks); }
};
RingAttentionVolume ringAttentionVolume(
    const ModelSpec& model, std::int64_t microBatch, std::int64_t tp, std::int64_t cp, double bytesPerValue);
// The seconds of one layer's ring exchange that its attention does not hide, with `step` the time of one
// block on the CP link (α + block/β) and `attention` the attention compute of the layer on this rank (each of
// the cp ring steps computes a cp-th of it): forward (cp-1)·max(0, step - attention/cp); backward, where a
// step carries a K/V block and a dK/dV accumulator, max(0, step - a) + (cp-2)·max(0, 2·step - a) +
// max(0, step - a) + step (the last accumulator's trip home), a = attention/cp.
double ringExposedForward(std::int64_t cp, double step, double attention);
double ringExposedBackward(std::int64_t cp, double step, double attention);

} // namespace loom::plan
