#pragma once

#include "engine/train/Kernels.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace loom::train {

// The weight-gradient products of a backward pass, dW[K×N] += Xᵀ·dY over T rows, run at once or kept for
// later. Zero-bubble schedules (Qi et al. 2024) split a backward into B, which computes the gradients of
// the inputs (sent upstream at once, since the previous stage waits for them), and W, the weight
// gradients, which nothing downstream waits for and which fill the pipeline's bubbles. While deferring, a
// product's X and dY are copied: that copy is the memory a deferred W holds (the activations it reads and
// the output gradients), counted by floats(). Biases' and norms' gradients are cheap row sums and stay in
// B; W is the GEMMs, the part that costs as much as B.
class WeightGradQueue {
public:
    struct Product {
        float* grad = nullptr;
        int K = 0, N = 0, T = 0;
        std::vector<float> X, dY;
        int tensor = -1; // the parameter, for the trainer's per-tensor work after it (its norm's squares)
    };
    // A W: the products of one backward in order, with the block each group closes (-1: not a block).
    struct Work {
        std::vector<Product> products;
        std::vector<std::pair<std::size_t, std::int64_t>> blockEnds; // (products before it, layer)
        std::size_t floats() const;
    };

    void setDeferring(bool on) { m_deferring = on; }
    bool deferring() const { return m_deferring; }
    // dW += Xᵀ·dY now (and `done(tensor)` after it), or a copy of X and dY kept for the next take().
    void add(Kernels& k, float* grad, int tensor, int K, int N, int T, const float* X, const float* dY,
        const std::function<void(int)>& done = {});
    // The products added since the last mark close block `layer` (W reports the block done after them).
    void endBlock(std::int64_t layer);
    Work take();
    // Runs a W's products in order: `done(tensor)` after each, `blockDone(layer)` after each block's.
    static void run(Kernels& k, Work& work, const std::function<void(int)>& done,
        const std::function<void(std::int64_t)>& blockDone);

private:
    bool m_deferring = false;
    Work m_work;
};

} // namespace loom::train
