#pragma once

#include <cstddef>
#include <cstdint>

namespace loom::train {

// The numerical building blocks of the GPT model, on one device. The CPU implementation (CpuKernels)
// uses OpenBLAS for matrix products; a CUDA implementation fills the same interface with cuBLAS and kernels.
// All matrices are row-major. Buffers live in the implementation's memory space.
class Kernels {
public:
    virtual ~Kernels() = default;

    // C[M×N] = op(A)·op(B) (+ C when accumulate), op(A) = A or Aᵀ. A is M×K (K×M when transposed),
    // B is K×N (N×K when transposed).
    virtual void gemm(
        bool transA, bool transB, int M, int N, int K, const float* A, const float* B, float* C, bool accumulate)
        = 0;
    // out = LayerNorm(in)·gamma + beta per row of `cols`, 1/std = 1/√(var + eps) (the model's norm_eps);
    // keeps each row's mean and 1/std for backward.
    virtual void layerNormForward(float* out, float* mean, float* rstd, const float* in, const float* gamma,
        const float* beta, int rows, int cols, float eps)
        = 0;
    // dIn += ..., dGamma += ..., dBeta += ... (all accumulate).
    virtual void layerNormBackward(float* dIn, float* dGamma, float* dBeta, const float* dOut, const float* in,
        const float* mean, const float* rstd, const float* gamma, int rows, int cols)
        = 0;
    // GELU, tanh form (GPT-2): 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
    virtual void geluForward(float* out, const float* in, std::size_t n) = 0;
    // dIn = dOut·gelu'(in) (overwrites).
    virtual void geluBackward(float* dIn, const float* dOut, const float* in, std::size_t n) = 0;
    // Causal multi-head attention. qkv: [B·s, 3·H·d] with Q, K, V blocks of H·d columns each (head h at
    // columns h·d); out: [B·s, H·d]; probs: [B, H, s, s] softmax kept for backward.
    virtual void attentionForward(float* out, float* probs, const float* qkv, int B, int s, int H, int d) = 0;
    // dqkv = gradient of qkv (overwrites) from dOut.
    virtual void attentionBackward(
        float* dqkv, const float* dOut, const float* qkv, const float* probs, int B, int s, int H, int d)
        = 0;
    // RMSNorm (Llama): out = in · rstd · gamma per row, rstd = 1/√(mean(in²) + eps); keeps rstd for backward.
    virtual void rmsNormForward(
        float* out, float* rstd, const float* in, const float* gamma, int rows, int cols, float eps)
        = 0;
    // dIn += ..., dGamma += ... (both accumulate).
    virtual void rmsNormBackward(float* dIn, float* dGamma, const float* dOut, const float* in, const float* rstd,
        const float* gamma, int rows, int cols)
        = 0;
    // A norm's input from its output (memory-efficient norms keep only the output): in = ((out − beta)/gamma)
    // / rstd + mean per row; `mean` (RMSNorm) and `beta` (no bias) may be null. gamma must have no zero.
    virtual void normInputFromOutput(float* in, const float* out, const float* mean, const float* rstd,
        const float* gamma, const float* beta, int rows, int cols)
        = 0;
    // SwiGLU (Shazeer 2020): out = silu(gate) · up, silu(x) = x·σ(x).
    virtual void swigluForward(float* out, const float* gate, const float* up, std::size_t n) = 0;
    // dGate and dUp from dOut (both overwrite).
    virtual void swigluBackward(
        float* dGate, float* dUp, const float* dOut, const float* gate, const float* up, std::size_t n)
        = 0;
    // Rotary positions (Su et al. 2021), in place on x [rows, heads·d]: each head's pair (2i, 2i+1) of row r
    // turns by positions[r] · freq[i] (d/2 frequencies: θ^(−2i/d), or Llama 3.1's scaled ones; see
    // ropeFrequencies). `positions` are global token positions (0 .. s−1), so a rank that holds any part of
    // the sequence passes its own.
    virtual void ropeForward(float* x, const std::int32_t* positions, int rows, int heads, int d, const double* freq)
        = 0;
    // The transpose (a turn by the opposite angle), in place on the gradient.
    virtual void ropeBackward(float* dx, const std::int32_t* positions, int rows, int heads, int d, const double* freq)
        = 0;
    // out[r][c] += bias[c]
    virtual void addBias(float* out, const float* bias, int rows, int cols) = 0;
    // dBias[c] += Σ_r dOut[r][c]
    virtual void biasBackward(float* dBias, const float* dOut, int rows, int cols) = 0;
};

} // namespace loom::train
