#pragma once

#include "engine/device/Device.h"
#include "engine/train/Kernels.h"

#include <cstdint>
#include <functional>
#include <memory>

namespace loom::device {

// The kernel sequence of one GPT-2 training step (forward, backward, AdamW) on one device through the
// Kernels interface, with every buffer allocated once on `device`: what a device-resident trainer would
// launch, without the trainer (no data, no parallelism, no checkpoint). It measures the kernels at a real
// model's shapes (loom-device-check --step) and, on CpuDevice with CpuKernels, runs in the default suite
// so that shape and offset mistakes show there (tst_kernelstep). The residual additions are left out (a
// few memory-bound passes); the loss is the caller's (the fused cross-entropy on a GPU, the CPU's softmax
// otherwise), handed the logits [T, V] to turn into their gradient in place.
struct StepShape {
    int batch = 1, seq = 8, hidden = 16, heads = 2, layers = 2, vocab = 50;
    int rows() const { return batch * seq; }
};

class KernelStep {
public:
    using Loss = std::function<void(float* logits, const std::int32_t* targets, int rows, int vocab)>;
    // Allocates parameters, gradients, moments and activations, and fills them (weights small and random,
    // deterministic from `seed`). Throws DeviceError when the device has too little memory.
    KernelStep(Device& device, train::Kernels& kernels, StepShape shape, Loss loss, std::uint64_t seed = 1);
    ~KernelStep();
    KernelStep(const KernelStep&) = delete;
    KernelStep& operator=(const KernelStep&) = delete;

    // Queues one step; returns at once (synchronise through the device to wait for it).
    void run();
    // Parameters (flat) and their count, for checks.
    const float* parameters() const;
    float* parameters(); // for a finite-difference check of the gradients
    const float* gradients() const;
    float* gradients(); // for an optimizer step after run()
    std::size_t parameterCount() const;

private:
    struct Buffers;
    void forward();
    void backward();
    Device& m_device;
    train::Kernels& m_kernels;
    StepShape m_shape;
    Loss m_loss;
    std::unique_ptr<Buffers> m_b;
};

} // namespace loom::device
