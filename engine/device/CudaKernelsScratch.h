#pragma once

// CudaKernels' scratch memory, shared by its two source files (CudaKernels.cpp, CudaKernelsOps.cpp).
#include "engine/device/CudaKernels.h"

#include <array>
#include <cstdint>
#include <map>

namespace loom::device {

// Device memory the kernels reuse between calls, grown when a call needs more (cudaFree waits for the
// device, so a buffer is never freed under queued work).
struct CudaKernels::Scratch {
    Buffer<std::uint16_t> half[2];
    Buffer<std::uint8_t> workspace;
    Buffer<float> dP;
    Buffer<double> sum;
    Buffer<int> flag;
    // cuBLASLt's chosen algorithm per product shape (cublasLtMatmulAlgo_t, 64 opaque bytes): asking the
    // heuristic costs more than a small product, so each shape asks once. The key: transA, transB, M, N, K,
    // epilogue, aux, accumulate, and the operands' alignments (an algorithm chosen for aligned pointers may
    // not take offset ones).
    using GemmKey = std::array<long long, 9>;
    std::map<GemmKey, std::array<std::uint64_t, 8>> algorithms;

    template <class T> static T* atLeast(Buffer<T>& b, Device& device, std::size_t n)
    {
        if (b.size() < n)
            b = Buffer<T>(device, n);
        return b.data();
    }
};

} // namespace loom::device
