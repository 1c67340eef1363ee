#pragma once

#include "engine/comm/Communicator.h"

#include <cstdint>
#include <vector>

namespace loom::train {

// Context parallelism's attention: causal multi-head attention over a sequence split across the cp ranks of
// a CP group (ring attention, Liu et al. 2023, with the load-balanced causal split of Megatron-LM's context
// parallelism). The sequence is cut into 2·cp equal chunks of c tokens; CP rank i holds chunks i and
// 2·cp-1-i, so that every rank does the same causal work. Each rank's K/V block (both of its chunks) travels
// once around the ring: at step t a rank attends its queries to the block of rank (i - t) mod cp while it
// sends that block on and receives the next one (the exchange overlaps the block's compute). Partial results
// merge with the online softmax (running row maximum and sum; the log-sum-exp of each row is kept). The
// backward sends the K/V blocks around again, and each block's dK/dV accumulator travels with it and
// returns to its owner after cp steps; the scores are recomputed from the kept log-sum-exp (as flash
// attention's backward does), so no s×s matrix is ever stored.
//
// Layout of the local tokens of sequence b: rows b·2c .. b·2c+2c-1, the first c of chunk i, the next c of
// chunk 2·cp-1-i. Heads of one token are `headDim` columns each, head h at column h·headDim of a row;
// query head h reads KV head h / (heads / kvHeads) (grouped-query attention).
class RingAttention {
public:
    struct Shape {
        int sequences = 1; // B
        int chunk = 1; // c = s / (2·cp) tokens
        int heads = 1; // query heads on this rank
        int kvHeads = 1; // key/value heads on this rank (divides heads)
        int headDim = 1;
    };

    // `cp` is the CP group (rank i is CP rank i); null means one rank (cp = 1).
    RingAttention(comm::Communicator* cp, Shape shape);

    // The global positions (0 .. s-1) of the 2·c local tokens of one sequence on CP rank `cpRank` of `cpSize`.
    static std::vector<std::int64_t> localPositions(int cpRank, int cpSize, std::int64_t seqLen);

    // out[row, h·d..] = softmax(q·kᵀ/√d, causal by global position)·v. `lse` gets B·heads·2c values (per
    // sequence, head and local token) for backward. Strides are in floats between consecutive rows.
    void forward(const float* q, int qStride, const float* k, const float* v, int kvStride, float* out, int outStride,
        float* lse);
    // Gradients of the same: dq, dk, dv are overwritten (each for the local rows, at the same strides as q, k
    // and v). Collective over the CP group, as forward is.
    void backward(const float* q, int qStride, const float* k, const float* v, int kvStride, const float* out,
        int outStride, const float* dOut, const float* lse, float* dq, float* dk, float* dv);

    // Bytes one rank sends in one forward (cp-1 K/V blocks) and one backward (cp-1 K/V blocks and cp dK/dV
    // blocks), at 4 bytes a value: what the planner's ring-attention count must match.
    std::uint64_t forwardSendBytes() const;
    std::uint64_t backwardSendBytes() const;

private:
    // Global chunk index of local chunk `which` (0 or 1) of CP rank `rank`.
    int chunkOf(int rank, int which) const { return which == 0 ? rank : 2 * m_size - 1 - rank; }
    // Calls visit(b, h, a, e, diagonal) for every (sequence, head, query chunk a, key chunk e of rank src's
    // block) pair that attends: key chunk not after query chunk (causal), `diagonal` when they are the same.
    template <typename Visit> void forEachBlockPair(int src, Visit&& visit) const
    {
        for (int b = 0; b < m_s.sequences; ++b)
            for (int h = 0; h < m_s.heads; ++h)
                for (int a = 0; a < 2; ++a)
                    for (int e = 0; e < 2; ++e) {
                        const int gq = chunkOf(m_rank, a), gk = chunkOf(src, e);
                        if (gk <= gq) // else every key of that chunk comes after every query of this one
                            visit(b, h, a, e, gk == gq);
                    }
    }
    std::size_t blockFloats() const; // one K/V block: B·2c rows of K and V
    void pack(const float* k, const float* v, int kvStride, std::vector<float>& kv) const;
    void attendBlock(const float* q, int qStride, const float* kv, int src, float* acc, float* rowMax, float* rowSum);
    void backwardBlock(const float* q, int qStride, const float* kv, int src, const float* dOut, int outStride,
        const float* lse, const float* delta, float* dq, int dqStride, float* dkv);

    comm::Communicator* m_cp;
    int m_rank = 0, m_size = 1;
    Shape m_s;
    std::vector<float> m_scores, m_dScores; // one c×c block
};

} // namespace loom::train
