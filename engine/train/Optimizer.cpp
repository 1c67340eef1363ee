#include "engine/train/Optimizer.h"

#include "engine/train/Threads.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace loom::train {

plan::OptimizerSpec::DecayGroup decayGroupOf(const std::string& t)
{
    using G = plan::OptimizerSpec::DecayGroup;
    auto ends = [&](const std::string& s) {
        return t.size() >= s.size() && t.compare(t.size() - s.size(), s.size(), s) == 0;
    };
    if (t == "wte" || t == "wpe")
        return G::Embedding;
    if (t == "lm_head")
        return G::LmHead;
    if (ends("router.w"))
        return G::Router;
    if (t.rfind("lnf.", 0) == 0 || ends(".g") || ends("ln1.b") || ends("ln2.b"))
        return G::Norm;
    if (ends(".b"))
        return G::Bias;
    return G::Matrices;
}

double LearningRate::at(std::int64_t step) const
{
    if (step < warmup)
        return maxLr * static_cast<double>(step + 1) / static_cast<double>(warmup);
    if (total <= warmup)
        return maxLr;
    const double progress = std::min(1.0, static_cast<double>(step - warmup) / static_cast<double>(total - warmup));
    return minLr + 0.5 * (maxLr - minLr) * (1.0 + std::cos(3.141592653589793 * progress));
}

namespace {

// Both loops are built for AVX-512, AVX2 and the baseline, the one the CPU runs chosen when the program
// loads (GCC's function multiversioning). Without contraction into fused multiply-adds (-ffp-contract=off,
// CMakeLists.txt) every version does the same correctly rounded operations in the same order: the same bits.
#define LOOM_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

// Near an array's end the prefetch hints (Optimizer.h) repeat its last element (std::min), never past it.

// Four streams (the quarters of the range) of eight independent double lanes each: the compiler vectorises
// the inner loops without reassociating anything, and reading four places at once keeps more of the
// memory's requests in flight than one stream does (one core here: 39 against 64 ms for 124 M floats).
// Each stream is prefetched once per cache line: a hint for every eight floats, two per line, took 51 ms
// instead of 33 for 124 M floats (2026-12-01 evening, one core of the development machine).
LOOM_VECTOR_CLONES double squares(const float* x, std::size_t n)
{
    constexpr std::size_t kLanes = 8, kStreams = 4;
    const std::size_t quarter = n / kStreams / kLineFloats * kLineFloats;
    double lane[kStreams][kLanes] = {};
    for (std::size_t i = 0; i < quarter; i += kLineFloats)
        for (std::size_t s = 0; s < kStreams; ++s) {
            const float* line = x + s * quarter + i;
            __builtin_prefetch(x + std::min(s * quarter + i + kPrefetchAhead, n - 1));
            for (std::size_t half = 0; half < kLineFloats; half += kLanes)
                for (std::size_t j = 0; j < kLanes; ++j) {
                    const double v = line[half + j];
                    lane[s][j] += v * v;
                }
        }
    double sum = 0;
    for (std::size_t i = kStreams * quarter; i < n; ++i)
        sum += double(x[i]) * double(x[i]);
    for (const auto& stream : lane)
        for (double l : stream)
            sum += l;
    return sum;
}

struct AdamConstants {
    float beta1, beta2, oneMinusBeta1, oneMinusBeta2;
    float invC1, invC2; // bias corrections
    float lr, decay, eps, gradScale;
};

// Elements [from, to) of one run of elements that share their weight decay (`decay` is lr·weight_decay or 0).
inline void updateRange(const AdamConstants& k, float decay, float* __restrict params, const float* __restrict grads,
    float* __restrict m, float* __restrict v, std::size_t from, std::size_t to)
{
    for (std::size_t i = from; i < to; ++i) {
        const float g = grads[i] * k.gradScale;
        const float mi = k.beta1 * m[i] + k.oneMinusBeta1 * g;
        const float vi = k.beta2 * v[i] + k.oneMinusBeta2 * g * g;
        m[i] = mi;
        v[i] = vi;
        const float p = params[i];
        params[i] = (p - decay * p) - k.lr * (mi * k.invC1) / (std::sqrt(vi * k.invC2) + k.eps);
    }
}

// The run in blocks of one cache line per array, each block's lines prefetched kPrefetchAhead floats earlier.
LOOM_VECTOR_CLONES void update(const AdamConstants& k, float decay, float* __restrict params,
    const float* __restrict grads, float* __restrict m, float* __restrict v, std::size_t n)
{
    std::size_t i = 0;
    for (; i + kLineFloats <= n; i += kLineFloats) {
        const std::size_t ahead = std::min(i + kPrefetchAhead, n - 1);
        __builtin_prefetch(grads + ahead);
        __builtin_prefetch(m + ahead, 1);
        __builtin_prefetch(v + ahead, 1);
        __builtin_prefetch(params + ahead, 1);
        updateRange(k, decay, params, grads, m, v, i, i + kLineFloats);
    }
    updateRange(k, decay, params, grads, m, v, i, n);
}

} // namespace

double sumOfSquares(const float* x, std::size_t n, int threads)
{
    const int t = threads > 0 ? threads : computeThreads();
    std::vector<double> parts(static_cast<std::size_t>(t), 0.0);
    parallelFor(n, t, [&](std::size_t part, std::size_t b, std::size_t e) { parts[part] = squares(x + b, e - b); });
    double sum = 0;
    for (double p : parts)
        sum += p;
    return sum;
}

AdamW::AdamW(std::size_t begin, std::size_t end, double beta1, double beta2, double eps, double weightDecay,
    device::Device& device)
    : AdamW(Ranges { { begin, end } }, beta1, beta2, eps, weightDecay, device)
{
}

AdamW::AdamW(Ranges ranges, double beta1, double beta2, double eps, double weightDecay, device::Device& device)
    : m_begin(ranges.empty() ? 0 : ranges.front().first)
    , m_end(ranges.empty() ? 0 : ranges.back().second)
    , m_ranges(std::move(ranges))
    , m_beta1(beta1)
    , m_beta2(beta2)
    , m_eps(eps)
    , m_weightDecay(weightDecay)
    , m_m(device)
    , m_v(device)
{
    std::size_t n = 0;
    for (const auto& [b, e] : m_ranges)
        n += e - b;
    m_m.assign(n, 0.0f);
    m_v.assign(n, 0.0f);
}

void AdamW::step(
    float* params, const float* grads, const std::vector<std::uint8_t>& decayMask, double lr, float gradScale)
{
    if (device().kind() != device::DeviceKind::Cpu)
        throw device::DeviceError("AdamW::step computes on the CPU and cannot update moments held on " + device().name()
            + "; the GPU's update is CudaKernels::adamw");
    ++m_t;
    const double c1 = 1.0 - std::pow(m_beta1, static_cast<double>(m_t));
    const double c2 = 1.0 - std::pow(m_beta2, static_cast<double>(m_t));
    const AdamConstants k { static_cast<float>(m_beta1), static_cast<float>(m_beta2), static_cast<float>(1.0 - m_beta1),
        static_cast<float>(1.0 - m_beta2), static_cast<float>(1.0 / c1), static_cast<float>(1.0 / c2),
        static_cast<float>(lr), static_cast<float>(lr * m_weightDecay), static_cast<float>(m_eps), gradScale };
    // The mask is constant per tensor: read it once into runs, so the update streams no mask bytes.
    if (m_runsOf != decayMask.data() || m_runsSize != decayMask.size()) {
        m_runs.clear();
        std::size_t at = 0; // in the moments
        for (const auto& [begin, end] : m_ranges)
            for (std::size_t i = begin; i < end; ++i, ++at)
                if (i == begin || m_runs.empty() || (decayMask[i] != 0) != m_runs.back().decay)
                    m_runs.push_back({ at, i, decayMask[i] != 0 });
        m_runsOf = decayMask.data();
        m_runsSize = decayMask.size();
    }
    const std::size_t n = m_m.size();
    if (n == 0)
        return;
    parallelFor(n, computeThreads(), [&](std::size_t, std::size_t b, std::size_t e) {
        auto run = std::upper_bound(
            m_runs.begin(), m_runs.end(), b, [](std::size_t x, const Run& r) { return x < r.start; });
        for (--run; b < e; ++run) { // the run holding b, then the following ones up to e
            const std::size_t stop = std::min(e, run + 1 == m_runs.end() ? n : (run + 1)->start);
            const std::size_t flat = run->flat + (b - run->start);
            update(
                k, run->decay ? k.decay : 0.0f, params + flat, grads + flat, m_m.data() + b, m_v.data() + b, stop - b);
            b = stop;
        }
    });
}

} // namespace loom::train
