#pragma once

#include "engine/device/Device.h"
#include "engine/device/KernelMath.h"
#include "engine/train/Kernels.h"

#include <cstdint>
#include <memory>

namespace loom::device {

// The inputs of the matrix products. Activations and parameters stay fp32 (the master weights); with Bf16
// or Fp16 each GEMM rounds its two inputs to 16 bits (KernelMath.h's rounding) into scratch and accumulates
// in fp32 (CUBLAS_COMPUTE_32F), as mixed-precision training does. Fp32 is strict fp32 (no TF32), so a GPU
// run can be held to the CPU's losses.
enum class GemmPrecision { Fp32, Bf16, Fp16 };

// "fp32", "bf16", "fp16" (the layout's `precision` spelling).
const char* gemmPrecisionName(GemmPrecision p);

// What cuBLASLt applies to a product before writing it (row-major columns of C): nothing, + bias[c], or
// GELU(· + bias[c]) with the pre-activation kept in `aux` for the backward. cuBLASLt's GELU is taken to be
// the tanh form (GPT-2's; XLA hands only its approximate GELU to this epilogue): loom-device-check compares
// it with the CPU's tanh GELU, so another form would show there.
enum class Epilogue { None, Bias, BiasGelu };

// The Kernels interface on one CUDA GPU: every pointer is device memory of `device` (freq and positions
// included). Work is queued on `stream` and returns before it is done; synchronise through the Device.
// GEMMs go through cuBLASLt, attention through cuBLAS strided-batched products and fused causal softmax
// kernels (below), the rest through kernels whose arithmetic is KernelMath.h's.
//
// Attention: the Kernels contract keeps the softmax probabilities [B, H, s, s] for the backward, so this is
// the "cuBLAS batched products with a fused softmax" form, not a flash-style kernel: Q·Kᵀ per (sequence,
// head) batch, one warp per row for the masked softmax, then P·V; the backward is the CPU's (dP, dV,
// softmax backward, dQ, dK) in the same batched products. With 16-bit precision those batched products use
// cuBLAS's fp32-in / 16-bit-multiply compute types (CUBLAS_COMPUTE_32F_FAST_16BF / _16F). A flash kernel
// would save the s×s memory but needs a different contract (keep the row log-sum-exp instead of P).
class CudaKernels final : public train::Kernels {
public:
    // `stream` as from device.createStream() (Stream{} for the default stream). Throws DeviceError when
    // cuBLAS cannot start.
    CudaKernels(Device& device, GemmPrecision precision, Stream stream = {});
    ~CudaKernels() override;
    CudaKernels(const CudaKernels&) = delete;
    CudaKernels& operator=(const CudaKernels&) = delete;

    GemmPrecision precision() const { return m_precision; }
    Stream stream() const { return m_stream; }

    void gemm(bool transA, bool transB, int M, int N, int K, const float* A, const float* B, float* C,
        bool accumulate) override;
    // The same with a cuBLASLt epilogue (not accumulating): C = epi(op(A)·op(B)); bias has N entries; aux
    // (BiasGelu only, may be null) receives op(A)·op(B) + bias, M×N; cuBLASLt wants N a multiple of 8 then.
    void gemmEpilogue(bool transA, bool transB, int M, int N, int K, const float* A, const float* B, float* C,
        Epilogue epilogue, const float* bias, float* aux);
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

    // The LM head's softmax cross-entropy over one vocab slice (columns [first, first + Vl) of `vocab`
    // words, padding past it), fused: one pass per row gives max[t], sum[t] (of exp(z − max)) and
    // targetShift[t] (target logit − max, where the target is in the slice; untouched otherwise); with
    // tensor parallelism the caller combines the slices' (max, sum) before the gradient pass.
    void crossEntropyStats(const float* z, int T, int Vl, std::int64_t first, std::int64_t vocab,
        const std::int32_t* targets, float* max, float* sum, float* targetShift);
    // In place: z becomes (softmax − onehot(target))·scale with the row's (global) max and sum.
    void crossEntropyGradient(float* z, int T, int Vl, std::int64_t first, std::int64_t vocab, const float* max,
        const float* sum, const std::int32_t* targets, float scale);

    // AdamW over n elements (KernelMath.h's adamwUpdate, compiled without fused multiply-adds so the GPU
    // gives the CPU's bits); decay where decayMask[i] is 1.
    void adamw(float* params, const float* grads, float* m, float* v, const std::uint8_t* decayMask, std::size_t n,
        const math::AdamStep& step);
    // Σ x² in double (for the global gradient norm); synchronises the stream to return it.
    double sumOfSquares(const float* x, std::size_t n);
    // fp16 loss scaling: grads *= invScale, and whether any was inf or NaN (synchronises).
    bool unscaleAndCheck(float* grads, std::size_t n, float invScale);
    // Rounding to 16 bits and back (the GEMM inputs; also the NCCL codecs' on-device form).
    void toBf16(std::uint16_t* out, const float* in, std::size_t n);
    void toFp16(std::uint16_t* out, const float* in, std::size_t n);
    void fromBf16(float* out, const std::uint16_t* in, std::size_t n);
    void fromFp16(float* out, const std::uint16_t* in, std::size_t n);

private:
    struct Scratch;
    void matmul(bool transA, bool transB, int M, int N, int K, const float* A, const float* B, float* C, float beta,
        Epilogue epilogue, const float* bias, float* aux);
    void rowMajorBatched(bool transA, bool transB, int M, int N, int K, float alpha, const float* A, int lda,
        long long strideA, const float* B, int ldb, long long strideB, float* C, int ldc, long long strideC, int batch);
    std::uint16_t* half(int which, const float* in, std::size_t n);

    Device& m_device;
    GemmPrecision m_precision;
    Stream m_stream;
    void* m_blas = nullptr; // cublasHandle_t
    void* m_blasLt = nullptr; // cublasLtHandle_t
    std::unique_ptr<Scratch> m_scratch;
};

} // namespace loom::device
