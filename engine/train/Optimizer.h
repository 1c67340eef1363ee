#pragma once

#include "engine/plan/OptimizerSpec.h"
#include "engine/train/Parameters.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace loom::train {

// The learning rate: linear warm-up to `maxLr` over `warmup` steps, then cosine decay to `minLr` at `total`.
struct LearningRate {
    double maxLr = 1e-3;
    double minLr = 1e-4;
    std::int64_t warmup = 10;
    std::int64_t total = 100;
    double at(std::int64_t step) const;
};

// The optimizer's loops stream their arrays a cache line (kLineFloats) at a time and prefetch each array
// kPrefetchAhead floats (1 KiB) ahead, once per line. One core streaming from memory keeps too few requests
// in flight on its own: with these hints the update took 132 to 141 ms instead of 156 to 161 for 124 M
// floats, and the squares 33 instead of 40 (2026-12-01, one core of the development machine).
inline constexpr std::size_t kLineFloats = 16, kPrefetchAhead = 256;

// Which of optimizer.weight_decay_on's groups a parameter tensor (by its name in ParamSet) belongs to:
// wte and wpe the embedding, lm_head, a router, a norm's gain or shift, a bias, else a matrix.
plan::OptimizerSpec::DecayGroup decayGroupOf(const std::string& tensor);

// The sum of squares of x[0, n) (the gradient norm's share of one tensor): vectorised, in double lanes, and
// split over `threads` (computeThreads() when 0) in a fixed way, so the result does not vary between runs.
double sumOfSquares(const float* x, std::size_t n, int threads = 0);

// AdamW (Loshchilov & Hutter) over a range of the flat parameter buffer, or over several (ZeRO-1 as
// Megatron's distributed optimizer shards it: this rank's piece of every gradient bucket; the moments of
// the ranges one after another). Weight decay applies where `decayMask` is 1. With ZeRO-1 each
// data-parallel rank owns its ranges and keeps moments only for them.
// step() runs in float with its constants computed once per step, vectorised and split over
// computeThreads(); `gradScale` (the clipping factor) is applied inside the same pass. `decayMask` is read
// into runs of equal values on the first step and must stay the same (contents and buffer) afterwards.
// The moments are allocated on `device` (the parameters' device, so a GPU run keeps them in GPU memory);
// step() computes on the CPU and so needs a device whose memory the host addresses (a CpuDevice): on
// another it throws instead of reading GPU pointers (CudaKernels::adamw is the GPU's update).
class AdamW {
public:
    AdamW(std::size_t begin, std::size_t end, double beta1 = 0.9, double beta2 = 0.95, double eps = 1e-8,
        double weightDecay = 0.1, device::Device& device = hostDevice());
    using Ranges = std::vector<std::pair<std::size_t, std::size_t>>;
    explicit AdamW(Ranges ranges, double beta1 = 0.9, double beta2 = 0.95, double eps = 1e-8, double weightDecay = 0.1,
        device::Device& device = hostDevice());
    void step(
        float* params, const float* grads, const std::vector<std::uint8_t>& decayMask, double lr, float gradScale);
    // The first range's begin and the last range's end (one range: the range).
    std::size_t begin() const { return m_begin; }
    std::size_t end() const { return m_end; }
    // The flat ranges [begin, end), in the order their moments are kept.
    const Ranges& ranges() const { return m_ranges; }
    std::int64_t steps() const { return m_t; }
    double beta1() const { return m_beta1; }
    double beta2() const { return m_beta2; }
    double eps() const { return m_eps; }
    double weightDecay() const { return m_weightDecay; }
    // The first and second moments of [begin, end), for checkpoints (on device(): copy them to read them).
    FlatValues& firstMoment() { return m_m; }
    FlatValues& secondMoment() { return m_v; }
    const FlatValues& firstMoment() const { return m_m; }
    const FlatValues& secondMoment() const { return m_v; }
    device::Device& device() const { return m_m.device(); }
    void setSteps(std::int64_t t) { m_t = t; }

private:
    std::size_t m_begin, m_end;
    Ranges m_ranges;
    double m_beta1, m_beta2, m_eps, m_weightDecay;
    std::int64_t m_t = 0;
    FlatValues m_m, m_v;
    struct Run {
        std::size_t start; // in the moments
        std::size_t flat; // where start lies in the flat buffer
        bool decay;
    };
    std::vector<Run> m_runs; // decayMask over the ranges as runs of equal values within one range
    const std::uint8_t* m_runsOf = nullptr;
    std::size_t m_runsSize = 0;
};

} // namespace loom::train
