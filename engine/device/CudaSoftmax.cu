// Softmax rows: the attention's causal softmax (one warp per row) and the LM head's fused cross-entropy
// (one block per row: an online (max, sum) in one pass over the logits, then the gradient in place).
#include "engine/device/CudaGrid.cuh"
#include "engine/device/CudaLaunch.h"

namespace loom::device {

namespace km = math;
using namespace grid;

namespace {

// Row r holds query i = r % s: columns 0..i are its keys, the rest become 0 (as CpuKernels leaves them).
__global__ void causalSoftmaxKernel(float* p, int rows, int s)
{
    const int r = warpRow();
    if (r >= rows)
        return;
    const int i = r % s;
    float* row = p + std::size_t(r) * s;
    km::MaxSum ms = km::maxSumEmpty();
    for (int j = lane(); j <= i; j += kWarp)
        ms = km::maxSumAdd(ms, row[j]);
    ms = warpMaxSum(ms);
    for (int j = lane(); j < s; j += kWarp)
        row[j] = j <= i ? expf(row[j] - ms.max) / ms.sum : 0.0f;
}

__global__ void causalSoftmaxBackwardKernel(float* dP, const float* p, int rows, int s, float scale)
{
    const int r = warpRow();
    if (r >= rows)
        return;
    const int i = r % s;
    float* d = dP + std::size_t(r) * s;
    const float* pr = p + std::size_t(r) * s;
    float inner = 0;
    for (int j = lane(); j <= i; j += kWarp)
        inner += pr[j] * d[j];
    inner = warpSum(inner);
    for (int j = lane(); j < s; j += kWarp)
        d[j] = j <= i ? km::softmaxBackward(pr[j], d[j], inner, scale) : 0.0f;
}

// The block's (max, sum) from each thread's: warps first, then the first warp over the warps' results.
__device__ km::MaxSum blockMaxSum(km::MaxSum ms)
{
    __shared__ float maxes[kThreads / kWarp], sums[kThreads / kWarp];
    ms = warpMaxSum(ms);
    const int warp = int(threadIdx.x) / kWarp;
    if (lane() == 0) {
        maxes[warp] = ms.max;
        sums[warp] = ms.sum;
    }
    __syncthreads();
    if (warp == 0) {
        km::MaxSum part = lane() < kThreads / kWarp ? km::MaxSum { maxes[lane()], sums[lane()] } : km::maxSumEmpty();
        part = warpMaxSum(part);
        if (lane() == 0) {
            maxes[0] = part.max;
            sums[0] = part.sum;
        }
    }
    __syncthreads();
    return km::MaxSum { maxes[0], sums[0] };
}

__global__ void crossEntropyStatsKernel(const float* z, int Vl, std::int64_t first, std::int64_t vocab,
    const std::int32_t* targets, float* max, float* sum, float* targetShift)
{
    const int t = int(blockIdx.x);
    const float* row = z + std::size_t(t) * Vl;
    const std::int64_t realLeft = vocab - first;
    const int real = realLeft <= 0 ? 0 : (realLeft < Vl ? int(realLeft) : Vl); // padding columns are not words
    km::MaxSum ms = km::maxSumEmpty();
    for (int v = int(threadIdx.x); v < real; v += blockDim.x)
        ms = km::maxSumAdd(ms, row[v]);
    ms = blockMaxSum(ms);
    if (threadIdx.x == 0) {
        max[t] = ms.max;
        sum[t] = ms.sum;
        const std::int64_t local = targets[t] - first;
        if (local >= 0 && local < real)
            targetShift[t] = row[local] - ms.max;
    }
}

__global__ void crossEntropyGradientKernel(float* z, int Vl, std::int64_t first, std::int64_t vocab, const float* max,
    const float* sum, const std::int32_t* targets, float scale)
{
    const int t = int(blockIdx.x);
    float* row = z + std::size_t(t) * Vl;
    const std::int64_t target = targets[t] - first;
    const float m = max[t], s = sum[t];
    for (int v = int(threadIdx.x); v < Vl; v += blockDim.x) {
        const float zv = first + v < vocab ? row[v] : -INFINITY;
        row[v] = km::crossEntropyGrad(zv, m, s, v == target, scale);
    }
}

} // namespace

void launchCausalSoftmax(float* p, int rows, int s, void* st)
{
    causalSoftmaxKernel<<<warpBlocks(rows), kThreads, 0, stream(st)>>>(p, rows, s);
}

void launchCausalSoftmaxBackward(float* dP, const float* p, int rows, int s, float scale, void* st)
{
    causalSoftmaxBackwardKernel<<<warpBlocks(rows), kThreads, 0, stream(st)>>>(dP, p, rows, s, scale);
}

void launchCrossEntropyStats(const float* z, int T, int Vl, std::int64_t first, std::int64_t vocab,
    const std::int32_t* targets, float* max, float* sum, float* targetShift, void* st)
{
    if (T > 0)
        crossEntropyStatsKernel<<<unsigned(T), kThreads, 0, stream(st)>>>(
            z, Vl, first, vocab, targets, max, sum, targetShift);
}

void launchCrossEntropyGradient(float* z, int T, int Vl, std::int64_t first, std::int64_t vocab, const float* max,
    const float* sum, const std::int32_t* targets, float scale, void* st)
{
    if (T > 0)
        crossEntropyGradientKernel<<<unsigned(T), kThreads, 0, stream(st)>>>(
            z, Vl, first, vocab, max, sum, targets, scale);
}

} // namespace loom::device
