#pragma once

// CudaKernels' scratch memory, shared by its two source files (CudaKernels.cpp, CudaKernelsOps.cpp).
#include "engine/device/CudaKernels.h"

namespace loom::device {

// Device memory the kernels reuse between calls, grown when a call needs more (cudaFree waits for the
// device, so a buffer is never freed under queued work).
struct CudaKernels::Scratch {
    Buffer<std::uint16_t> half[2];
    Buffer<std::uint8_t> workspace;
    Buffer<float> dP;
    Buffer<double> sum;
    Buffer<int> flag;

    template <class T> static T* atLeast(Buffer<T>& b, Device& device, std::size_t n)
    {
        if (b.size() < n)
            b = Buffer<T>(device, n);
        return b.data();
    }
};

} // namespace loom::device
