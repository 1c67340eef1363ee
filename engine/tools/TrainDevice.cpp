#include "engine/tools/TrainDevice.h"

namespace loom::tools {

std::optional<device::DeviceKind> parseDeviceKind(const std::string& text)
{
    if (text == "cpu")
        return device::DeviceKind::Cpu;
    if (text == "cuda")
        return device::DeviceKind::Cuda;
    return std::nullopt;
}

DeviceChoice chooseDevice(std::optional<device::DeviceKind> asked, const plan::Layout& layout)
{
    if (asked)
        return { *asked, std::string("--device ") + device::deviceKindName(*asked) };
    if (layout.onGpuCluster() && layout.commBackend() == plan::CommBackend::Nccl)
        return { device::DeviceKind::Cuda, "the default for a GPU cluster's layout on NCCL" };
    return { device::DeviceKind::Cpu, "the default for a layout on CPU ranks" };
}

std::string deviceProblem(int rank, const DeviceChoice& choice, const device::GpuProbe& probe)
{
    if (choice.kind == device::DeviceKind::Cpu)
        return {};
    const std::string who = "loom-train: rank " + std::to_string(rank) + ": device "
        + device::deviceKindName(choice.kind) + " (" + choice.why + ")";
    if (!probe.built || probe.count == 0)
        return who + " asked, but no usable GPU was found: " + probe.found + "; run with --device cpu"
            + (choice.why.rfind("--device", 0) == 0 ? "" : " (and comm.backend \"mpi\" or \"gloo\")")
            + " to train on CPU cores";
    return who + " asked and " + probe.found
        + " found, but loom-train's trainer does not yet keep its buffers on a GPU (the CUDA kernels are built, the "
          "device-generic trainer is not); run with --device cpu to train on CPU cores";
}

std::string precisionNote(const DeviceChoice& choice, const plan::Layout& layout)
{
    if (choice.kind != device::DeviceKind::Cpu || layout.precision == plan::Precision::Fp32)
        return {};
    return "loom-train: the layout asks precision " + std::string(plan::toString(layout.precision))
        + "; on the CPU loom-train computes in fp32 (16-bit precision is the CUDA device's)";
}

} // namespace loom::tools
