#pragma once

// The per-element and per-row arithmetic of the CUDA kernels (CudaKernels.cu), as inline functions that
// nvcc compiles for the device and any C++ compiler for the host. The CUDA kernels only add the parallel
// structure (which thread takes which element, how a row's sums are reduced); tst_kernelmath runs these
// same functions on the host against CpuKernels on random inputs, so the arithmetic a GPU will run is
// checked on every build, GPU or not. Only <cmath>-level functions that exist on both sides are used.

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define LOOM_HD __host__ __device__ inline
#else
#define LOOM_HD inline
#endif

namespace loom::device::math {

// --- element-wise -------------------------------------------------------------------------------------------

// GELU, tanh form (GPT-2), as engine/train/Gelu.cpp.
LOOM_HD float geluForward(float x)
{
    const float k = 0.7978845608028654f; // √(2/π)
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

LOOM_HD float geluBackward(float dy, float x)
{
    const float k = 0.7978845608028654f;
    const float t = tanhf(k * (x + 0.044715f * x * x * x));
    const float du = k * (1.0f + 3.0f * 0.044715f * x * x);
    return dy * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du);
}

LOOM_HD float sigmoid(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

// SwiGLU: silu(gate)·up.
LOOM_HD float swigluForward(float gate, float up)
{
    return gate * sigmoid(gate) * up;
}

// dGate and dUp of SwiGLU; silu'(g) = σ(g)·(1 + g·(1 − σ(g))).
LOOM_HD void swigluBackward(float dy, float gate, float up, float& dGate, float& dUp)
{
    const float sg = sigmoid(gate);
    dUp = dy * gate * sg;
    dGate = dy * up * sg * (1.0f + gate * (1.0f - sg));
}

// One rotary pair (a, b) turned by the angle whose cosine and sine are c and s.
LOOM_HD void ropeTurn(float& a, float& b, float c, float s)
{
    const float x = a, y = b;
    a = x * c - y * s;
    b = x * s + y * c;
}

// --- per row: norms -----------------------------------------------------------------------------------------
// A row's sums are reduced by the kernel (a warp or a block); these are what each element contributes and
// what each element becomes once the row's figures are known.

// 1/√(variance + eps) from the row's Σ(x − mean)² (two passes over the row, as CpuKernels: one pass of Σx²
// would cancel catastrophically in float for rows far from zero).
LOOM_HD float layerNormRstd(double sumSqDev, int cols, float eps)
{
    return static_cast<float>(1.0 / sqrt(sumSqDev / cols + eps));
}

LOOM_HD float layerNormOut(float x, float mean, float rstd, float gamma, float beta)
{
    return (x - mean) * rstd * gamma + beta;
}

// dx of one element, from the row's a = mean(dy·γ) and b = mean(dy·γ·x̂).
LOOM_HD float layerNormDx(float dy, float gamma, float xhat, float a, float b, float rstd)
{
    return (dy * gamma - a - xhat * b) * rstd;
}

LOOM_HD float rmsNormRstd(double sumSq, int cols, float eps)
{
    return static_cast<float>(1.0 / sqrt(sumSq / cols + eps));
}

// dx of one RMSNorm element, from the row's b = mean(dy·γ·x̂).
LOOM_HD float rmsNormDx(float dy, float gamma, float x, float rstd, float b)
{
    return (dy * gamma - x * rstd * b) * rstd;
}

// --- online softmax (attention rows, vocab rows) -----------------------------------------------------------

// A running (max, Σ exp(x − max)) over part of a row; two parts merge without a second pass over the row.
struct MaxSum {
    float max;
    float sum;
};

LOOM_HD MaxSum maxSumEmpty()
{
    return MaxSum { -INFINITY, 0.0f };
}

LOOM_HD MaxSum maxSumAdd(MaxSum a, float x)
{
    if (x <= a.max)
        return MaxSum { a.max, a.sum + expf(x - a.max) };
    return MaxSum { x, a.sum * expf(a.max - x) + 1.0f }; // exp(−inf) = 0 covers the empty part
}

LOOM_HD MaxSum maxSumMerge(MaxSum a, MaxSum b)
{
    if (b.max == -INFINITY)
        return a;
    if (a.max == -INFINITY)
        return b;
    const float m = a.max > b.max ? a.max : b.max;
    return MaxSum { m, a.sum * expf(a.max - m) + b.sum * expf(b.max - m) };
}

// Cross-entropy's gradient in one logit: (softmax − onehot)·scale, softmax = exp(z − max)/sum.
LOOM_HD float crossEntropyGrad(float z, float max, float sum, bool isTarget, float scale)
{
    return (expf(z - max) / sum - (isTarget ? 1.0f : 0.0f)) * scale;
}

// The loss of one row, −log softmax(target) = log(sum) − (z_target − max).
LOOM_HD float crossEntropyLoss(float targetShift, float sum)
{
    return logf(sum) - targetShift;
}

// Softmax backward in one score: dS = P·(dP − Σ_j P·dP)·scale.
LOOM_HD float softmaxBackward(float p, float dp, float inner, float scale)
{
    return p * (dp - inner) * scale;
}

// --- AdamW --------------------------------------------------------------------------------------------------

// The constants of one step, as engine/train/Optimizer.cpp computes them once per step.
struct AdamStep {
    float beta1, beta2, oneMinusBeta1, oneMinusBeta2;
    float invC1, invC2; // bias corrections 1/(1 − β^t)
    float lr, decay, eps, gradScale; // decay = lr·weight_decay (0 where the tensor has none)
};

// One element's update, in the same operations and order as Optimizer.cpp's updateRange (so a device
// compiled without fused multiply-adds, nvcc -fmad=false, gives the CPU's bits).
LOOM_HD void adamwUpdate(const AdamStep& k, float decay, float& param, float grad, float& m, float& v)
{
    const float g = grad * k.gradScale;
    const float mi = k.beta1 * m + k.oneMinusBeta1 * g;
    const float vi = k.beta2 * v + k.oneMinusBeta2 * g * g;
    m = mi;
    v = vi;
    const float p = param;
    param = (p - decay * p) - k.lr * (mi * k.invC1) / (sqrtf(vi * k.invC2) + k.eps);
}

// The clipping factor from the global norm: 1 when within max_norm (or no clipping), else max_norm/norm.
LOOM_HD float clipScale(double globalNorm, double maxNorm)
{
    if (maxNorm <= 0 || !(globalNorm > maxNorm))
        return 1.0f;
    return static_cast<float>(maxNorm / (globalNorm + 1e-6));
}

// --- fp16 loss scaling ---------------------------------------------------------------------------------------

// Dynamic loss scaling (Micikevicius et al. 2018, as torch.cuda.amp.GradScaler): on an overflow the step is
// skipped and the scale halves; after `growthInterval` clean steps it doubles. Returns the next scale.
struct LossScale {
    float scale = 65536.0f;
    int cleanSteps = 0;
};

LOOM_HD LossScale lossScaleNext(LossScale s, bool overflow, int growthInterval)
{
    if (overflow)
        return LossScale { s.scale * 0.5f > 1.0f ? s.scale * 0.5f : 1.0f, 0 };
    if (s.cleanSteps + 1 >= growthInterval)
        return LossScale { s.scale * 2.0f < 16777216.0f ? s.scale * 2.0f : 16777216.0f, 0 };
    return LossScale { s.scale, s.cleanSteps + 1 };
}

LOOM_HD bool isFiniteFloat(float x)
{
    return x - x == 0.0f; // false for ±inf and NaN, without isfinite's host/device split
}

// --- 16-bit floats -----------------------------------------------------------------------------------------
// Conversions in plain integer arithmetic, so the host rounds as the device's __float2bfloat16_rn and
// __float2half_rn do, and the tests can state the rounding error they allow.

LOOM_HD std::uint32_t floatBits(float x)
{
    std::uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

LOOM_HD float bitsFloat(std::uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

// bf16: round to nearest even; NaN stays a (quiet) NaN. Relative error at most 2^−9.
LOOM_HD std::uint16_t toBf16(float x)
{
    const std::uint32_t u = floatBits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return static_cast<std::uint16_t>((u >> 16) | 0x40u);
    return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

LOOM_HD float fromBf16(std::uint16_t h)
{
    return bitsFloat(static_cast<std::uint32_t>(h) << 16);
}

// fp16 (IEEE binary16): round to nearest even, overflow to infinity, subnormals kept. Relative error at
// most 2^−11 in the normal range (|x| ≥ 2^−14), absolute error at most 2^−25 below it.
LOOM_HD std::uint16_t toFp16(float x)
{
    const std::uint32_t u = floatBits(x);
    const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
    const std::uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return static_cast<std::uint16_t>(sign | 0x7e00u); // NaN
    if (a >= 0x477ff000u) // rounds to 65536 or more: infinity
        return static_cast<std::uint16_t>(sign | 0x7c00u);
    if (a < 0x38800000u) { // below 2^−14: a subnormal (or zero) of 2^−24 steps
        const float scaled = bitsFloat(a) * 16777216.0f; // in units of 2^−24, exact
        const std::uint32_t q = static_cast<std::uint32_t>(scaled);
        const float rest = scaled - static_cast<float>(q);
        const std::uint32_t r = q + ((rest > 0.5f || (rest == 0.5f && (q & 1u))) ? 1u : 0u);
        return static_cast<std::uint16_t>(sign | r); // r = 0x400 is the smallest normal, as it should be
    }
    const std::uint32_t rounded = a + 0xfffu + ((a >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

LOOM_HD float fromFp16(std::uint16_t h)
{
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    const std::uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) // zero or subnormal: m·2^−24
        return bitsFloat(sign) + (sign ? -1.0f : 1.0f) * static_cast<float>(m) * 5.9604644775390625e-8f;
    if (e == 31)
        return bitsFloat(sign | 0x7f800000u | (m << 13));
    return bitsFloat(sign | ((e + 112u) << 23) | (m << 13));
}

} // namespace loom::device::math
