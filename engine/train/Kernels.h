#pragma once

#include <cstddef>

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
    // out = LayerNorm(in)·gamma + beta per row of `cols`; keeps each row's mean and 1/std for backward.
    virtual void layerNormForward(float* out, float* mean, float* rstd, const float* in, const float* gamma,
        const float* beta, int rows, int cols)
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
    // out[r][c] += bias[c]
    virtual void addBias(float* out, const float* bias, int rows, int cols) = 0;
    // dBias[c] += Σ_r dOut[r][c]
    virtual void biasBackward(float* dBias, const float* dOut, int rows, int cols) = 0;
};

} // namespace loom::train
