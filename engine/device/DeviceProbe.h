#pragma once

#include <string>

namespace loom::device {

// What this process can see of CUDA GPUs, for choosing and refusing a device before any work starts.
struct GpuProbe {
    bool built = false; // whether this program was built with the CUDA parts
    int count = 0; // usable GPUs (0 when the probe failed)
    std::string found; // for messages: "1 GPU (cuda:0 NVIDIA H200)", "cudaGetDeviceCount failed: ...", ...
};

// Asks the CUDA runtime (cudaGetDeviceCount, the devices' names); never throws. Without the CUDA parts
// built, reports that and touches nothing.
GpuProbe probeGpus();

} // namespace loom::device
