#pragma once

#include "engine/comm/Communicator.h"
#include "engine/train/Parameters.h"

#include <vector>

namespace loom::train {

// Data-parallel gradient reduction in buckets (PyTorch DDP's scheme): parameters are grouped into
// contiguous ranges of the flat gradient buffer of about `bucketBytes`; with overlap on, a bucket's
// all-reduce starts as soon as backward has finished every parameter in it, while the rest of backward
// runs. Lossy codecs keep one error-feedback state per bucket.
//
// `groups` (one value per parameter, or empty) keeps parameters of different groups out of one bucket. A
// lossy codec's result depends on the whole bucket (top-k's selection, int8's block scales), so copies of a
// tensor that other ranks of the same replica hold too (TP-replicated tensors, the token embedding on the
// first and last pipeline stage) must share a bucket only with such copies to stay identical.
class GradientSync {
public:
    GradientSync(ParamSet& params, comm::Communicator* dp, std::size_t bucketBytes, bool overlap,
                 comm::CollectiveOptions options, bool errorFeedback, const std::vector<int>& groups = {});

    // Backward has finished parameter `index` for this step.
    void markReady(int index);
    // Starts whatever has not started and waits for every bucket.
    void finish();
    void reset();
    std::size_t bucketCount() const { return m_buckets.size(); }
    // The buckets as [begin, end) ranges of the flat buffer.
    std::vector<std::pair<std::size_t, std::size_t>> bucketRanges() const;
    // Off: the codec is not used (an uncompressed all-reduce; the codec warm-up).
    void setCompressed(bool on) { m_options.codec = on ? m_codec : plan::Codec{}; }
    // Off: gradients stay local (the optimizer communicates instead; see SparseAdam).
    void setEnabled(bool on) { m_enabled = on; }

private:
    struct Bucket {
        std::size_t begin = 0, end = 0;  // in the flat buffer
        int waiting = 0;                 // parameters not yet ready this step
        int size = 0;
        comm::WorkPtr work;
        comm::ErrorFeedback feedback;
    };
    void launch(Bucket& b);

    ParamSet& m_params;
    comm::Communicator* m_dp;
    bool m_overlap;
    bool m_errorFeedback;
    bool m_enabled = true;
    plan::Codec m_codec;
    comm::CollectiveOptions m_options;
    std::vector<Bucket> m_buckets;
    std::vector<int> m_bucketOf;  // parameter -> bucket
};

}  // namespace loom::train
