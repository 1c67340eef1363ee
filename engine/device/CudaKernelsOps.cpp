// CudaKernels: attention (cuBLAS strided-batched products around the fused causal softmax), the
// element-wise and per-row kernels, the loss, the optimizer and the 16-bit conversions. The products'
// plumbing (cuBLASLt) is in CudaKernels.cpp.
#include "engine/device/CudaKernels.h"

#include "engine/device/CudaKernelsScratch.h"
#include "engine/device/CudaLaunch.h"

#include <cuda_runtime.h>

#include <cmath>

namespace loom::device {

namespace {

void checkLaunch(const Device& device, const char* kernel)
{
    checkCuda(cudaGetLastError(), device.name(), kernel);
}

} // namespace

// Per sequence b, batched over the H heads (head h's Q, K, V are d columns apart in the qkv rows):
// P = softmax(Q·Kᵀ/√d) with the mask, then Y = P·V.
void CudaKernels::attentionForward(float* out, float* probs, const float* qkv, int B, int s, int H, int d)
{
    const int width = 3 * H * d, hd = H * d;
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    const long long ss = static_cast<long long>(s) * s;
    for (int b = 0; b < B; ++b) {
        const float* Q = qkv + static_cast<std::size_t>(b) * s * width;
        const float* K = Q + hd;
        const float* V = Q + 2 * hd;
        float* P = probs + static_cast<std::size_t>(b) * H * ss;
        float* Y = out + static_cast<std::size_t>(b) * s * hd;
        rowMajorBatched(false, true, s, s, d, scale, Q, width, d, K, width, d, P, s, ss, H);
        launchCausalSoftmax(P, H * s, s, m_stream.handle);
        checkLaunch(m_device, "causal softmax kernel");
        rowMajorBatched(false, false, s, d, s, 1.0f, P, s, ss, V, width, d, Y, hd, d, H);
    }
}

void CudaKernels::attentionBackward(
    float* dqkv, const float* dOut, const float* qkv, const float* probs, int B, int s, int H, int d)
{
    const int width = 3 * H * d, hd = H * d;
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    const long long ss = static_cast<long long>(s) * s;
    float* dP = Scratch::atLeast(m_scratch->dP, m_device, static_cast<std::size_t>(H) * ss);
    for (int b = 0; b < B; ++b) {
        const float* Q = qkv + static_cast<std::size_t>(b) * s * width;
        const float* K = Q + hd;
        const float* V = Q + 2 * hd;
        const float* P = probs + static_cast<std::size_t>(b) * H * ss;
        const float* dY = dOut + static_cast<std::size_t>(b) * s * hd;
        float* dQ = dqkv + static_cast<std::size_t>(b) * s * width;
        float* dK = dQ + hd;
        float* dV = dQ + 2 * hd;
        rowMajorBatched(false, true, s, s, d, 1.0f, dY, hd, d, V, width, d, dP, s, ss, H); // dP = dY·Vᵀ
        rowMajorBatched(true, false, s, d, s, 1.0f, P, s, ss, dY, hd, d, dV, width, d, H); // dV = Pᵀ·dY
        launchCausalSoftmaxBackward(dP, P, H * s, s, scale, m_stream.handle);
        checkLaunch(m_device, "causal softmax backward kernel");
        rowMajorBatched(false, false, s, d, s, 1.0f, dP, s, ss, K, width, d, dQ, width, d, H); // dQ = dS·K
        rowMajorBatched(true, false, s, d, s, 1.0f, dP, s, ss, Q, width, d, dK, width, d, H); // dK = dSᵀ·Q
    }
}

void CudaKernels::layerNormForward(float* out, float* mean, float* rstd, const float* in, const float* gamma,
    const float* beta, int rows, int cols, float eps)
{
    launchLayerNorm(out, mean, rstd, in, gamma, beta, rows, cols, eps, m_stream.handle);
    checkLaunch(m_device, "layer norm kernel");
}

void CudaKernels::layerNormBackward(float* dIn, float* dGamma, float* dBeta, const float* dOut, const float* in,
    const float* mean, const float* rstd, const float* gamma, int rows, int cols)
{
    launchLayerNormBackward(dIn, dGamma, dBeta, dOut, in, mean, rstd, gamma, rows, cols, m_stream.handle);
    checkLaunch(m_device, "layer norm backward kernels");
}

void CudaKernels::geluForward(float* out, const float* in, std::size_t n)
{
    launchGelu(out, in, n, m_stream.handle);
    checkLaunch(m_device, "GELU kernel");
}

void CudaKernels::geluBackward(float* dIn, const float* dOut, const float* in, std::size_t n)
{
    launchGeluBackward(dIn, dOut, in, n, m_stream.handle);
    checkLaunch(m_device, "GELU backward kernel");
}

void CudaKernels::rmsNormForward(
    float* out, float* rstd, const float* in, const float* gamma, int rows, int cols, float eps)
{
    launchRmsNorm(out, rstd, in, gamma, rows, cols, eps, m_stream.handle);
    checkLaunch(m_device, "RMSNorm kernel");
}

void CudaKernels::rmsNormBackward(float* dIn, float* dGamma, const float* dOut, const float* in, const float* rstd,
    const float* gamma, int rows, int cols)
{
    launchRmsNormBackward(dIn, dGamma, dOut, in, rstd, gamma, rows, cols, m_stream.handle);
    checkLaunch(m_device, "RMSNorm backward kernels");
}

void CudaKernels::normInputFromOutput(float* in, const float* out, const float* mean, const float* rstd,
    const float* gamma, const float* beta, int rows, int cols)
{
    launchNormInputFromOutput(in, out, mean, rstd, gamma, beta, rows, cols, m_stream.handle);
    checkLaunch(m_device, "norm input kernel");
}

void CudaKernels::swigluForward(float* out, const float* gate, const float* up, std::size_t n)
{
    launchSwiglu(out, gate, up, n, m_stream.handle);
    checkLaunch(m_device, "SwiGLU kernel");
}

void CudaKernels::swigluBackward(
    float* dGate, float* dUp, const float* dOut, const float* gate, const float* up, std::size_t n)
{
    launchSwigluBackward(dGate, dUp, dOut, gate, up, n, m_stream.handle);
    checkLaunch(m_device, "SwiGLU backward kernel");
}

void CudaKernels::ropeForward(float* x, const std::int32_t* positions, int rows, int heads, int d, const double* freq)
{
    launchRope(x, positions, rows, heads, d, freq, 1.0, m_stream.handle);
    checkLaunch(m_device, "rotary kernel");
}

void CudaKernels::ropeBackward(float* dx, const std::int32_t* positions, int rows, int heads, int d, const double* freq)
{
    launchRope(dx, positions, rows, heads, d, freq, -1.0, m_stream.handle);
    checkLaunch(m_device, "rotary backward kernel");
}

void CudaKernels::addBias(float* out, const float* bias, int rows, int cols)
{
    launchAddBias(out, bias, rows, cols, m_stream.handle);
    checkLaunch(m_device, "bias kernel");
}

void CudaKernels::biasBackward(float* dBias, const float* dOut, int rows, int cols)
{
    launchBiasBackward(dBias, dOut, rows, cols, m_stream.handle);
    checkLaunch(m_device, "bias backward kernel");
}

void CudaKernels::crossEntropyStats(const float* z, int T, int Vl, std::int64_t first, std::int64_t vocab,
    const std::int32_t* targets, float* max, float* sum, float* targetShift)
{
    launchCrossEntropyStats(z, T, Vl, first, vocab, targets, max, sum, targetShift, m_stream.handle);
    checkLaunch(m_device, "cross-entropy kernel");
}

void CudaKernels::crossEntropyGradient(float* z, int T, int Vl, std::int64_t first, std::int64_t vocab,
    const float* max, const float* sum, const std::int32_t* targets, float scale)
{
    launchCrossEntropyGradient(z, T, Vl, first, vocab, max, sum, targets, scale, m_stream.handle);
    checkLaunch(m_device, "cross-entropy gradient kernel");
}

void CudaKernels::adamw(float* params, const float* grads, float* m, float* v, const std::uint8_t* decayMask,
    std::size_t n, const math::AdamStep& step)
{
    if (n == 0)
        return;
    launchAdamw(params, grads, m, v, decayMask, n, step, m_stream.handle);
    checkLaunch(m_device, "AdamW kernel");
}

double CudaKernels::sumOfSquares(const float* x, std::size_t n)
{
    double* sum = Scratch::atLeast(m_scratch->sum, m_device, 1);
    m_device.fillBytes(sum, 0, sizeof(double), m_stream);
    if (n > 0) {
        launchSumOfSquares(sum, x, n, m_stream.handle);
        checkLaunch(m_device, "sum of squares kernel");
    }
    double host = 0;
    m_device.copyBytes(&host, sum, sizeof host, CopyKind::DeviceToHost, m_stream);
    m_device.synchronize(m_stream);
    return host;
}

bool CudaKernels::unscaleAndCheck(float* grads, std::size_t n, float invScale)
{
    int* flag = Scratch::atLeast(m_scratch->flag, m_device, 1);
    m_device.fillBytes(flag, 0, sizeof(int), m_stream);
    if (n > 0) {
        launchUnscaleAndCheck(grads, n, invScale, flag, m_stream.handle);
        checkLaunch(m_device, "loss-scale kernel");
    }
    int host = 0;
    m_device.copyBytes(&host, flag, sizeof host, CopyKind::DeviceToHost, m_stream);
    m_device.synchronize(m_stream);
    return host != 0;
}

void CudaKernels::toBf16(std::uint16_t* out, const float* in, std::size_t n)
{
    launchToBf16(out, in, n, m_stream.handle);
    checkLaunch(m_device, "bf16 kernel");
}

void CudaKernels::toFp16(std::uint16_t* out, const float* in, std::size_t n)
{
    launchToFp16(out, in, n, m_stream.handle);
    checkLaunch(m_device, "fp16 kernel");
}

void CudaKernels::fromBf16(float* out, const std::uint16_t* in, std::size_t n)
{
    launchFromBf16(out, in, n, m_stream.handle);
    checkLaunch(m_device, "bf16 kernel");
}

void CudaKernels::fromFp16(float* out, const std::uint16_t* in, std::size_t n)
{
    launchFromFp16(out, in, n, m_stream.handle);
    checkLaunch(m_device, "fp16 kernel");
}

} // namespace loom::device
