// loom-device-check --step: the kernel sequence of a GPT-2 124M training step (device::KernelStep: forward,
// backward, fused cross-entropy, then the gradient norm and AdamW) on the GPU at seq 1024 with bf16 GEMM
// inputs, at the largest micro-batch that fits, as tokens/s and MFU. It is the kernels without a trainer
// (no embedding, no residual additions, no data), so it bounds what a device-resident trainer would reach;
// tests/gpu/torch_gpt2_step.py measures PyTorch's step of the same model in the same run.
#include "engine/device/KernelStep.h"
#include "engine/tools/DeviceCheckCases.h"

#include <cmath>
#include <cstdio>
#include <memory>

namespace loom::tools {

void benchStep(device::Device& gpu, double peakTflops)
{
    const int L = 12, h = 768, V = 50257, s = 1024;
    device::CudaKernels k(gpu, device::GemmPrecision::Bf16);
    device::Buffer<float> max, sum, shift;
    auto loss = [&](float* z, const std::int32_t* targets, int T, int vocab) {
        k.crossEntropyStats(z, T, vocab, 0, vocab, targets, max.data(), sum.data(), shift.data());
        k.crossEntropyGradient(z, T, vocab, 0, vocab, max.data(), sum.data(), targets, 1.0f / float(T));
    };
    std::unique_ptr<device::KernelStep> step;
    int batch = 0;
    for (int b : { 32, 24, 16, 12, 8, 4, 2, 1 }) {
        try {
            max = device::Buffer<float>(gpu, std::size_t(b) * s);
            sum = device::Buffer<float>(gpu, std::size_t(b) * s);
            shift = device::Buffer<float>(gpu, std::size_t(b) * s);
            step = std::make_unique<device::KernelStep>(gpu, k, device::StepShape { b, s, h, 12, L, V }, loss);
            batch = b;
            break;
        } catch (const device::DeviceError&) {
            step.reset();
        }
    }
    if (!step) {
        std::printf("item 4 (Loom kernels): not even micro-batch 1 fits\n");
        return;
    }
    const std::size_t n = step->parameterCount();
    device::Buffer<float> m(gpu, n), v(gpu, n);
    device::Buffer<std::uint8_t> mask(gpu, n);
    gpu.fillBytes(m.data(), 0, m.bytes());
    gpu.fillBytes(v.data(), 0, v.bytes());
    gpu.fillBytes(mask.data(), 1, mask.bytes());
    auto once = [&](int t) {
        step->run();
        const float clip = device::math::clipScale(std::sqrt(k.sumOfSquares(step->gradients(), n)), 1.0);
        const double c1 = 1 - std::pow(0.9, t), c2 = 1 - std::pow(0.95, t);
        const device::math::AdamStep a { 0.9f, 0.95f, 0.1f, 0.05f, float(1 / c1), float(1 / c2), 1e-4f, 1e-5f, 1e-8f,
            clip };
        k.adamw(step->parameters(), step->gradients(), m.data(), v.data(), mask.data(), n, a);
    };
    once(1);
    once(2);
    gpu.synchronize();
    device::Event start = gpu.createEvent(), end = gpu.createEvent();
    const int steps = 5;
    gpu.recordEvent(start, k.stream());
    for (int t = 0; t < steps; ++t)
        once(3 + t);
    gpu.recordEvent(end, k.stream());
    const double seconds = gpu.elapsedMs(start, end) / 1e3 / steps;
    gpu.destroyEvent(start);
    gpu.destroyEvent(end);
    const double tokens = double(batch) * s;
    const double flops = 72.0 * batch * s * L * double(h) * h * (1 + s / (6.0 * h) + V / (12.0 * L * h));
    std::printf("item 4 (Loom kernels, no trainer): GPT-2 124M, seq %d, bf16 GEMM inputs, micro-batch %d: %.4f s "
                "per step, %.0f tokens/s, MFU %.3f (peak %.1f TFLOP/s)\n",
        s, batch, seconds, tokens / seconds, flops / seconds / (peakTflops * 1e12), peakTflops);
}

} // namespace loom::tools
