#pragma once

#include "engine/train/Kernels.h"

namespace loom::train {

// Kernels on the CPU: OpenBLAS cblas_sgemm for matrix products, plain loops for the rest (the Llama
// kernels, RMSNorm, SwiGLU and rotary positions, in LlamaKernels.cpp).
class CpuKernels final : public Kernels {
public:
    void gemm(bool transA, bool transB, int M, int N, int K, const float* A, const float* B, float* C,
        bool accumulate) override;
    void layerNormForward(float* out, float* mean, float* rstd, const float* in, const float* gamma, const float* beta,
        int rows, int cols, float eps) override;
    void layerNormBackward(float* dIn, float* dGamma, float* dBeta, const float* dOut, const float* in,
        const float* mean, const float* rstd, const float* gamma, int rows, int cols) override;
    void geluForward(float* out, const float* in, std::size_t n) override;
    void geluBackward(float* dIn, const float* dOut, const float* in, std::size_t n) override;
    void attentionForward(float* out, float* probs, const float* qkv, int B, int s, int H, int d) override;
    void attentionBackward(
        float* dqkv, const float* dOut, const float* qkv, const float* probs, int B, int s, int H, int d) override;
    void rmsNormForward(
        float* out, float* rstd, const float* in, const float* gamma, int rows, int cols, float eps) override;
    void rmsNormBackward(float* dIn, float* dGamma, const float* dOut, const float* in, const float* rstd,
        const float* gamma, int rows, int cols) override;
    void normInputFromOutput(float* in, const float* out, const float* mean, const float* rstd, const float* gamma,
        const float* beta, int rows, int cols) override;
    void swigluForward(float* out, const float* gate, const float* up, std::size_t n) override;
    void swigluBackward(
        float* dGate, float* dUp, const float* dOut, const float* gate, const float* up, std::size_t n) override;
    void ropeForward(float* x, const std::int32_t* positions, int rows, int heads, int d, const double* freq) override;
    void ropeBackward(
        float* dx, const std::int32_t* positions, int rows, int heads, int d, const double* freq) override;
    void addBias(float* out, const float* bias, int rows, int cols) override;
    void biasBackward(float* dBias, const float* dOut, int rows, int cols) override;
};

} // namespace loom::train
