// LayerNorm and RMSNorm: one warp per row for the row's sums and the per-element results (KernelMath.h),
// one thread per column for the parameter gradients (down the rows, no atomics: the same bits each run).
#include "engine/device/CudaGrid.cuh"
#include "engine/device/CudaLaunch.h"

namespace loom::device {

namespace km = math;
using namespace grid;

namespace {

// Two passes (mean, then Σ(x − mean)²), as CpuKernels: one pass of Σx² cancels in float.
__global__ void layerNormKernel(float* out, float* mean, float* rstd, const float* in, const float* gamma,
    const float* beta, int rows, int cols, float eps)
{
    const int r = warpRow();
    if (r >= rows)
        return;
    const float* x = in + std::size_t(r) * cols;
    float sum = 0;
    for (int c = lane(); c < cols; c += kWarp)
        sum += x[c];
    const float m = warpSum(sum) / cols;
    float dev = 0;
    for (int c = lane(); c < cols; c += kWarp)
        dev += (x[c] - m) * (x[c] - m);
    const float s = km::layerNormRstd(warpSum(dev), cols, eps);
    float* y = out + std::size_t(r) * cols;
    for (int c = lane(); c < cols; c += kWarp)
        y[c] = km::layerNormOut(x[c], m, s, gamma[c], beta[c]);
    if (lane() == 0) {
        mean[r] = m;
        rstd[r] = s;
    }
}

__global__ void layerNormDxKernel(float* dIn, const float* dOut, const float* in, const float* mean, const float* rstd,
    const float* gamma, int rows, int cols)
{
    const int r = warpRow();
    if (r >= rows)
        return;
    const float* x = in + std::size_t(r) * cols;
    const float* dy = dOut + std::size_t(r) * cols;
    const float m = mean[r], s = rstd[r];
    float sumDn = 0, sumDnX = 0;
    for (int c = lane(); c < cols; c += kWarp) {
        const float dn = dy[c] * gamma[c];
        sumDn += dn;
        sumDnX += dn * (x[c] - m) * s;
    }
    const float a = warpSum(sumDn) / cols, b = warpSum(sumDnX) / cols;
    float* dx = dIn + std::size_t(r) * cols;
    for (int c = lane(); c < cols; c += kWarp)
        dx[c] += km::layerNormDx(dy[c], gamma[c], (x[c] - m) * s, a, b, s);
}

// dGamma[c] += Σ_r dy·x̂, dBeta[c] += Σ_r dy (dBeta may be null: RMSNorm; mean may be null: x̂ = x·rstd).
__global__ void normParamGradKernel(float* dGamma, float* dBeta, const float* dOut, const float* in, const float* mean,
    const float* rstd, int rows, int cols)
{
    const int c = int(blockIdx.x) * blockDim.x + threadIdx.x;
    if (c >= cols)
        return;
    float g = 0, b = 0;
    for (int r = 0; r < rows; ++r) {
        const std::size_t i = std::size_t(r) * cols + c;
        const float xhat = (in[i] - (mean ? mean[r] : 0.0f)) * rstd[r];
        g += dOut[i] * xhat;
        b += dOut[i];
    }
    dGamma[c] += g;
    if (dBeta)
        dBeta[c] += b;
}

__global__ void rmsNormKernel(
    float* out, float* rstd, const float* in, const float* gamma, int rows, int cols, float eps)
{
    const int r = warpRow();
    if (r >= rows)
        return;
    const float* x = in + std::size_t(r) * cols;
    float sq = 0;
    for (int c = lane(); c < cols; c += kWarp)
        sq += x[c] * x[c];
    const float s = km::rmsNormRstd(warpSum(sq), cols, eps);
    float* y = out + std::size_t(r) * cols;
    for (int c = lane(); c < cols; c += kWarp)
        y[c] = x[c] * s * gamma[c];
    if (lane() == 0)
        rstd[r] = s;
}

__global__ void rmsNormDxKernel(
    float* dIn, const float* dOut, const float* in, const float* rstd, const float* gamma, int rows, int cols)
{
    const int r = warpRow();
    if (r >= rows)
        return;
    const float* x = in + std::size_t(r) * cols;
    const float* dy = dOut + std::size_t(r) * cols;
    const float s = rstd[r];
    float sumDnX = 0;
    for (int c = lane(); c < cols; c += kWarp)
        sumDnX += dy[c] * gamma[c] * x[c] * s;
    const float b = warpSum(sumDnX) / cols;
    float* dx = dIn + std::size_t(r) * cols;
    for (int c = lane(); c < cols; c += kWarp)
        dx[c] += km::rmsNormDx(dy[c], gamma[c], x[c], s, b);
}

__global__ void normInputKernel(float* in, const float* out, const float* mean, const float* rstd, const float* gamma,
    const float* beta, int rows, int cols)
{
    const std::size_t n = std::size_t(rows) * cols;
    for (std::size_t i = firstIndex(); i < n; i += strideAll()) {
        const int r = int(i / cols), c = int(i % cols);
        const float shift = mean ? mean[r] : 0.0f;
        in[i] = (out[i] - (beta ? beta[c] : 0.0f)) / gamma[c] * (1.0f / rstd[r]) + shift;
    }
}

unsigned columnBlocks(int cols)
{
    return static_cast<unsigned>((cols + kThreads - 1) / kThreads);
}

} // namespace

void launchLayerNorm(float* out, float* mean, float* rstd, const float* in, const float* gamma, const float* beta,
    int rows, int cols, float eps, void* s)
{
    layerNormKernel<<<warpBlocks(rows), kThreads, 0, stream(s)>>>(out, mean, rstd, in, gamma, beta, rows, cols, eps);
}

void launchLayerNormBackward(float* dIn, float* dGamma, float* dBeta, const float* dOut, const float* in,
    const float* mean, const float* rstd, const float* gamma, int rows, int cols, void* s)
{
    layerNormDxKernel<<<warpBlocks(rows), kThreads, 0, stream(s)>>>(dIn, dOut, in, mean, rstd, gamma, rows, cols);
    normParamGradKernel<<<columnBlocks(cols), kThreads, 0, stream(s)>>>(
        dGamma, dBeta, dOut, in, mean, rstd, rows, cols);
}

void launchRmsNorm(float* out, float* rstd, const float* in, const float* gamma, int rows, int cols, float eps, void* s)
{
    rmsNormKernel<<<warpBlocks(rows), kThreads, 0, stream(s)>>>(out, rstd, in, gamma, rows, cols, eps);
}

void launchRmsNormBackward(float* dIn, float* dGamma, const float* dOut, const float* in, const float* rstd,
    const float* gamma, int rows, int cols, void* s)
{
    rmsNormDxKernel<<<warpBlocks(rows), kThreads, 0, stream(s)>>>(dIn, dOut, in, rstd, gamma, rows, cols);
    normParamGradKernel<<<columnBlocks(cols), kThreads, 0, stream(s)>>>(
        dGamma, nullptr, dOut, in, nullptr, rstd, rows, cols);
}

void launchNormInputFromOutput(float* in, const float* out, const float* mean, const float* rstd, const float* gamma,
    const float* beta, int rows, int cols, void* s)
{
    normInputKernel<<<blocks(std::size_t(rows) * cols), kThreads, 0, stream(s)>>>(
        in, out, mean, rstd, gamma, beta, rows, cols);
}

} // namespace loom::device
