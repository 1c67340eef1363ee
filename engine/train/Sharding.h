#pragma once

#include "engine/comm/AlgorithmTuner.h"
#include "engine/comm/Communicator.h"
#include "engine/plan/Layout.h"
#include "engine/train/Checkpoint.h"
#include "engine/train/GptStage.h"
#include "engine/train/GradientSync.h"
#include "engine/train/Optimizer.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace loom::train {

// How the data-parallel group (its dp·cp members, GridCommunicators::data) shares the gradients, the
// optimizer's state and its update. Chosen once from the layout (shardingKind); one class each (Sharding.cpp).
enum class ShardingKind : std::uint8_t {
    Replicated, // every member reduces every gradient and updates every parameter (memory.zero 0, one replica)
    Zero1, // memory.zero 1 with a codec, staleness or experts: one contiguous range of the all-reduced
           // gradients per member, the ranges all-gathered after the update
    DistributedOptimizer, // memory.zero 1 otherwise, as Megatron's: buckets reduce-scattered, each member
                          // updates its piece of every bucket, the pieces all-gathered (or shared in memory)
    Zero23, // memory.zero 2 or 3 (ShardedParams.h)
    SparseTopK, // comm.dp_codec top-k with error feedback (SparseAdam.h) once the codec warm-up is over;
                // Replicated or Zero1 (memory.zero 1) during it
};

// The strategy of `layout` (pure: the same on every rank). Layouts that loom-train refuses
// (plan::engineSupport) get one too; the trainer refuses them before it asks.
ShardingKind shardingKind(const plan::Layout& layout);
// What SparseTopK runs during the codec warm-up; other kinds themselves.
ShardingKind warmupShardingKind(const plan::Layout& layout);
const char* toString(ShardingKind kind);
// Steps with an uncompressed data-parallel all-reduce: comm.codec_warmup, or for SparseTopK when it is
// negative a tenth of the run's `steps` (at least one).
std::int64_t codecWarmupSteps(const plan::Layout& layout, std::int64_t steps);

// Bytes of model state a rank holds now (between steps) and the most it held during a step: parameters
// (with ZeRO-2 the full buffer and the master shard), gradients, AdamW's moments.
struct ModelStateBytes {
    std::size_t params = 0, grads = 0, optimizer = 0, peakParams = 0, peakGrads = 0;
};

// What a strategy works on: the trainer's, alive as long as the strategy.
struct ShardingContext {
    const plan::Layout& layout;
    GptStage& stage;
    comm::Communicator& data; // the dp·cp members
    GradientSync& sync;
    comm::CollectiveTuning tuning; // the DP group's algorithm choice for reduce-scatters and all-gathers
    comm::CollectiveOptions syncOptions; // the DP all-reduce's (top-k's compressed exchange)
    std::size_t largestBucket = 0; // what the algorithm table is read at
    std::int64_t replicas = 1, replicaIndex = 0; // members, and this rank's place among them
    std::int64_t codecWarmup = 0; // codecWarmupSteps
};

class ShardingStrategy {
public:
    explicit ShardingStrategy(ShardingContext context);
    virtual ~ShardingStrategy() = default;
    ShardingStrategy(const ShardingStrategy&) = delete;
    ShardingStrategy& operator=(const ShardingStrategy&) = delete;

    virtual ShardingKind kind() const = 0;
    // The AdamW over this member's part (its moments, its step count).
    virtual AdamW& adam() { return *m_adam; }
    virtual const AdamW& adam() const { return *m_adam; }
    // Per element of the flat buffer: weight decay applies (empty for ZeRO-2/3, whose shard has its own).
    const std::vector<std::uint8_t>& decayMask() const { return m_decay; }
    // Before the step's first forward (after the gradients are zeroed): whether GradientSync reduces this
    // step, ZeRO-2/3's whole-step buffers.
    virtual void beginStep(std::int64_t step) = 0;
    // After GradientSync::finish(): ZeRO-2/3's last reduce-scatters.
    virtual void finishGradients() { }
    // Where each member holds the reduced gradient of its pieces only: the sum of squares of those pieces
    // over the tensors `counts` accepts (the DP group then adds them). Empty where every member holds the
    // whole gradient (the trainer sums it, with the squares it took in the backward).
    virtual std::optional<double> shardNormSquared(const std::function<bool(int tensor)>& counts) const;
    // The update of step `step` at learning rate `lr`, clipping at the global norm `clip` given the gradient
    // norm `norm`; returns the gradient norm to report.
    virtual double update(std::int64_t step, double norm, double clip, double lr) = 0;
    // After the update: every member's parameters complete again.
    virtual void gatherParameters() { }
    // Whether each member keeps AdamW's moments of a part only (each writes its part to a checkpoint).
    virtual bool shardsMoments() const { return false; }
    virtual ModelStateBytes bytes() const;
    // A checkpoint of this member's state (collective over `world`), and its reading.
    virtual void save(
        const std::string& dir, const CheckpointInfo& info, const CheckpointRole& role, comm::Communicator& world);
    virtual void load(const std::string& folder);

protected:
    // The clipping factor for gradients of norm `norm` at threshold `clip`.
    static float clipFactor(double norm, double clip) { return norm > clip ? float(clip / (norm + 1e-6)) : 1.0f; }
    void buildDecayMask();
    ParamSet& params() { return m_ctx.stage.params(); }
    const ParamSet& params() const { return m_ctx.stage.params(); }

    ShardingContext m_ctx;
    std::unique_ptr<AdamW> m_adam;
    std::vector<std::uint8_t> m_decay; // buildDecayMask
};

// The strategy of kind `kind` over `context`; the trainer passes shardingKind(layout).
std::unique_ptr<ShardingStrategy> makeSharding(ShardingKind kind, ShardingContext context);

} // namespace loom::train
