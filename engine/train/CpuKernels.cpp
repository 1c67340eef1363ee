#include "engine/train/CpuKernels.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace loom::train {

void CpuKernels::gemm(bool transA, bool transB, int M, int N, int K, const float* A, const float* B, float* C,
                      bool accumulate)
{
    if (M == 0 || N == 0)
        return;
    if (K == 0) {
        if (!accumulate)
            std::fill(C, C + static_cast<std::size_t>(M) * N, 0.0f);
        return;
    }
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A,
                transA ? M : K, B, transB ? K : N, accumulate ? 1.0f : 0.0f, C, N);
}

void CpuKernels::layerNormForward(float* out, float* mean, float* rstd, const float* in, const float* gamma,
                                  const float* beta, int rows, int cols)
{
    constexpr float eps = 1e-5f;
    for (int r = 0; r < rows; ++r) {
        const float* x = in + static_cast<std::size_t>(r) * cols;
        float* y = out + static_cast<std::size_t>(r) * cols;
        double m = 0;
        for (int c = 0; c < cols; ++c)
            m += x[c];
        m /= cols;
        double v = 0;
        for (int c = 0; c < cols; ++c)
            v += (x[c] - m) * (x[c] - m);
        v /= cols;
        const float s = static_cast<float>(1.0 / std::sqrt(v + eps));
        for (int c = 0; c < cols; ++c)
            y[c] = (x[c] - static_cast<float>(m)) * s * gamma[c] + beta[c];
        mean[r] = static_cast<float>(m);
        rstd[r] = s;
    }
}

void CpuKernels::layerNormBackward(float* dIn, float* dGamma, float* dBeta, const float* dOut, const float* in,
                                   const float* mean, const float* rstd, const float* gamma, int rows, int cols)
{
    for (int r = 0; r < rows; ++r) {
        const float* x = in + static_cast<std::size_t>(r) * cols;
        const float* dy = dOut + static_cast<std::size_t>(r) * cols;
        float* dx = dIn + static_cast<std::size_t>(r) * cols;
        const float m = mean[r], s = rstd[r];
        double sumDn = 0, sumDnX = 0;  // Σ dnorm, Σ dnorm·xhat
        for (int c = 0; c < cols; ++c) {
            const float xhat = (x[c] - m) * s;
            const float dn = dy[c] * gamma[c];
            sumDn += dn;
            sumDnX += dn * xhat;
            dGamma[c] += dy[c] * xhat;
            dBeta[c] += dy[c];
        }
        const float a = static_cast<float>(sumDn / cols), b = static_cast<float>(sumDnX / cols);
        for (int c = 0; c < cols; ++c) {
            const float xhat = (x[c] - m) * s;
            dx[c] += (dy[c] * gamma[c] - a - xhat * b) * s;
        }
    }
}

namespace {
constexpr float kGeluScale = 0.7978845608028654f;  // √(2/π)
}

void CpuKernels::geluForward(float* out, const float* in, std::size_t n)
{
    for (std::size_t i = 0; i < n; ++i) {
        const float x = in[i];
        out[i] = 0.5f * x * (1.0f + std::tanh(kGeluScale * (x + 0.044715f * x * x * x)));
    }
}

void CpuKernels::geluBackward(float* dIn, const float* dOut, const float* in, std::size_t n)
{
    for (std::size_t i = 0; i < n; ++i) {
        const float x = in[i];
        const float u = kGeluScale * (x + 0.044715f * x * x * x);
        const float t = std::tanh(u);
        const float du = kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
        dIn[i] = dOut[i] * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du);
    }
}

void CpuKernels::attentionForward(float* out, float* probs, const float* qkv, int B, int s, int H, int d)
{
    const int width = 3 * H * d, hd = H * d;
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    for (int b = 0; b < B; ++b)
        for (int h = 0; h < H; ++h) {
            float* P = probs + (static_cast<std::size_t>(b) * H + h) * s * s;
            for (int i = 0; i < s; ++i) {
                const float* q = qkv + static_cast<std::size_t>(b * s + i) * width + h * d;
                float maxv = -INFINITY;
                for (int j = 0; j <= i; ++j) {
                    const float* k = qkv + static_cast<std::size_t>(b * s + j) * width + hd + h * d;
                    float dot = 0;
                    for (int c = 0; c < d; ++c)
                        dot += q[c] * k[c];
                    P[i * s + j] = dot * scale;
                    maxv = std::max(maxv, P[i * s + j]);
                }
                float sum = 0;
                for (int j = 0; j <= i; ++j) {
                    P[i * s + j] = std::exp(P[i * s + j] - maxv);
                    sum += P[i * s + j];
                }
                for (int j = 0; j <= i; ++j)
                    P[i * s + j] /= sum;
                for (int j = i + 1; j < s; ++j)
                    P[i * s + j] = 0;
                float* y = out + static_cast<std::size_t>(b * s + i) * hd + h * d;
                std::fill(y, y + d, 0.0f);
                for (int j = 0; j <= i; ++j) {
                    const float* v = qkv + static_cast<std::size_t>(b * s + j) * width + 2 * hd + h * d;
                    const float p = P[i * s + j];
                    for (int c = 0; c < d; ++c)
                        y[c] += p * v[c];
                }
            }
        }
}

void CpuKernels::attentionBackward(float* dqkv, const float* dOut, const float* qkv, const float* probs, int B, int s,
                                   int H, int d)
{
    const int width = 3 * H * d, hd = H * d;
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    std::fill(dqkv, dqkv + static_cast<std::size_t>(B) * s * width, 0.0f);
    std::vector<float> dP(static_cast<std::size_t>(s));
    for (int b = 0; b < B; ++b)
        for (int h = 0; h < H; ++h) {
            const float* P = probs + (static_cast<std::size_t>(b) * H + h) * s * s;
            for (int i = 0; i < s; ++i) {
                const float* dy = dOut + static_cast<std::size_t>(b * s + i) * hd + h * d;
                // dP_ij = dy · v_j ; dv_j += P_ij · dy
                for (int j = 0; j <= i; ++j) {
                    const float* v = qkv + static_cast<std::size_t>(b * s + j) * width + 2 * hd + h * d;
                    float* dv = dqkv + static_cast<std::size_t>(b * s + j) * width + 2 * hd + h * d;
                    float dot = 0;
                    for (int c = 0; c < d; ++c) {
                        dot += dy[c] * v[c];
                        dv[c] += P[i * s + j] * dy[c];
                    }
                    dP[static_cast<std::size_t>(j)] = dot;
                }
                // softmax backward: dS_ij = P_ij (dP_ij - Σ_k P_ik dP_ik)
                float inner = 0;
                for (int j = 0; j <= i; ++j)
                    inner += P[i * s + j] * dP[static_cast<std::size_t>(j)];
                const float* q = qkv + static_cast<std::size_t>(b * s + i) * width + h * d;
                float* dq = dqkv + static_cast<std::size_t>(b * s + i) * width + h * d;
                for (int j = 0; j <= i; ++j) {
                    const float dS = P[i * s + j] * (dP[static_cast<std::size_t>(j)] - inner) * scale;
                    const float* k = qkv + static_cast<std::size_t>(b * s + j) * width + hd + h * d;
                    float* dk = dqkv + static_cast<std::size_t>(b * s + j) * width + hd + h * d;
                    for (int c = 0; c < d; ++c) {
                        dq[c] += dS * k[c];
                        dk[c] += dS * q[c];
                    }
                }
            }
        }
}

void CpuKernels::addBias(float* out, const float* bias, int rows, int cols)
{
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c)
            out[static_cast<std::size_t>(r) * cols + c] += bias[c];
}

void CpuKernels::biasBackward(float* dBias, const float* dOut, int rows, int cols)
{
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c)
            dBias[c] += dOut[static_cast<std::size_t>(r) * cols + c];
}

}  // namespace loom::train
