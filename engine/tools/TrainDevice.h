#pragma once

#include "engine/device/Device.h"
#include "engine/device/DeviceProbe.h"
#include "engine/plan/Layout.h"

#include <optional>
#include <string>

namespace loom::tools {

// Which device loom-train computes on: --device cpu|cuda, or the layout's default.
struct DeviceChoice {
    device::DeviceKind kind = device::DeviceKind::Cpu;
    std::string why; // "--device cuda", or which default it is, for messages
};

// "cpu" or "cuda"; nullopt for anything else.
std::optional<device::DeviceKind> parseDeviceKind(const std::string& text);

// --device when given; otherwise cuda for a layout that would train on GPUs (a GPU cluster on its default
// NCCL backend) and cpu for the rest: `local` clusters, and GPU-cluster layouts whose comm.backend is set to
// mpi or gloo, which is how such a layout is trained on CPU ranks today (plan::engineSupport's advice).
DeviceChoice chooseDevice(std::optional<device::DeviceKind> asked, const plan::Layout& layout);

// Empty when rank `rank` can start on the chosen device; otherwise the one line it stops with, naming the
// rank, the device asked and what was found. CUDA needs a usable GPU (probe), and then the trainer on
// device buffers, which loom-train does not have yet: a found GPU is refused too, saying so.
std::string deviceProblem(int rank, const DeviceChoice& choice, const device::GpuProbe& probe);

// One line for rank 0 when the layout asks a precision the chosen device does not compute in (the CPU
// computes in fp32 only); empty otherwise.
std::string precisionNote(const DeviceChoice& choice, const plan::Layout& layout);

} // namespace loom::tools
