// The data-parallel sharding strategies (Sharding.h): one class each, chosen once from the layout.
#include "engine/train/Sharding.h"

#include "engine/train/ShardedParams.h"
#include "engine/train/SparseAdam.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace loom::train {

ShardingKind shardingKind(const plan::Layout& layout)
{
    const auto& p = layout.parallel;
    const auto& c = layout.comm;
    if (p.dp * p.cp <= 1)
        return ShardingKind::Replicated;
    if (layout.memory.zero >= 2)
        return ShardingKind::Zero23;
    if (c.dpCodec.kind == plan::Codec::Kind::TopK && c.errorFeedback)
        return ShardingKind::SparseTopK;
    return warmupShardingKind(layout);
}

ShardingKind warmupShardingKind(const plan::Layout& layout)
{
    const auto& p = layout.parallel;
    const auto& c = layout.comm;
    if (p.dp * p.cp <= 1 || layout.memory.zero != 1)
        return layout.memory.zero >= 2 && p.dp * p.cp > 1 ? ShardingKind::Zero23 : ShardingKind::Replicated;
    // Megatron's distributed optimizer needs the whole bucket reduced at once: staleness 0, no codec, no experts.
    const bool plainSync = c.staleness == 0 && c.dpCodec.kind == plan::Codec::Kind::None && p.ep == 1;
    return plainSync ? ShardingKind::DistributedOptimizer : ShardingKind::Zero1;
}

const char* toString(ShardingKind kind)
{
    switch (kind) {
    case ShardingKind::Replicated:
        return "replicated";
    case ShardingKind::Zero1:
        return "zero1";
    case ShardingKind::DistributedOptimizer:
        return "distributed-optimizer";
    case ShardingKind::Zero23:
        return "zero2/3";
    case ShardingKind::SparseTopK:
        return "sparse-topk";
    }
    return "?";
}

std::int64_t codecWarmupSteps(const plan::Layout& layout, std::int64_t steps)
{
    if (layout.comm.codecWarmup < 0 && shardingKind(layout) == ShardingKind::SparseTopK)
        return std::max<std::int64_t>(1, steps / 10);
    return std::max<std::int64_t>(layout.comm.codecWarmup, 0);
}

ShardingStrategy::ShardingStrategy(ShardingContext context)
    : m_ctx(context)
{
}

void ShardingStrategy::buildDecayMask()
{
    const ParamSet& p = params();
    m_decay.assign(p.values.size(), 0);
    for (const auto& s : p.specs())
        if (s.decay)
            std::fill(m_decay.begin() + static_cast<std::ptrdiff_t>(s.offset),
                m_decay.begin() + static_cast<std::ptrdiff_t>(s.offset + s.size()), 1);
}

std::optional<double> ShardingStrategy::shardNormSquared(const std::function<bool(int)>&) const
{
    return std::nullopt;
}

ModelStateBytes ShardingStrategy::bytes() const
{
    ModelStateBytes b;
    b.optimizer = (adam().firstMoment().size() + adam().secondMoment().size()) * sizeof(float);
    b.params = b.peakParams = params().values.size() * sizeof(float);
    b.grads = b.peakGrads = params().grads.size() * sizeof(float);
    return b;
}

void ShardingStrategy::save(
    const std::string& dir, const CheckpointInfo& info, const CheckpointRole& role, comm::Communicator& world)
{
    saveCheckpoint(dir, info, params(), adam(), role, world);
}

void ShardingStrategy::load(const std::string& folder)
{
    loadCheckpoint(folder, params(), adam());
}

namespace {

const plan::OptimizerSpec& optimizerOf(const ShardingContext& c)
{
    return c.layout.optimizer;
}

std::unique_ptr<AdamW> adamOver(const ShardingContext& c, std::size_t begin, std::size_t end)
{
    const auto& o = optimizerOf(c);
    // The moments live where the stage's parameters do (TrainOptions::device).
    return std::make_unique<AdamW>(
        begin, end, o.adamBeta1, o.adamBeta2, o.adamEps, o.weightDecay, c.stage.params().grads.device());
}

// The strategies whose members all hold the whole flat parameter and gradient buffers.
class FlatSharding : public ShardingStrategy {
public:
    void beginStep(std::int64_t) override { m_ctx.sync.setEnabled(true); }
    double update(std::int64_t, double norm, double clip, double lr) override
    {
        m_adam->step(params().values.data(), params().grads.data(), m_decay, lr, clipFactor(norm, clip));
        return norm;
    }

protected:
    explicit FlatSharding(ShardingContext c)
        : ShardingStrategy(c)
    {
        buildDecayMask();
    }
};

// Every member reduces every gradient and updates every parameter.
class Replicated : public FlatSharding {
public:
    explicit Replicated(ShardingContext c)
        : FlatSharding(c)
    {
        m_adam = adamOver(m_ctx, 0, params().values.size());
    }
    ShardingKind kind() const override { return ShardingKind::Replicated; }
};

// ZeRO-1 with all-reduced gradients: member r updates the r-th contiguous range of the flat buffer and the
// ranges are all-gathered after the update.
class Zero1 : public FlatSharding {
public:
    explicit Zero1(ShardingContext c)
        : FlatSharding(c)
    {
        const std::size_t n = params().values.size(), replicas = static_cast<std::size_t>(m_ctx.replicas);
        const std::size_t shard = (n + replicas - 1) / replicas;
        const std::size_t begin = std::min(n, shard * static_cast<std::size_t>(m_ctx.replicaIndex));
        m_adam = adamOver(m_ctx, begin, std::min(n, begin + shard));
    }
    ShardingKind kind() const override { return ShardingKind::Zero1; }
    bool shardsMoments() const override { return true; }
    void gatherParameters() override
    {
        FlatValues& values = params().values;
        const auto replicas = static_cast<std::size_t>(m_ctx.replicas);
        const std::size_t shard = (values.size() + replicas - 1) / replicas;
        // The all-gather's buffers on the parameters' device, filled and emptied by device copies.
        FlatValues mine(values.device()), all(values.device());
        mine.assign(shard, 0.0f);
        all.assign(shard * replicas, 0.0f);
        mine.copyFrom(0, values.data() + m_adam->begin(), m_adam->end() - m_adam->begin());
        m_ctx.data
            .allGather(mine.data(), all.data(), shard, comm::DType::F32,
                m_ctx.tuning.shardOptions(all.size() * sizeof(float), static_cast<int>(replicas)))
            ->wait();
        values.copyFrom(0, all.data(), values.size());
    }
};

// Megatron's distributed optimizer: the buckets are reduce-scattered, each member updates its piece of every
// bucket, and the pieces are all-gathered after the update (or, with the parameters in shared memory,
// written in place: a barrier has every member's pieces written before any member reads them).
class DistributedOptimizer : public FlatSharding {
public:
    explicit DistributedOptimizer(ShardingContext c)
        : FlatSharding(c)
    {
        m_ctx.sync.setShardedReduction(
            m_ctx.tuning.shardOptions(m_ctx.largestBucket, static_cast<int>(m_ctx.replicas)));
        const auto& o = optimizerOf(m_ctx);
        m_adam = std::make_unique<AdamW>(
            m_ctx.sync.ownedPieces(), o.adamBeta1, o.adamBeta2, o.adamEps, o.weightDecay, params().grads.device());
    }
    ShardingKind kind() const override { return ShardingKind::DistributedOptimizer; }
    bool shardsMoments() const override { return true; }
    std::optional<double> shardNormSquared(const std::function<bool(int)>& counts) const override
    {
        // This member's piece of every bucket, tensor by tensor.
        const ParamSet& p = params();
        double sum = 0;
        for (const auto& [from, to] : m_adam->ranges())
            for (int i = 0; i < static_cast<int>(p.specs().size()); ++i) {
                const auto& s = p.spec(i);
                const std::size_t a = std::max(from, s.offset), b = std::min(to, s.offset + s.size());
                if (a < b && counts(i))
                    sum += sumOfSquares(p.grads.data() + a, b - a);
            }
        return sum;
    }
    void gatherParameters() override
    {
        // The norm's all-reduce had every member finish its backward before any update.
        if (params().values.shared())
            m_ctx.data.barrier()->wait();
        else
            m_ctx.sync.allGatherPieces(params().values.data(), m_ctx.tuning);
    }
};

// ZeRO-2 and 3 (ShardedParams.h): the optimizer works on this member's shard.
class Zero23 : public ShardingStrategy {
public:
    explicit Zero23(ShardingContext c)
        : ShardingStrategy(c)
        , m_sharded(m_ctx.stage, m_ctx.data, m_ctx.layout.memory.zero, m_ctx.layout.comm.overlap, m_ctx.tuning)
    {
        m_adam = adamOver(m_ctx, 0, m_sharded.shardSize());
    }
    ShardingKind kind() const override { return ShardingKind::Zero23; }
    void beginStep(std::int64_t) override
    {
        m_sharded.beginStep();
        m_ctx.sync.setEnabled(false); // reduce-scattered by ShardedParams instead
    }
    void finishGradients() override { m_sharded.finish(); }
    std::optional<double> shardNormSquared(const std::function<bool(int)>& counts) const override
    {
        return m_sharded.normSquared(counts);
    }
    double update(std::int64_t, double norm, double clip, double lr) override
    {
        m_adam->step(
            m_sharded.shardValues(), m_sharded.shardGrads(), m_sharded.shardDecay(), lr, clipFactor(norm, clip));
        return norm;
    }
    void gatherParameters() override
    {
        if (m_ctx.layout.memory.zero == 2) // every member's updated pieces into the full parameters
            m_sharded.gatherFlat();
    }
    ModelStateBytes bytes() const override
    {
        ModelStateBytes b;
        b.optimizer = (m_adam->firstMoment().size() + m_adam->secondMoment().size()) * sizeof(float);
        const auto s = m_sharded.bytes();
        b.params = s.params;
        b.grads = s.grads;
        b.peakParams = s.peakParams;
        b.peakGrads = s.peakGrads;
        return b;
    }
    void save(const std::string& dir, const CheckpointInfo& info, const CheckpointRole& role,
        comm::Communicator& world) override
    {
        // Every member writes its pieces of the parameters and the moments.
        saveCheckpoint(dir, info, params(), m_sharded.slices(*m_adam), role.ownsTensor, world);
    }
    void load(const std::string& folder) override
    {
        loadCheckpoint(folder, params(), m_sharded.slices(*m_adam));
        if (m_ctx.layout.memory.zero == 2)
            m_sharded.gatherFlat();
    }

private:
    ShardedParams m_sharded;
};

// Top-k with error feedback under AdamW (SparseAdam.h) once the codec warm-up is over; before it, the
// strategy of memory.zero (Replicated or Zero1) with the uncompressed all-reduce.
class SparseTopK : public ShardingStrategy {
public:
    explicit SparseTopK(ShardingContext c)
        : ShardingStrategy(c)
        , m_warmup(makeSharding(warmupShardingKind(c.layout), c))
        , m_sparse(m_ctx.sync.bucketRanges(), m_ctx.data, m_ctx.syncOptions)
    {
    }
    ShardingKind kind() const override { return ShardingKind::SparseTopK; }
    AdamW& adam() override { return m_warmup->adam(); }
    const AdamW& adam() const override { return m_warmup->adam(); }
    void beginStep(std::int64_t step) override
    {
        m_active = step >= m_ctx.codecWarmup;
        if (m_active)
            m_ctx.sync.setEnabled(false); // the gradients stay local: SparseAdam communicates
        else
            m_warmup->beginStep(step);
    }
    double update(std::int64_t step, double norm, double clip, double lr) override
    {
        if (!m_active)
            return m_warmup->update(step, norm, clip, lr);
        // Local gradients (this rank's share of the mean): DGC's local clipping at clip/sqrt(dp).
        const double members = std::sqrt(double(m_ctx.replicas));
        const float factor = clipFactor(norm, clip / members);
        m_sparse.step(adam(), params().values.data(), params().grads.data(), factor, m_warmup->decayMask(), lr,
            m_ctx.codecWarmup);
        return norm * members; // the estimate of the global norm the threshold assumes
    }
    void gatherParameters() override
    {
        if (!m_active)
            m_warmup->gatherParameters();
    }
    bool shardsMoments() const override { return m_warmup->shardsMoments(); }

private:
    std::unique_ptr<ShardingStrategy> m_warmup;
    SparseAdam m_sparse;
    bool m_active = false; // past the codec warm-up this step
};

} // namespace

std::unique_ptr<ShardingStrategy> makeSharding(ShardingKind kind, ShardingContext context)
{
    switch (kind) {
    case ShardingKind::Replicated:
        return std::make_unique<Replicated>(context);
    case ShardingKind::Zero1:
        return std::make_unique<Zero1>(context);
    case ShardingKind::DistributedOptimizer:
        return std::make_unique<DistributedOptimizer>(context);
    case ShardingKind::Zero23:
        return std::make_unique<Zero23>(context);
    case ShardingKind::SparseTopK:
        return std::make_unique<SparseTopK>(context);
    }
    throw std::logic_error("makeSharding: unknown kind");
}

} // namespace loom::train
