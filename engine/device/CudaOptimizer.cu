// AdamW, the gradient's sum of squares and fp16 loss-scale checks. This file is compiled with -fmad=false
// (CMakeLists.txt): without fused multiply-adds each update is the CPU's operations in the CPU's order, so
// a GPU run's parameters can match a CPU run's bit for bit.
#include "engine/device/CudaGrid.cuh"
#include "engine/device/CudaLaunch.h"

namespace loom::device {

namespace km = math;
using namespace grid;

namespace {

__global__ void adamwKernel(
    float* params, const float* grads, float* m, float* v, const std::uint8_t* decayMask, std::size_t n, km::AdamStep k)
{
    for (std::size_t i = firstIndex(); i < n; i += strideAll()) {
        float p = params[i], mi = m[i], vi = v[i];
        km::adamwUpdate(k, decayMask[i] ? k.decay : 0.0f, p, grads[i], mi, vi);
        params[i] = p;
        m[i] = mi;
        v[i] = vi;
    }
}

// Each thread's squares in double, a block's sum in shared memory, one atomic add per block.
__global__ void sumOfSquaresKernel(double* sum, const float* x, std::size_t n)
{
    __shared__ double part[kThreads];
    double acc = 0;
    for (std::size_t i = firstIndex(); i < n; i += strideAll())
        acc += double(x[i]) * double(x[i]);
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int half = kThreads / 2; half > 0; half /= 2) {
        if (int(threadIdx.x) < half)
            part[threadIdx.x] += part[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        atomicAdd(sum, part[0]);
}

__global__ void unscaleKernel(float* grads, std::size_t n, float invScale, int* overflow)
{
    bool bad = false;
    for (std::size_t i = firstIndex(); i < n; i += strideAll()) {
        const float g = grads[i];
        bad = bad || !km::isFiniteFloat(g);
        grads[i] = g * invScale;
    }
    if (bad)
        *overflow = 1;
}

} // namespace

void launchAdamw(float* params, const float* grads, float* m, float* v, const std::uint8_t* decayMask, std::size_t n,
    const math::AdamStep& step, void* s)
{
    adamwKernel<<<blocks(n), kThreads, 0, stream(s)>>>(params, grads, m, v, decayMask, n, step);
}

void launchSumOfSquares(double* sum, const float* x, std::size_t n, void* s)
{
    sumOfSquaresKernel<<<blocks(n), kThreads, 0, stream(s)>>>(sum, x, n);
}

void launchUnscaleAndCheck(float* grads, std::size_t n, float invScale, int* overflow, void* s)
{
    unscaleKernel<<<blocks(n), kThreads, 0, stream(s)>>>(grads, n, invScale, overflow);
}

} // namespace loom::device
