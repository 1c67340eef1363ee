#include "engine/comm/NcclKernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace loom::comm::cuda {

namespace {

__device__ inline float toFloat(float x)
{
    return x;
}
__device__ inline float toFloat(__half x)
{
    return __half2float(x);
}
__device__ inline float toFloat(__nv_bfloat16 x)
{
    return __bfloat162float(x);
}
template <typename T> __device__ inline T fromFloat(float x);
template <> __device__ inline float fromFloat<float>(float x)
{
    return x;
}
template <> __device__ inline __half fromFloat<__half>(float x)
{
    return __float2half_rn(x);
}
template <> __device__ inline __nv_bfloat16 fromFloat<__nv_bfloat16>(float x)
{
    return __float2bfloat16_rn(x);
}

template <typename T> __global__ void reduceKernel(T* dst, const T* src, std::size_t n, int op)
{
    for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
         i += std::size_t(gridDim.x) * blockDim.x) {
        const float a = toFloat(dst[i]), b = toFloat(src[i]);
        const float r = op == 0 ? a + b : op == 1 ? fmaxf(a, b) : fminf(a, b);
        dst[i] = fromFloat<T>(r);
    }
}

template <typename T>
cudaError_t launch(void* dst, const void* src, std::size_t count, ReduceOp op, cudaStream_t stream)
{
    if (count == 0)
        return cudaSuccess;
    const unsigned threads = 256;
    const std::size_t wanted = (count + threads - 1) / threads;
    const unsigned blocks = static_cast<unsigned>(wanted < 4096 ? wanted : 4096);
    reduceKernel<T><<<blocks, threads, 0, stream>>>(static_cast<T*>(dst), static_cast<const T*>(src), count, int(op));
    return cudaGetLastError();
}

} // namespace

cudaError_t reduce(void* dst, const void* src, std::size_t count, DType type, ReduceOp op, cudaStream_t stream)
{
    switch (type) {
    case DType::F32:
        return launch<float>(dst, src, count, op, stream);
    case DType::F16:
        return launch<__half>(dst, src, count, op, stream);
    case DType::BF16:
        return launch<__nv_bfloat16>(dst, src, count, op, stream);
    }
    return cudaErrorInvalidValue;
}

} // namespace loom::comm::cuda
