#pragma once

#include "engine/comm/AlgorithmTuner.h"
#include "engine/comm/Communicator.h"
#include "engine/train/Checkpoint.h"
#include "engine/train/GptStage.h"
#include "engine/train/Optimizer.h"

#include <deque>
#include <functional>
#include <map>
#include <vector>

namespace loom::train {

// ZeRO stages 2 and 3 (Rajbhandari et al. 2020) for one rank's GptStage over its data-parallel group.
//
// The flat parameter layout is cut into units: each transformer block, and every other tensor (final norm,
// embeddings) on its own. A unit of n elements is split into dp pieces of c = ceil(n / dp) elements (the
// last one padded with zeros); DP rank r owns piece r of every unit. Its pieces, one after another, are the
// rank's shard: the fp32 master parameters, the reduced gradients and AdamW's moments live there.
//
// Gradients (stages 2 and 3): a block's full gradient exists only while its backward runs: a zeroed buffer
// before it, a reduce-scatter after it (in flight while the next block computes when `overlap` is on),
// whose piece is added to the shard gradient, every micro-batch (as DeepSpeed's stage 2 and FSDP do). The
// other tensors keep a full gradient for the whole step (the head and the embedding sit at both ends of the
// pipeline, and the tied embedding adds its two copies first); finish() reduce-scatters them.
//
// Parameters: stage 2 keeps the full flat buffer, refreshed by gatherFlat() after the optimizer. Stage 3
// keeps only the shard: a block is all-gathered before its forward and again before its backward and freed
// after each; the next block's all-gather starts before the current block computes (prefetch). The other
// tensors are gathered by beginStep() and freed by finish().
class ShardedParams {
public:
    // `tuning` picks each reduce-scatter's and all-gather's algorithm by its size (comm.allreduce's choice).
    ShardedParams(GptStage& stage, comm::Communicator& dp, int zero, bool overlap, comm::CollectiveTuning tuning = {});
    ~ShardedParams();
    ShardedParams(const ShardedParams&) = delete;
    ShardedParams& operator=(const ShardedParams&) = delete;

    std::size_t shardSize() const { return m_values.size(); }
    float* shardValues() { return m_values.data(); }
    float* shardGrads() { return m_grads.data(); }
    const std::vector<std::uint8_t>& shardDecay() const { return m_decay; }

    // Before a step's first forward: zeroes the shard gradient, allocates the whole-step gradients and
    // (stage 3) gathers the whole-step tensors.
    void beginStep();
    // After backward (and the tied embedding's sum): reduce-scatters the whole-step gradients and waits for
    // every reduce-scatter; the shard gradient is then the DP group's sum.
    void finish();
    // Stage 2: all-gathers every unit's updated piece into the flat parameter buffer.
    void gatherFlat();
    // The sum of squares of this rank's shard gradient over the tensors `counts` accepts.
    double normSquared(const std::function<bool(int tensor)>& counts) const;
    // This rank's pieces as checkpoint slices (master values and the moments of `adam`, in shard space).
    std::vector<CheckpointSlice> slices(AdamW& adam);

    // Bytes this rank holds now, and the most it held at once since construction.
    struct Bytes {
        std::size_t params = 0, grads = 0, peakParams = 0, peakGrads = 0;
    };
    Bytes bytes() const;

private:
    struct Unit {
        std::size_t begin = 0, end = 0; // in the flat layout
        std::size_t piece = 0; // elements per DP rank
        std::size_t shardOffset = 0; // where this rank's piece sits in the shard
        std::vector<int> tensors;
        bool block = false;
        FlatValues full; // stage 3: the gathered values while held (dp · piece)
        comm::WorkPtr gathering;
        bool held = false;
        FlatValues grad; // the full gradient while it is being filled (dp · piece)
    };
    struct InFlight {
        comm::WorkPtr work;
        FlatValues send, recv;
        std::size_t shardOffset = 0;
    };

    void before(std::int64_t layer, bool backward);
    void after(std::int64_t layer, bool backward);
    comm::CollectiveOptions options(const Unit& u) const;
    void startGather(Unit& u);
    void acquire(Unit& u);
    void release(Unit& u);
    void allocateGrad(Unit& u);
    void reduceScatter(Unit& u);
    void retire(bool all);
    void retireFront();
    static constexpr std::size_t kInFlight = 1; // reduce-scatters in flight at most, with overlap
    std::size_t pieceBegin(const Unit& u) const;
    void count(std::ptrdiff_t paramBytes, std::ptrdiff_t gradBytes);

    GptStage& m_stage;
    ParamSet& m_params;
    comm::Communicator& m_dp;
    bool m_stage3;
    bool m_overlap;
    comm::CollectiveTuning m_tuning;
    std::vector<Unit> m_units;
    std::map<std::int64_t, int> m_unitOfLayer;
    std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>> m_chunkOfLayer; // its chunk's first, last
    FlatValues m_values, m_grads; // this rank's shard: master values and reduced gradients
    // n zeros on the parameters' device, where every buffer here lives (the shard, gathered values,
    // gradients and the collectives' buffers), so a GPU run hands the collectives device memory.
    FlatValues onDevice(std::size_t n) const;

    std::vector<std::uint8_t> m_decay;
    std::deque<InFlight> m_inFlight;
    std::size_t m_fullParamBytes = 0, m_fullGradBytes = 0, m_peakParams = 0, m_peakGrads = 0;
};

} // namespace loom::train
