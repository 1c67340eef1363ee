#pragma once

#include <cstdint>
#include <vector>

namespace loom::bench {

// A plain GPT-2 training step written for the benchmarks: forward, backward, global-norm clipping and
// AdamW over float arrays with straightforward loops (the kind of code a careful person writes first,
// compiled with -O3 -ffast-math like llm.c's -Ofast), no BLAS, no fusion. The matrix products and the
// attention are split over `threads` by rows (heads for attention); everything else runs on one thread.
// It is the "same run" reference that Loom's step time is divided by: it does the same arithmetic on
// the same shapes, so the ratio shows what Loom's kernels, threads and optimizer buy.
struct ReferenceShape {
    int vocab = 50257, seqLen = 64, hidden = 768, layers = 12, heads = 12;
};

class ReferenceGpt2 {
public:
    ReferenceGpt2(ReferenceShape shape, int batch, std::uint64_t seed, int threads);
    // One step on tokens and targets of batch × seqLen; returns the mean cross-entropy before the update.
    float step(const std::int32_t* tokens, const std::int32_t* targets, float lr);
    // Seconds of the last step spent in clipping and AdamW.
    double optimizerSeconds() const { return m_optimizerSeconds; }
    std::size_t parameterCount() const { return m_params.size(); }

private:
    struct Offsets {
        std::size_t wte, wpe, ln1w, ln1b, qkvw, qkvb, attw, attb, ln2w, ln2b, fcw, fcb, projw, projb, lnfw, lnfb, total;
    };
    struct Acts {
        std::size_t encoded, ln1, ln1Mean, ln1Rstd, qkv, atty, preatt, att, attproj, res2, ln2, ln2Mean, ln2Rstd, fch,
            fchGelu, fcproj, res3, lnf, lnfMean, lnfRstd, logits, probs, losses, total;
    };
    void forward(const std::int32_t* tokens, const std::int32_t* targets);
    void backward(const std::int32_t* tokens, const std::int32_t* targets);
    float* p(std::size_t o) { return m_params.data() + o; }
    float* g(std::size_t o) { return m_grads.data() + o; }
    float* a(std::size_t o) { return m_acts.data() + o; }
    float* d(std::size_t o) { return m_dacts.data() + o; }

    ReferenceShape m_s;
    int m_b;
    int m_threads;
    Offsets m_p {};
    Acts m_a {};
    std::vector<float> m_params, m_grads, m_m, m_v, m_acts, m_dacts;
    std::int64_t m_t = 0;
    double m_optimizerSeconds = 0;
};

} // namespace loom::bench
