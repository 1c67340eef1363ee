// loom-device-check: every CUDA kernel (engine/device/CudaKernels) against CpuKernels on random inputs; with
// --bench the memory-bound kernels' bandwidth beside a device-to-device copy measured in the same run; with
// --step the kernel sequence of a GPT-2 124M bf16 step as tokens/s and MFU.
// Exit status: 0 all within bounds, 1 some not, 77 no usable GPU (CTest's skip code). No Qt, no MPI.
//
// Bounds. fp32: 1e-5 relative plus 1e-6 absolute (strict fp32 products, no TF32). bf16 / fp16 products
// (inputs rounded to 16 bits, fp32 accumulation): each input carries a relative error of at most u
// (u = 2^−9 for bf16, 2^−11 for fp16, round to nearest even), so each term a·b at most 2u + u², and the fp32
// sums of both sides at most K·2^−24 each: |ΔC_ij| ≤ (2u + u² + 2K·2^−24)·Σ_k |A_ik||B_kj|, taken per
// element from |A|·|B| computed on the host. Attention in 16 bits: the scores' errors Δs bound as above,
// the softmax passes them on as |Δp_ij| ≤ 2·p_ij·max_k|Δs_ik| (first order), and P·V adds the rounding of P
// and V: |ΔY_i| ≤ Σ_j (2·p_ij·max_k|Δs_ik| + 2u·p_ij)·|v_j|, doubled for the second-order terms.
#include "engine/device/CudaDevice.h"
#include "engine/device/CudaKernels.h"
#include "engine/device/DeviceProbe.h"
#include "engine/tools/DeviceCheckCases.h"

#include <cstdio>
#include <cstring>
#include <string>

using namespace loom;

int main(int argc, char** argv)
{
    bool bench = false, stepBench = false;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--bench") == 0) {
            bench = true;
        } else if (std::strcmp(argv[i], "--step") == 0) {
            stepBench = true;
        } else {
            std::fprintf(stderr, "usage: loom-device-check [--bench] [--step]\n");
            return 64;
        }
    }
    const device::GpuProbe probe = device::probeGpus();
    if (probe.count == 0) {
        std::printf("loom-device-check: skipped: %s\n", probe.found.c_str());
        return 77;
    }
    try {
        device::CudaDevice gpu(0);
        std::printf("loom-device-check on %s\n", gpu.name().c_str());
        int failures = tools::checkDevice(gpu);
        for (auto p : { device::GemmPrecision::Fp32, device::GemmPrecision::Bf16, device::GemmPrecision::Fp16 })
            failures += tools::checkKernels(gpu, p);
        if (bench)
            tools::benchBandwidth(gpu);
        if (stepBench)
            tools::benchStep(gpu, 989.4); // H100/H200 SXM bf16 dense peak (NVIDIA's data sheets)
        std::printf(
            "loom-device-check: %s (%d outside their bounds)\n", failures ? "FAILED" : "all within bounds", failures);
        return failures ? 1 : 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "loom-device-check: %s\n", e.what());
        return 1;
    }
}
