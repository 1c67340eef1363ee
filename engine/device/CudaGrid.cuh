#pragma once

// Launch geometry and warp reductions shared by the kernel files.
#include "engine/device/KernelMath.h"

#include <cuda_runtime.h>

#include <cstddef>

namespace loom::device::grid {

constexpr int kThreads = 256;
constexpr int kWarp = 32;

inline cudaStream_t stream(void* s)
{
    return static_cast<cudaStream_t>(s);
}

// Blocks for a grid-stride loop over n elements (capped: each thread then takes several).
inline unsigned blocks(std::size_t n)
{
    const std::size_t b = (n + kThreads - 1) / kThreads;
    return static_cast<unsigned>(b < 65535 * 8 ? (b > 0 ? b : 1) : 65535 * 8);
}

// Blocks for one warp per row.
inline unsigned warpBlocks(int rows)
{
    const int perBlock = kThreads / kWarp;
    return static_cast<unsigned>((rows + perBlock - 1) / perBlock);
}

__device__ inline std::size_t firstIndex()
{
    return blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
}

__device__ inline std::size_t strideAll()
{
    return std::size_t(gridDim.x) * blockDim.x;
}

// With warpBlocks' geometry: the row this thread's warp takes, and the thread's lane in it.
__device__ inline int warpRow()
{
    return int(blockIdx.x) * (kThreads / kWarp) + int(threadIdx.x) / kWarp;
}

__device__ inline int lane()
{
    return int(threadIdx.x) % kWarp;
}

__device__ inline float warpSum(float x)
{
    for (int o = kWarp / 2; o > 0; o /= 2)
        x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

__device__ inline float warpMax(float x)
{
    for (int o = kWarp / 2; o > 0; o /= 2)
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}

__device__ inline math::MaxSum warpMaxSum(math::MaxSum a)
{
    for (int o = kWarp / 2; o > 0; o /= 2) {
        const math::MaxSum b { __shfl_xor_sync(0xffffffffu, a.max, o), __shfl_xor_sync(0xffffffffu, a.sum, o) };
        a = math::maxSumMerge(a, b);
    }
    return a;
}

} // namespace loom::device::grid
