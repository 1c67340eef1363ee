#include "engine/device/DeviceProbe.h"

#if defined(LOOM_WITH_CUDA_DEVICE)
#include <cuda_runtime.h>
#endif

namespace loom::device {

GpuProbe probeGpus()
{
    GpuProbe probe;
#if defined(LOOM_WITH_CUDA_DEVICE)
    probe.built = true;
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
        probe.found = std::string("cudaGetDeviceCount failed: ") + cudaGetErrorName(status) + " ("
            + cudaGetErrorString(status) + ")";
        return probe;
    }
    probe.count = count;
    if (count == 0) {
        probe.found = "no GPU (cudaGetDeviceCount found 0)";
        return probe;
    }
    probe.found = std::to_string(count) + (count == 1 ? " GPU (" : " GPUs (");
    for (int i = 0; i < count; ++i) {
        cudaDeviceProp prop {};
        const bool named = cudaGetDeviceProperties(&prop, i) == cudaSuccess;
        probe.found += (i ? ", cuda:" : "cuda:") + std::to_string(i) + " " + (named ? prop.name : "unnamed");
    }
    probe.found += ")";
#else
    probe.found = "this program was built without the CUDA parts (WITH_CUDA off or no CUDA toolkit at build time)";
#endif
    return probe;
}

} // namespace loom::device
