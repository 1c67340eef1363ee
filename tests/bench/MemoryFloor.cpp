#include "tests/bench/MemoryFloor.h"

#include "engine/train/Optimizer.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace loom::bench {

namespace {

__attribute__((target_clones("avx512f", "avx2", "default"))) void pass(
    float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v, std::size_t n)
{
    std::size_t i = 0;
    for (; i + train::kLineFloats <= n; i += train::kLineFloats) { // the optimizer's blocks and prefetching
        const std::size_t ahead = std::min(i + train::kPrefetchAhead, n - 1);
        __builtin_prefetch(g + ahead);
        __builtin_prefetch(m + ahead, 1);
        __builtin_prefetch(v + ahead, 1);
        __builtin_prefetch(p + ahead, 1);
        for (std::size_t j = i; j < i + train::kLineFloats; ++j) {
            const float x = g[j];
            m[j] = 0.5f * m[j] + x;
            v[j] = 0.5f * v[j] + x;
            p[j] = 0.5f * p[j] + x;
        }
    }
    for (; i < n; ++i) {
        m[i] = 0.5f * m[i] + g[i];
        v[i] = 0.5f * v[i] + g[i];
        p[i] = 0.5f * p[i] + g[i];
    }
}

} // namespace

double adamTrafficSeconds(std::size_t n, int repeats)
{
    std::vector<float> p(n, 1.0f), g(n, 0.0f), m(n, 1.0f), v(n, 1.0f); // x + 0: no denormals, no overflow
    double best = 1e30;
    for (int r = 0; r < repeats; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        pass(p.data(), g.data(), m.data(), v.data(), n);
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
}

} // namespace loom::bench
