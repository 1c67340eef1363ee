#pragma once

#include "engine/comm/AlgorithmTuner.h"
#include "engine/comm/Communicator.h"
#include "engine/train/Parameters.h"

#include <cstdint>
#include <vector>

namespace loom::train {

// What keeps a tensor's gradient out of a bucket with others (GradientSync's `groups`): buckets hold one
// group each. The values are only names; their order does not matter.
enum class BucketGroup : std::uint8_t {
    Plain, // reduced over the DP group with the others
    TpReplicated, // a lossy codec: copies on every TP rank must see the same bucket
    TiedEmbedding, // a lossy codec: the first and the last stage's copies of the tied embedding
    Experts, // MoE: reduced over the expert-data-parallel group (setGroupCommunicator)
    SharedEmbeddingRows, // ZeRO-1: each member completes its rows itself (Trainer::shareRows)
    SharedWeightRows, // the same for a block weight; such tensors are never adjacent, so each is a bucket
};

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
        comm::CollectiveOptions options, bool errorFeedback, const std::vector<BucketGroup>& groups = {});

    ~GradientSync();
    GradientSync(const GradientSync&) = delete;
    GradientSync& operator=(const GradientSync&) = delete;

    // Backward has finished parameter `index` for this step.
    void markReady(int index);
    // Staleness 0: starts whatever has not started, waits for every bucket and returns true.
    // Staleness 1: waits for the previous step's all-reduce and swaps its averaged result into the gradient
    // buffer, keeping this step's local gradients for startDelayed(); returns false when there was no
    // previous step (the first step has nothing to apply).
    bool finish();
    // Staleness 1: starts the all-reduce of the gradients finish() kept; it stays in flight across the step
    // boundary until the next finish(). Call it after the optimizer's own collectives (ZeRO-1's all-gather)
    // so that they do not queue behind it. No-op with staleness 0.
    void startDelayed();
    // 0 (default) or 1; see comm.staleness in plan::CommSpec. Set before the first step.
    void setStaleness(int staleness);
    int staleness() const { return m_staleness; }
    void reset();
    std::size_t bucketCount() const { return m_buckets.size(); }
    // The buckets as [begin, end) ranges of the flat buffer.
    std::vector<std::pair<std::size_t, std::size_t>> bucketRanges() const;
    // Off: the codec is not used (an uncompressed all-reduce; the codec warm-up).
    void setCompressed(bool on) { m_options.codec = on ? m_codec : plan::Codec {}; }
    // Off: gradients stay local (the optimizer communicates instead; see SparseAdam).
    void setEnabled(bool on) { m_enabled = on; }
    // Buckets of parameters in `group` (the constructor's `groups`) are reduced over `c` instead of the DP
    // group: experts' gradients over the expert-data-parallel group.
    void setGroupCommunicator(BucketGroup group, comm::Communicator* c);
    // ZeRO-1 as Megatron's distributed optimizer does it: member r of the DP group owns piece r of every
    // bucket (pieces of ceil(size / members) elements) and needs the sum of that piece only, so a bucket is
    // reduce-scattered in place with `options` (half the all-reduce's traffic) instead of all-reduced;
    // buckets that do not split evenly, and algorithms that cannot run in place (the library's), stay
    // all-reduced. Staleness 0 and no codec only. Set before the first step.
    void setShardedReduction(comm::CollectiveOptions options);
    // This member's pieces as flat ranges [begin, end), in flat order (empty ones left out).
    std::vector<std::pair<std::size_t, std::size_t>> ownedPieces() const;
    // After the optimizer updated this member's pieces of `values` (the flat parameters): every member's
    // pieces into every member's `values`, bucket by bucket over the DP group, each all-gather's algorithm
    // chosen by `tuning` for its size; in place where the bucket splits evenly and the algorithm allows it.
    void allGatherPieces(float* values, const comm::CollectiveTuning& tuning);
    // ZeRO-1: where tensor `index` alone fills a bucket that is reduce-scattered, every member's piece of it as
    // element ranges [from, to) of the tensor, in member order; otherwise empty.
    std::vector<std::pair<std::size_t, std::size_t>> piecesOfTensor(int index) const;
    // The backward completes this member's piece of tensor `index` itself (every member's tokens): its
    // bucket (piecesOfTensor not empty) is left out of the reduction.
    void skipReduction(int index);

private:
    struct Bucket {
        std::size_t begin = 0, end = 0; // in the flat buffer
        int waiting = 0; // parameters not yet ready this step
        int size = 0;
        comm::WorkPtr work;
        comm::WorkPtr delayed; // staleness 1: the previous step's all-reduce, in flight on m_delayed
        comm::ErrorFeedback feedback;
        BucketGroup group = BucketGroup::Plain;
        comm::Communicator* comm = nullptr; // null: the DP group
        bool skipped = false; // skipReduction
    };
    comm::WorkPtr launch(Bucket& b, float* base);
    bool scatters(const Bucket& b) const;
    // Member `member` of `members`' piece of a bucket: [from, to) in the flat buffer (clipped to the bucket)
    // and the piece length ceil(size / members) that every member's piece is padded to.
    struct Piece {
        std::size_t from, to, length;
    };
    static Piece pieceOf(const Bucket& b, std::size_t members, std::size_t member);

    ParamSet& m_params;
    comm::Communicator* m_dp;
    bool m_overlap;
    bool m_errorFeedback;
    bool m_enabled = true;
    plan::Codec m_codec;
    comm::CollectiveOptions m_options;
    std::vector<Bucket> m_buckets;
    std::vector<int> m_bucketOf; // parameter -> bucket
    int m_staleness = 0;
    // Staleness 1: the gradients being reduced while the next step computes, on the gradients' device, and
    // the bucket-sized scratch through which finish() swaps them with the gradient buffer by device copies.
    FlatValues m_delayed, m_swap;
    bool m_hasDelayed = false; // m_delayed holds a step's gradients
    bool m_sharded = false; // setShardedReduction
    comm::CollectiveOptions m_scatterOptions;
};

} // namespace loom::train
