#pragma once

#include "engine/comm/DType.h"

#include <cuda_runtime_api.h>

#include <cstddef>

namespace loom::comm::cuda {

// dst[i] = dst[i] op src[i] on the device, fp16/bf16 accumulated in fp32. Enqueued on `stream`.
cudaError_t reduce(void* dst, const void* src, std::size_t count, DType type, ReduceOp op, cudaStream_t stream);

} // namespace loom::comm::cuda
