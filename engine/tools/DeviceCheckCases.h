#pragma once

#include "engine/device/CudaKernels.h"

namespace loom::tools {

// Runs every kernel of CudaKernels at `precision` against CpuKernels (DeviceCheck.cpp states the bounds),
// printing one line per case; returns how many were outside their bound.
int checkKernels(device::Device& gpu, device::GemmPrecision precision);

// The Device contract (Device.h) on the GPU: copies, streams, fills, events, errors; returns the failures.
int checkDevice(device::Device& gpu);

// GELU, LayerNorm and AdamW as bytes moved per second, beside cudaMemcpy device-to-device in the same run.
void benchBandwidth(device::Device& gpu);

// The kernel sequence of a GPT-2 124M bf16 step (device::KernelStep) at the largest micro-batch that fits:
// tokens/s and MFU against `peakTflops` (DeviceStepBench.cpp).
void benchStep(device::Device& gpu, double peakTflops);

} // namespace loom::tools
