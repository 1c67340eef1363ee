#include "engine/train/CpuKernels.h"

#include "engine/train/Gelu.h"
#include "engine/train/Threads.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace loom::train {

void CpuKernels::gemm(
    bool transA, bool transB, int M, int N, int K, const float* A, const float* B, float* C, bool accumulate)
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
    const float* beta, int rows, int cols, float eps)
{
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
        double sumDn = 0, sumDnX = 0; // Σ dnorm, Σ dnorm·xhat
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

// Element-wise, so split over the compute threads (the GEMMs' threads idle meanwhile).
void CpuKernels::geluForward(float* out, const float* in, std::size_t n)
{
    parallelFor(
        n, computeThreads(), [&](std::size_t, std::size_t b, std::size_t e) { gelu::forward(out + b, in + b, e - b); });
}

void CpuKernels::geluBackward(float* dIn, const float* dOut, const float* in, std::size_t n)
{
    parallelFor(n, computeThreads(),
        [&](std::size_t, std::size_t b, std::size_t e) { gelu::backward(dIn + b, dOut + b, in + b, e - b); });
}

// Attention per (sequence, head) with BLAS: S = Q·Kᵀ/√d, causal softmax, Y = P·V. Q, K and V are read in
// place from the fused qkv rows (leading dimension 3·H·d); the masked upper triangle is computed and
// zeroed, which costs half of those FLOPs but keeps the products in sgemm.
void CpuKernels::attentionForward(float* out, float* probs, const float* qkv, int B, int s, int H, int d)
{
    const int width = 3 * H * d, hd = H * d;
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    for (int b = 0; b < B; ++b)
        for (int h = 0; h < H; ++h) {
            const float* Q = qkv + static_cast<std::size_t>(b) * s * width + h * d;
            const float* K = Q + hd;
            const float* V = Q + 2 * hd;
            float* P = probs + (static_cast<std::size_t>(b) * H + h) * s * s;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s, s, d, scale, Q, width, K, width, 0.0f, P, s);
            for (int i = 0; i < s; ++i) {
                float* row = P + static_cast<std::size_t>(i) * s;
                float maxv = -INFINITY;
                for (int j = 0; j <= i; ++j)
                    maxv = std::max(maxv, row[j]);
                float sum = 0;
                for (int j = 0; j <= i; ++j) {
                    row[j] = std::exp(row[j] - maxv);
                    sum += row[j];
                }
                const float inv = 1.0f / sum;
                for (int j = 0; j <= i; ++j)
                    row[j] *= inv;
                std::fill(row + i + 1, row + s, 0.0f);
            }
            float* Y = out + static_cast<std::size_t>(b) * s * hd + h * d;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s, d, s, 1.0f, P, s, V, width, 0.0f, Y, hd);
        }
}

void CpuKernels::attentionBackward(
    float* dqkv, const float* dOut, const float* qkv, const float* probs, int B, int s, int H, int d)
{
    const int width = 3 * H * d, hd = H * d;
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    std::vector<float> dP(static_cast<std::size_t>(s) * s);
    for (int b = 0; b < B; ++b)
        for (int h = 0; h < H; ++h) {
            const float* Q = qkv + static_cast<std::size_t>(b) * s * width + h * d;
            const float* K = Q + hd;
            const float* V = Q + 2 * hd;
            const float* P = probs + (static_cast<std::size_t>(b) * H + h) * s * s;
            const float* dY = dOut + static_cast<std::size_t>(b) * s * hd + h * d;
            float* dQ = dqkv + static_cast<std::size_t>(b) * s * width + h * d;
            float* dK = dQ + hd;
            float* dV = dQ + 2 * hd;
            // dP = dY·Vᵀ ; dV = Pᵀ·dY
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s, s, d, 1.0f, dY, hd, V, width, 0.0f, dP.data(), s);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s, d, s, 1.0f, P, s, dY, hd, 0.0f, dV, width);
            // softmax backward, in place: dS = P ⊙ (dP − Σ_j P·dP) / √d (zero above the diagonal, where P is)
            for (int i = 0; i < s; ++i) {
                float* row = dP.data() + static_cast<std::size_t>(i) * s;
                const float* p = P + static_cast<std::size_t>(i) * s;
                float inner = 0;
                for (int j = 0; j <= i; ++j)
                    inner += p[j] * row[j];
                for (int j = 0; j <= i; ++j)
                    row[j] = p[j] * (row[j] - inner) * scale;
                std::fill(row + i + 1, row + s, 0.0f);
            }
            // dQ = dS·K ; dK = dSᵀ·Q
            cblas_sgemm(
                CblasRowMajor, CblasNoTrans, CblasNoTrans, s, d, s, 1.0f, dP.data(), s, K, width, 0.0f, dQ, width);
            cblas_sgemm(
                CblasRowMajor, CblasTrans, CblasNoTrans, s, d, s, 1.0f, dP.data(), s, Q, width, 0.0f, dK, width);
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

} // namespace loom::train
