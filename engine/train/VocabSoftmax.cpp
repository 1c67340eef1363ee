#include "engine/train/VocabSoftmax.h"

#include "engine/train/Threads.h"

#include <algorithm>
#include <cmath>

namespace loom::train::vocab {

namespace {

// Rows of 50 K columns are worth a thread each; fewer than this many rows per thread are not.
constexpr std::size_t kRowsPerThread = 4;

// fn(t, row t of z) for the T rows of Vl columns, split over `threads`.
template <typename Fn> void forEachRow(float* z, int T, int Vl, int threads, Fn&& fn)
{
    parallelFor(
        static_cast<std::size_t>(T), threads,
        [&](std::size_t, std::size_t b, std::size_t e) {
            for (std::size_t t = b; t < e; ++t)
                fn(t, z + t * static_cast<std::size_t>(Vl));
        },
        kRowsPerThread);
}

// The target's column in this rank's slice, or -1 when another rank holds it.
std::int64_t localTarget(std::int32_t target, std::int64_t first, int Vl)
{
    const std::int64_t local = target - first;
    return local >= 0 && local < Vl ? local : -1;
}

} // namespace

void rowMax(float* z, int T, int Vl, std::int64_t first, std::int64_t vocab, float* max, int threads)
{
    const int real = static_cast<int>(std::clamp<std::int64_t>(vocab - first, 0, Vl));
    forEachRow(z, T, Vl, threads, [&](std::size_t t, float* r) {
        std::fill(r + real, r + Vl, -INFINITY); // padding rows of the head are not words
        float m = -INFINITY;
        for (int v = 0; v < real; ++v)
            m = std::max(m, r[v]);
        max[t] = m;
    });
}

void expSums(float* z, int T, int Vl, const float* max, const std::int32_t* targets, std::int64_t first, float* sums,
    float* targetShift, int threads)
{
    forEachRow(z, T, Vl, threads, [&](std::size_t t, float* r) {
        const float m = max[t];
        if (const std::int64_t target = localTarget(targets[t], first, Vl); target >= 0)
            targetShift[t] = r[target] - m;
        float s = 0;
        for (int v = 0; v < Vl; ++v) {
            r[v] = std::exp(r[v] - m);
            s += r[v];
        }
        sums[t] = s;
    });
}

void gradient(float* z, int T, int Vl, const float* sums, const std::int32_t* targets, std::int64_t first, float scale,
    int threads)
{
    forEachRow(z, T, Vl, threads, [&](std::size_t t, float* g) {
        const float s = sums[t];
        const std::int64_t target = localTarget(targets[t], first, Vl);
        const float atTarget = target >= 0 ? g[target] : 0.0f;
        for (int v = 0; v < Vl; ++v)
            g[v] = g[v] / s * scale;
        if (target >= 0)
            g[target] = (atTarget / s - 1.0f) * scale;
    });
}

} // namespace loom::train::vocab
