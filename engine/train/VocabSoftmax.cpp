#include "engine/train/VocabSoftmax.h"

#include "engine/train/Threads.h"

#include <algorithm>
#include <cmath>

namespace loom::train::vocab {

namespace {

float* row(float* z, std::size_t t, int Vl)
{
    return z + t * static_cast<std::size_t>(Vl);
}

// Rows of 50 K columns are worth a thread each; fewer than this many rows per thread are not.
constexpr std::size_t kRowsPerThread = 4;

} // namespace

void rowMax(float* z, int T, int Vl, std::int64_t first, std::int64_t vocab, float* max, int threads)
{
    const int real = static_cast<int>(std::clamp<std::int64_t>(vocab - first, 0, Vl));
    parallelFor(
        static_cast<std::size_t>(T), threads,
        [&](std::size_t, std::size_t b, std::size_t e) {
            for (std::size_t t = b; t < e; ++t) {
                float* r = row(z, t, Vl);
                std::fill(r + real, r + Vl, -INFINITY); // padding rows of the head are not words
                float m = -INFINITY;
                for (int v = 0; v < real; ++v)
                    m = std::max(m, r[v]);
                max[t] = m;
            }
        },
        kRowsPerThread);
}

void expSums(float* z, int T, int Vl, const float* max, const std::int32_t* targets, std::int64_t first, float* sums,
    float* targetShift, int threads)
{
    parallelFor(
        static_cast<std::size_t>(T), threads,
        [&](std::size_t, std::size_t b, std::size_t e) {
            for (std::size_t t = b; t < e; ++t) {
                float* r = row(z, t, Vl);
                const float m = max[t];
                const std::int64_t target = targets[t] - first;
                if (target >= 0 && target < Vl)
                    targetShift[t] = r[target] - m;
                float s = 0;
                for (int v = 0; v < Vl; ++v) {
                    r[v] = std::exp(r[v] - m);
                    s += r[v];
                }
                sums[t] = s;
            }
        },
        kRowsPerThread);
}

void gradient(float* z, int T, int Vl, const float* sums, const std::int32_t* targets, std::int64_t first, float scale,
    int threads)
{
    parallelFor(
        static_cast<std::size_t>(T), threads,
        [&](std::size_t, std::size_t b, std::size_t e) {
            for (std::size_t t = b; t < e; ++t) {
                float* g = row(z, t, Vl);
                const float s = sums[t];
                const std::int64_t target = targets[t] - first;
                const bool mine = target >= 0 && target < Vl;
                const float atTarget = mine ? g[target] : 0.0f;
                for (int v = 0; v < Vl; ++v)
                    g[v] = g[v] / s * scale;
                if (mine)
                    g[target] = (atTarget / s - 1.0f) * scale;
            }
        },
        kRowsPerThread);
}

} // namespace loom::train::vocab
