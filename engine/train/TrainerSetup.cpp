// The trainer's construction in named parts: what the stage holds, the data-parallel group's algorithm
// choice, the gradient buckets and the sharding strategy's context.
#include "engine/train/Trainer.h"

#include "engine/plan/EngineSupport.h"
#include "engine/train/Optimizer.h"

#include <stdexcept>
#include <string>

namespace loom::train {

void Trainer::refuseUntrainable() const
{
    // What loom-train cannot train is refused here too, in the words validate and the launcher use.
    if (const plan::EngineSupport support = plan::engineSupport(m_layout); !support.trainable())
        throw std::invalid_argument("layout " + m_layout.name + ": loom-train cannot train it: " + support.reason());
    const auto& p = m_layout.parallel;
    if (p.ep > 1 && (!m_comms.expert || !m_comms.expertData))
        throw std::logic_error("parallel.ep=" + std::to_string(p.ep)
            + " needs the expert groups: create them with CommRuntime::addExpertGroups before the trainer");
}

GptStage::Config Trainer::stageConfig() const
{
    const auto& p = m_layout.parallel;
    GptStage::Config c;
    c.model = m_layout.model;
    const auto ranges = m_layout.stageRanges();
    const std::int64_t last = p.pp * m_schedule.chunks() - 1;
    for (std::int64_t chunk = 0; chunk < m_schedule.chunks(); ++chunk) {
        const std::int64_t vs = m_schedule.virtualStage(m_coord.pp, chunk);
        c.chunks.push_back({ ranges[static_cast<std::size_t>(vs)], vs == 0, vs == last });
    }
    c.tensor = { m_comms.tensor.get(), static_cast<int>(m_coord.tp), static_cast<int>(p.tp) };
    c.expert = { m_comms.expert.get(), static_cast<int>(m_coord.dp % p.ep), static_cast<int>(p.ep) };
    c.fullRecompute = m_layout.memory.recompute == plan::Recompute::Full;
    c.sequenceParallel = p.sp;
    c.init = m_layout.init;
    c.device = m_options.device;
    return c;
}

void Trainer::setWeightDecay()
{
    ParamSet& params = m_stage->params();
    for (int i = 0; i < static_cast<int>(params.specs().size()); ++i) // optimizer.weight_decay_on
        params.setDecay(i, m_layout.optimizer.decays(decayGroupOf(params.spec(i).name)));
}

comm::CollectiveTuning Trainer::dataTuning() const
{
    comm::CollectiveTuning t;
    t.backend = plan::toString(m_layout.commBackend());
    t.nodes = comm::nodesSpanned(m_comms.data->group().ranks, m_grid.devicesPerNode());
    t.algorithm = m_layout.comm.allreduce;
    t.chunkBytes = static_cast<std::size_t>(m_layout.comm.chunkKb * 1024);
    return t;
}

comm::CollectiveOptions Trainer::dataOptions(std::size_t largestBucket) const
{
    // The layout's algorithm, or the measured table's for the bucket size. Gradients are summed over the
    // dp·cp ranks of comms.data (a CP group's ranks are reduced like replicas).
    const auto& p = m_layout.parallel;
    comm::CollectiveOptions o;
    o.algorithm = m_tuning.allReduceAlgorithm(largestBucket, static_cast<int>(p.dp * p.cp));
    o.chunkBytes = m_tuning.chunkBytes;
    o.codec = m_layout.comm.dpCodec;
    return o;
}

std::vector<BucketGroup> Trainer::bucketGroups() const
{
    const auto& p = m_layout.parallel;
    const ParamSet& params = m_stage->params();
    const auto n = params.specs().size();
    std::vector<BucketGroup> groups;
    // A lossy codec's output depends on the whole bucket: TP-replicated tensors and the tied embedding
    // (held by the first and the last stage) get buckets of their own so that their copies stay identical.
    const auto codec = m_layout.comm.dpCodec.kind;
    const bool lossy = codec != plan::Codec::Kind::None && codec != plan::Codec::Kind::Lz4;
    if (lossy && p.dp * p.cp > 1)
        for (int i = 0; i < static_cast<int>(n); ++i)
            groups.push_back(i == m_stage->tokenEmbedding() && m_tiedAcrossStages ? BucketGroup::TiedEmbedding
                    : p.tp > 1 && params.spec(i).shard == Shard::Replicated       ? BucketGroup::TpReplicated
                                                                                  : BucketGroup::Plain);
    if (p.ep > 1) { // MoE: experts' gradients in buckets of their own, over the expert-data group
        groups.resize(n, BucketGroup::Plain);
        for (int i = 0; i < static_cast<int>(n); ++i)
            if (m_stage->isExpertParam(i))
                groups[static_cast<std::size_t>(i)] = BucketGroup::Experts;
    }
    // Tensors whose rows each DP member completes itself (shareRows), each in a bucket of its own.
    const bool embeddingRows = embeddingRowsPay(*m_comms.data);
    const std::vector<int> weightRows = weightRowsThatPay(*m_comms.data);
    if (embeddingRows || !weightRows.empty()) {
        groups.resize(n, BucketGroup::Plain);
        for (int i : weightRows)
            groups[static_cast<std::size_t>(i)] = BucketGroup::SharedWeightRows;
        if (embeddingRows)
            groups[static_cast<std::size_t>(m_stage->tokenEmbedding())] = BucketGroup::SharedEmbeddingRows;
    }
    return groups;
}

std::unique_ptr<GradientSync> Trainer::makeGradientSync(const comm::CollectiveOptions& options) const
{
    const auto& c = m_layout.comm;
    const auto bucketBytes = static_cast<std::size_t>(c.bucketMb * (1 << 20));
    auto sync = std::make_unique<GradientSync>(
        m_stage->params(), m_comms.data.get(), bucketBytes, c.overlap, options, c.errorFeedback, bucketGroups());
    if (m_layout.parallel.ep > 1)
        sync->setGroupCommunicator(BucketGroup::Experts, m_comms.expertData.get());
    sync->setStaleness(c.staleness);
    return sync;
}

ShardingContext Trainer::shardingContext(const comm::CollectiveOptions& options, std::size_t largestBucket) const
{
    const auto& p = m_layout.parallel;
    return { m_layout, *m_stage, *m_comms.data, *m_sync, m_tuning, options, largestBucket, p.dp * p.cp,
        m_coord.dp * p.cp + m_coord.cp, m_codecWarmup };
}

void Trainer::prepareNormSquares()
{
    // One replica, tp = pp = 1: each block's squares are taken in its last backward (Trainer.h).
    const auto& p = m_layout.parallel;
    const bool normWhileHot = p.dp * p.cp == 1 && p.tp == 1 && p.pp == 1 && m_layout.comm.staleness == 0;
    m_squares.assign(normWhileHot ? m_stage->params().specs().size() : 0, -1.0);
}

void Trainer::findLastBackwards()
{
    // A chunk's gradients are final after its last backward, or its last W where the backward is split.
    const auto finishing
        = m_schedule.splitsBackward() ? plan::PipelineOp::Kind::Weight : plan::PipelineOp::Kind::Backward;
    m_lastBackward.assign(static_cast<std::size_t>(m_schedule.chunks()), -1);
    const auto& ops = m_schedule.opsOf(m_coord.pp);
    for (int i = 0; i < static_cast<int>(ops.size()); ++i)
        if (ops[static_cast<std::size_t>(i)].kind == finishing)
            m_lastBackward[static_cast<std::size_t>(ops[static_cast<std::size_t>(i)].chunk)] = i;
}

} // namespace loom::train
