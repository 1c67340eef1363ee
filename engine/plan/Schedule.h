#pragma once

#include "engine/plan/Layout.h"

#include <cstdint>
#include <string>
#include <vector>

namespace loom::plan {

// One step of a pipeline rank's work: the forward or backward pass of one micro-batch through one of its
// model chunks (virtual stage chunk·pp + rank).
// In the zero-bubble schedules a Backward is B, the gradients of the inputs only, and Weight is W, the
// weight gradients of that micro-batch and chunk (Schedule::splitsBackward()).
struct PipelineOp {
    enum class Kind : std::uint8_t { Forward, Backward, Weight };
    Kind kind = Kind::Forward;
    std::int32_t microBatch = 0;
    std::int32_t chunk = 0;

    // An op of micro-batch `microBatch` on the rank's chunk `chunk` (both below 2^31 in any valid schedule).
    static constexpr PipelineOp of(Kind kind, std::int64_t microBatch, std::int64_t chunk)
    {
        return { kind, static_cast<std::int32_t>(microBatch), static_cast<std::int32_t>(chunk) };
    }
    bool operator==(const PipelineOp&) const = default;
};

// The times the zero-bubble schedules' op lists are built from (ZB-H1, ZB-H2 and ZB-V: list scheduling with
// each op's time), per virtual stage in any one unit: F, B (the input gradients only) and W; and `transfer`,
// a hand-off between two ranks. Empty: unit-time F, B and W and free hand-offs (the paper's handcrafted
// schedules). scheduleCosts gives a layout's, from the cost model: what the planner replays with.
struct OpTimes {
    double forward = 1, backward = 1, weight = 1;
};
struct ScheduleCosts {
    std::vector<OpTimes> stage;
    double transfer = 0;
};

// The layout's op times from the cost model's stage costs and hand-off (CostModel.cpp): what
// Schedule::forLayout builds ZB-H1's, ZB-H2's and ZB-V's lists from.
ScheduleCosts scheduleCosts(const Layout& layout);

// The per-rank order of forward and backward passes for one optimizer step. The engine's pipeline executor
// runs it, and the simulator times it, so predicted and measured timelines come from the same schedule.
//
// - GPipe (Huang et al. 2019): every forward, then every backward. Holds m micro-batches of activations.
// - 1F1B (PipeDream-Flush, Narayanan et al. 2021): rank r runs min(p-r-1, m) warm-up forwards, then
//   alternates one forward and one backward, then drains the remaining backwards. Holds at most p-r.
// - Interleaved 1F1B (Narayanan et al. SC21): each rank holds v chunks; forwards go through the chunks in
//   groups of N micro-batches (the micro-batch group, N = p by default), with (p-r-1)·2 + (v-1)·N warm-up
//   forwards (all of them when m = p). The k-th forward is micro-batch (k/(N·v))·N + k mod N of chunk
//   (k/N) mod v; when N does not divide m the last group holds the remaining m mod N micro-batches. Megatron-LM's
//   --microbatch-group-size-per-virtual-pipeline-stage; the Llama 3 paper's tunable N. Needs p ≤ N ≤ m and
//   m mod N either 0 or at least p: with N < p (or a last group smaller than p) a micro-batch's next chunk
//   is due on rank 0 before it has come round the ring, and with this warm-up the ranks wait on each other.
// - ZB-H1, ZB-H2 (Qi et al., ICLR 2024): each backward split into B and W, with W filling the bubbles. Built
//   by list scheduling of F, B and W with the ops' times (ScheduleCosts; unit times by default; ZeroBubble.cpp):
//   1F1B's order of F and B, and the oldest W wherever it ends before the next F or B can start or the rank
//   holds more than its cap of deferred W's. ZB-H1 holds at most p micro-batches (F to W), ZB-H2 2p - 1.
// - ZB-V: two chunks per rank in a V, rank r holding virtual stages r and 2p-1-r (the embedding and the
//   head both on rank 0), capped at 2p chunks (1F1B's first rank's memory) on every rank; the same list
//   scheduling with a ready B first, then a ready F.
// - DualPipe: DualPipeV's order (the V form of DeepSeek-V3's DualPipe from its repository: eight phases,
//   the paired F and B of its steady state one after the other here; DualPipe.cpp); needs microBatches >= 2·pp.
class Schedule {
public:
    // Preconditions (the validator checks them for layouts): pp, vpp, microBatches >= 1; interleaved needs
    // pp ≤ group ≤ microBatches and microBatches % group either 0 or ≥ pp. group 0 means pp (Megatron's
    // default, which needs microBatches % pp == 0).
    // `costs`: the op times ZB-H1, ZB-H2 and ZB-V are built from (ScheduleCosts; the others ignore them).
    Schedule(ScheduleKind kind, std::int64_t pp, std::int64_t vpp, std::int64_t microBatches, std::int64_t group = 0,
        const ScheduleCosts& costs = {});
    // The layout's schedule, with scheduleCosts(layout) for the zero-bubble lists: loom-train runs the lists
    // the planner replays.
    static Schedule forLayout(const Layout& layout);

    ScheduleKind kind() const { return m_kind; }
    std::int64_t stages() const { return m_pp; }
    std::int64_t chunks() const { return m_vpp; }
    std::int64_t microBatches() const { return m_m; }
    // Consecutive micro-batches run per chunk in the interleaved schedule (N); pp unless set.
    std::int64_t group() const { return m_group; }
    const std::vector<PipelineOp>& opsOf(std::int64_t pipelineRank) const;

    // The virtual stage a rank's chunk is (plan::stageOfChunk): chunk·pp + rank, the V's way back 2·pp-1-rank.
    // Virtual stages run in order 0, 1, ..., pp·vpp-1.
    std::int64_t virtualStage(std::int64_t pipelineRank, std::int64_t chunk) const
    {
        return stageOfChunk(m_kind, m_pp, pipelineRank, chunk);
    }
    // The pipeline rank that holds virtual stage `vs` (the inverse of virtualStage; plan::rankOfStage).
    std::int64_t rankOf(std::int64_t vs) const { return rankOfStage(m_kind, m_pp, vs); }
    // Backwards split into B and W (Weight ops present); two chunks per rank in a V (ZB-V, DualPipe).
    bool splitsBackward() const { return plan::splitsBackward(m_kind); }
    // Split schedules under weight_fill "idle" (the default): a rank that would wait runs a W early
    // (EarlyWeights.h); the engine and the replay both follow it. Off: every W where the list puts it.
    bool fillsIdleWithWeight() const { return splitsBackward() && m_fill == WeightFill::Idle; }
    void setWeightFill(WeightFill fill) { m_fill = fill; }
    bool vShaped() const { return m_v; }
    // Micro-batches whose activations rank r holds at once at most (for memory estimates): from F to B, or
    // to W when the backward is split (W reads the activations and keeps B's output gradients).
    std::int64_t peakInFlight(std::int64_t pipelineRank) const;
    // The same peak with each chunk-micro-batch weighing chunkWeight[chunk] (its layers): chunks of
    // different sizes, such as a first chunk holding only the embedding, hold different activations.
    double peakInFlight(std::int64_t pipelineRank, const std::vector<double>& chunkWeight) const;
    // The same peak as loom-train holds memory when the backward is split: a chunk-micro-batch weighs
    // chunkWeight[chunk] from F to the end of its B (which frees the forward's activations), and
    // chunkDeferred[chunk] from B to W (W's copies of what it reads, made during B, so both at B's end).
    // Without the split, peakInFlight(rank, chunkWeight).
    double peakInFlight(std::int64_t pipelineRank, const std::vector<double>& chunkWeight,
        const std::vector<double>& chunkDeferred) const;
    // A compact text form, one rank a line: "F0 F1 B0 F2 B1 ..." (chunk as ".c" when vpp > 1).
    std::string toString() const;

private:
    ScheduleKind m_kind;
    std::int64_t m_pp, m_vpp, m_m;
    std::int64_t m_group;
    bool m_v = false;
    WeightFill m_fill = kDefaultWeightFill;
    std::vector<std::vector<PipelineOp>> m_ops;
};

} // namespace loom::plan
