#include "engine/train/Trainer.h"

#include "engine/comm/AlgorithmTuner.h"
#include "engine/plan/CostModel.h"
#include "engine/plan/EngineSupport.h"
#include "engine/plan/Flops.h"
#include "engine/plan/LayoutParser.h"
#include "engine/train/Checkpoint.h"
#include "engine/train/MoeLayer.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <deque>
#include <stdexcept>

namespace loom::train {

using plan::PipelineOp;

Trainer::Trainer(const plan::Layout& layout, comm::GridCommunicators& comms, const Corpus& corpus, TrainOptions options,
    Kernels& kernels)
    : m_layout(layout)
    , m_comms(comms)
    , m_corpus(corpus)
    , m_options(options)
    , m_grid(plan::RankGrid::forLayout(layout))
    , m_schedule(plan::Schedule::forLayout(layout))
{
    m_coord = m_grid.coordOf(comms.world->rank());
    const auto& p = layout.parallel;
    const auto ranges = layout.stageRanges();
    const std::int64_t last = p.pp * m_schedule.chunks() - 1;
    std::vector<GptStage::Chunk> chunks;
    for (std::int64_t c = 0; c < m_schedule.chunks(); ++c) {
        const std::int64_t vs = m_schedule.virtualStage(m_coord.pp, c);
        chunks.push_back({ ranges[static_cast<std::size_t>(vs)], vs == 0, vs == last });
    }
    // What loom-train cannot train is refused here too, in the words validate and the launcher use.
    if (const plan::EngineSupport support = plan::engineSupport(layout); !support.trainable())
        throw std::invalid_argument("layout " + layout.name + ": loom-train cannot train it: " + support.reason());
    if (p.ep > 1 && (!comms.expert || !comms.expertData))
        throw std::logic_error("parallel.ep=" + std::to_string(p.ep)
            + " needs the expert groups: create them with CommRuntime::addExpertGroups before the trainer");
    m_stage = std::make_unique<GptStage>(layout.model, chunks, static_cast<int>(m_coord.tp), static_cast<int>(p.tp),
        comms.tensor.get(), kernels, layout.memory.recompute == plan::Recompute::Full, p.sp,
        static_cast<int>(m_coord.dp % p.ep), static_cast<int>(p.ep), comms.expert.get(), layout.init);
    m_stage->setContextParallel(comms.context.get(), static_cast<int>(m_coord.cp), static_cast<int>(p.cp));
    m_stage->setEfficientNorm(layout.memory.efficientNorm);
    ParamSet& params = m_stage->params();
    for (int i = 0; i < static_cast<int>(params.specs().size()); ++i) // optimizer.weight_decay_on
        params.setDecay(i, layout.optimizer.decays(decayGroupOf(params.spec(i).name)));
    // Gradients are summed over the dp·cp ranks of comms.data (a CP group's ranks are reduced like replicas).
    const std::int64_t replicas = p.dp * p.cp, replicaIndex = m_coord.dp * p.cp + m_coord.cp;
    params.initialise(options.seed);
    shareParameters(*comms.data); // before anything keeps a pointer into the values
    // The V (ZB-V, DualPipe) puts the embedding and the head both on rank 0: one copy, nothing to add.
    m_tiedAcrossStages
        = p.pp > 1 && layout.model.tieEmbeddings && m_stage->tokenEmbedding() >= 0 && !m_schedule.vShaped();

    m_tuning.backend = plan::toString(layout.commBackend());
    m_tuning.nodes = comm::nodesSpanned(comms.data->group().ranks, m_grid.devicesPerNode());
    m_tuning.algorithm = layout.comm.allreduce;
    m_tuning.chunkBytes = static_cast<std::size_t>(layout.comm.chunkKb * 1024);
    const auto bucketBytes = static_cast<std::size_t>(layout.comm.bucketMb * (1 << 20));
    // What the table is read at: the same bytes the cost model and the simulator read it at.
    const std::size_t largestBucket = plan::dpAllreduceBytes(layout, double(params.values.size()));
    comm::CollectiveOptions sync; // the layout's algorithm, or the measured table's for the bucket size
    sync.algorithm = m_tuning.allReduceAlgorithm(largestBucket, static_cast<int>(replicas));
    sync.chunkBytes = m_tuning.chunkBytes;
    sync.codec = layout.comm.dpCodec;
    // A lossy codec's output depends on the whole bucket: TP-replicated tensors and the tied embedding
    // (held by the first and the last stage) get buckets of their own so that their copies stay identical.
    std::vector<int> groups;
    const bool lossy
        = layout.comm.dpCodec.kind != plan::Codec::Kind::None && layout.comm.dpCodec.kind != plan::Codec::Kind::Lz4;
    if (lossy && replicas > 1)
        for (int i = 0; i < static_cast<int>(params.specs().size()); ++i)
            groups.push_back(i == m_stage->tokenEmbedding() && m_tiedAcrossStages ? 2
                    : p.tp > 1 && params.spec(i).shard == Shard::Replicated       ? 1
                                                                                  : 0);
    const int expertGroup = 3; // MoE: experts' gradients in buckets of their own, over the expert-data group
    if (p.ep > 1) {
        groups.resize(params.specs().size(), 0);
        for (int i = 0; i < static_cast<int>(groups.size()); ++i)
            if (m_stage->isExpertParam(i))
                groups[static_cast<std::size_t>(i)] = expertGroup;
    }
    // Tensors whose rows each DP member completes itself (shareRows), each in a bucket of its own.
    const bool embeddingRows = embeddingRowsPay(*comms.data);
    const std::vector<int> weightRows = weightRowsThatPay(*comms.data);
    if (embeddingRows || !weightRows.empty()) {
        groups.resize(params.specs().size(), 0);
        for (int i : weightRows) // never next to one another: each is a bucket
            groups[static_cast<std::size_t>(i)] = expertGroup + 2;
        if (embeddingRows)
            groups[static_cast<std::size_t>(m_stage->tokenEmbedding())] = expertGroup + 1;
    }
    m_sync = std::make_unique<GradientSync>(
        params, comms.data.get(), bucketBytes, layout.comm.overlap, sync, layout.comm.errorFeedback, groups);
    if (p.ep > 1)
        m_sync->setGroupCommunicator(expertGroup, comms.expertData.get());
    m_sync->setStaleness(layout.comm.staleness);

    m_decay.assign(params.values.size(), 0);
    for (const auto& s : params.specs())
        if (s.decay)
            std::fill(m_decay.begin() + static_cast<std::ptrdiff_t>(s.offset),
                m_decay.begin() + static_cast<std::ptrdiff_t>(s.offset + s.size()), 1);
    std::size_t begin = 0, end = params.values.size();
    AdamW::Ranges pieces;
    if (distributedOptimizer(replicas)) {
        // Megatron's distributed optimizer: the buckets are reduce-scattered, each rank updates its piece of
        // every bucket, and the pieces are all-gathered after the optimizer (gatherZero1Pieces).
        m_sync->setShardedReduction(m_tuning.shardOptions(largestBucket, static_cast<int>(replicas)));
        pieces = m_sync->ownedPieces();
        m_zero1Pieces = true;
        shareRows(*comms.data, embeddingRows, weightRows);
    } else if (layout.memory.zero == 1 && replicas > 1) { // one contiguous range per rank, all-reduced
        const std::size_t shard
            = (params.values.size() + static_cast<std::size_t>(replicas) - 1) / static_cast<std::size_t>(replicas);
        begin = std::min(params.values.size(), shard * static_cast<std::size_t>(replicaIndex));
        end = std::min(params.values.size(), begin + shard);
    }
    if (layout.memory.zero >= 2 && p.dp * p.cp > 1) { // ShardedParams.h: the optimizer works on this rank's shard
        m_sharded
            = std::make_unique<ShardedParams>(*m_stage, *comms.data, layout.memory.zero, layout.comm.overlap, m_tuning);
        begin = 0;
        end = m_sharded->shardSize();
    }
    const auto& o = layout.optimizer;
    m_adam = m_zero1Pieces ? std::make_unique<AdamW>(pieces, o.adamBeta1, o.adamBeta2, o.adamEps, o.weightDecay)
                           : std::make_unique<AdamW>(begin, end, o.adamBeta1, o.adamBeta2, o.adamEps, o.weightDecay);
    m_codecWarmup = std::max<std::int64_t>(layout.comm.codecWarmup, 0);
    if (layout.comm.dpCodec.kind == plan::Codec::Kind::TopK && layout.comm.errorFeedback && replicas > 1) {
        // Sparse updates under AdamW (SparseAdam): a warm-up of uncompressed steps, then frozen variance.
        if (layout.comm.codecWarmup < 0)
            m_codecWarmup = std::max<std::int64_t>(1, options.steps / 10);
        m_sparse = std::make_unique<SparseAdam>(m_sync->bucketRanges(), *comms.data, sync);
    }
    m_lr = plan::lrSchedule(layout.optimizer, options.lr, options.warmup, options.steps);
    m_clip = layout.optimizer.clipGrad > 0 ? layout.optimizer.clipGrad : INFINITY;
    const bool normWhileHot = replicas == 1 && p.tp == 1 && p.pp == 1 && layout.comm.staleness == 0;
    m_squares.assign(normWhileHot ? params.specs().size() : 0, -1.0);

    // Zero-bubble schedules: B leaves the weight matrices' products to W, and a chunk's gradients are
    // final after its last W (TrainerSchedule.cpp).
    m_stage->setSplitBackward(m_schedule.splitsBackward());
    const auto finishing = m_schedule.splitsBackward() ? PipelineOp::Kind::Weight : PipelineOp::Kind::Backward;
    m_lastBackward.assign(static_cast<std::size_t>(m_schedule.chunks()), -1);
    const auto& ops = m_schedule.opsOf(m_coord.pp);
    for (int i = 0; i < static_cast<int>(ops.size()); ++i)
        if (ops[static_cast<std::size_t>(i)].kind == finishing)
            m_lastBackward[static_cast<std::size_t>(ops[static_cast<std::size_t>(i)].chunk)] = i;
}

int Trainer::tag(int kind, int microBatch, std::int64_t virtualStage) const
{
    const std::int64_t stages = m_layout.parallel.pp * m_schedule.chunks();
    return static_cast<int>(((kind * m_schedule.microBatches() + microBatch) * stages + virtualStage) % 32768);
}

void Trainer::batchOf(
    std::int64_t step, int microBatch, std::vector<std::int32_t>& tokens, std::vector<std::int32_t>& targets) const
{
    const auto& p = m_layout.parallel;
    const std::int64_t s = m_layout.model.seqLen;
    tokens.resize(static_cast<std::size_t>(p.microBatch * s));
    targets.resize(tokens.size());
    for (std::int64_t i = 0; i < p.microBatch; ++i) {
        const std::int64_t index = m_coord.dp * (p.globalBatch / p.dp) + microBatch * p.microBatch + i;
        m_corpus.sequence(m_options.seed, step, index, s, tokens.data() + i * s, targets.data() + i * s);
    }
    if (p.cp > 1) { // this CP rank's two chunks of each sequence, in local order (GptStage::positionOf)
        const std::int64_t local = s / p.cp;
        for (std::int64_t i = 0; i < p.microBatch; ++i)
            for (std::int64_t t = 0; t < local; ++t) {
                const std::int64_t from = i * s + m_stage->positionOf(static_cast<int>(t));
                tokens[static_cast<std::size_t>(i * local + t)] = tokens[static_cast<std::size_t>(from)];
                targets[static_cast<std::size_t>(i * local + t)] = targets[static_cast<std::size_t>(from)];
            }
        tokens.resize(static_cast<std::size_t>(p.microBatch * local));
        targets.resize(tokens.size());
    }
}

void Trainer::record(
    trace::EventKind kind, std::int64_t start, std::int64_t step, int microBatch, std::int64_t stage, int chunk)
{
    if (!m_options.recorder)
        return;
    trace::TraceEvent e;
    e.kind = kind;
    e.step = static_cast<std::int32_t>(step);
    e.microBatch = microBatch;
    e.stage = static_cast<std::int32_t>(stage);
    e.chunk = chunk;
    e.startNs = start;
    e.endNs = trace::nowNs();
    m_options.recorder->record(std::move(e));
}

void Trainer::syncTiedEmbedding()
{
    // The first and the last pipeline rank each hold the token embedding (input and LM head): add their
    // gradients so both copies take the same step (Megatron's embedding group).
    if (!m_tiedAcrossStages)
        return;
    const auto& p = m_layout.parallel;
    const bool first = m_coord.pp == 0, lastStage = m_coord.pp == p.pp - 1;
    if (!first && !lastStage)
        return;
    ParamSet& params = m_stage->params();
    const int wte = m_stage->tokenEmbedding();
    const std::size_t n = params.spec(wte).size();
    std::vector<float> theirs(n);
    const int peer = first ? static_cast<int>(p.pp - 1) : 0;
    const int t = 32767;
    auto r = m_comms.pipeline->recv(theirs.data(), n, comm::DType::F32, peer, t);
    auto s = m_comms.pipeline->send(params.grad(wte), n, comm::DType::F32, peer, t);
    s->wait();
    r->wait();
    float* g = params.grad(wte);
    // Sum in the same order on both ranks (first's + last's), so the copies stay bit-identical.
    for (std::size_t i = 0; i < n; ++i)
        g[i] = first ? g[i] + theirs[i] : theirs[i] + g[i];
}

bool Trainer::countsInNorm(int tensor) const
{
    // Every parameter once per model replica: TP shards on every TP rank, replicated tensors on TP rank 0,
    // the token embedding on the first pipeline rank.
    if (m_stage->params().spec(tensor).shard == Shard::Replicated && m_coord.tp != 0)
        return false;
    return !(tensor == m_stage->tokenEmbedding() && m_tiedAcrossStages && m_coord.pp != 0);
}

void Trainer::takeSquares(const std::vector<int>& tensors)
{
    const auto t0 = trace::nowNs();
    ParamSet& params = m_stage->params();
    for (int i : tensors)
        if (double& taken = m_squares[static_cast<std::size_t>(i)]; taken < 0) // not yet (setWeightGradientDone)
            taken = sumOfSquares(params.grad(i), params.spec(i).size());
    m_squaresNs += trace::nowNs() - t0;
}

double Trainer::gradientNormSquared()
{
    ParamSet& params = m_stage->params();
    double sum = 0, experts = 0;
    if (m_sharded) { // each DP rank holds the reduced gradient of its pieces only: the DP group adds too
        sum = m_sharded->normSquared([this](int t) { return countsInNorm(t); });
    } else if (m_zero1Pieces) { // likewise: this rank's piece of every bucket, tensor by tensor
        for (const auto& [from, to] : m_adam->ranges())
            for (int i = 0; i < static_cast<int>(params.specs().size()); ++i) {
                const auto& s = params.spec(i);
                const std::size_t a = std::max(from, s.offset), b = std::min(to, s.offset + s.size());
                if (a < b && countsInNorm(i))
                    sum += sumOfSquares(params.grads.data() + a, b - a);
            }
    } else {
        for (int i = 0; i < static_cast<int>(params.specs().size()); ++i) {
            if (!countsInNorm(i))
                continue;
            const double taken = m_squares.empty() ? -1.0 : m_squares[static_cast<std::size_t>(i)];
            (m_comms.expert && m_stage->isExpertParam(i) ? experts : sum) // vectorised and threaded (Optimizer.h)
                += taken >= 0 ? taken : sumOfSquares(params.grad(i), params.spec(i).size());
        }
    }
    if (m_comms.expert) { // each member of the expert group holds a share of the experts
        m_comms.expert->allReduce(&experts, 1, comm::DType::F64, comm::ReduceOp::Sum)->wait();
        sum += experts;
    }
    double total = sum;
    const bool sharded = m_sharded || m_zero1Pieces;
    if (m_comms.tensor->size() > 1 || m_comms.pipeline->size() > 1 || sharded) {
        std::vector<float> v { static_cast<float>(sum) };
        // fp32 is enough for a norm used to clip; the all-reduce stays on the library path.
        m_comms.tensor->allReduce(v.data(), 1, comm::DType::F32, comm::ReduceOp::Sum)->wait();
        m_comms.pipeline->allReduce(v.data(), 1, comm::DType::F32, comm::ReduceOp::Sum)->wait();
        if (sharded)
            m_comms.data->allReduce(v.data(), 1, comm::DType::F32, comm::ReduceOp::Sum)->wait();
        total = v[0];
    }
    return total;
}

Trainer::ModelStateBytes Trainer::modelStateBytes() const
{
    ModelStateBytes b;
    b.optimizer = (m_adam->firstMoment().size() + m_adam->secondMoment().size()) * sizeof(float);
    if (m_sharded) {
        const auto s = m_sharded->bytes();
        b.params = s.params;
        b.grads = s.grads;
        b.peakParams = s.peakParams;
        b.peakGrads = s.peakGrads;
    } else {
        ParamSet& params = m_stage->params();
        b.params = b.peakParams = params.values.size() * sizeof(float);
        b.grads = b.peakGrads = params.grads.size() * sizeof(float);
    }
    return b;
}

StepResult Trainer::step(std::int64_t step)
{
    const auto t0 = std::chrono::steady_clock::now();
    if (m_options.recorder)
        m_options.recorder->setStep(static_cast<std::int32_t>(step));
    ParamSet& params = m_stage->params();
    params.zeroGrads();
    std::fill(m_squares.begin(), m_squares.end(), -1.0);
    m_squaresNs = 0;
    if (m_sharded)
        m_sharded->beginStep();
    const bool compressed = step >= m_codecWarmup;
    const bool sparse = m_sparse && compressed;
    m_sync->setCompressed(compressed);
    m_sync->setEnabled(!sparse && !m_sharded); // ZeRO-2/3 reduce-scatter instead (ShardedParams)
    m_sync->reset();
    double lossSum = 0;
    m_auxSum = 0;
    runSchedule(step, lossSum);
    m_stage->sumSequenceParallelGrads(m_stage->outerParams());
    // The token embedding's two copies add their gradients before any bucket holding it starts reducing.
    syncTiedEmbedding();
    for (int i = 0; i < static_cast<int>(params.specs().size()); ++i)
        if (i == m_stage->tokenEmbedding() || params.spec(i).name.rfind("h", 0) != 0)
            m_sync->markReady(i); // embedding and head tensors: reduced after backward
    // Staleness 1: the gradient applied now is the previous step's (averaged while this step computed),
    // with that step's learning rate; the first step has none and leaves the weights as they are.
    const auto waitStart = trace::nowNs(); // the gradient reduction's exposed part (the trace's "wait")
    const bool apply = m_sync->finish();
    if (m_sharded)
        m_sharded->finish();
    record(trace::EventKind::Wait, waitStart, step);

    StepResult r;
    r.step = step;
    const auto& p = m_layout.parallel;
    // The optimizer's event holds the clipping norm too (with its small all-reduces), as Megatron's
    // "optimizer" timer does: the norm reads every gradient once more, a seventh of the update's traffic.
    const auto optimizerStart = trace::nowNs();
    const double norm = apply ? std::sqrt(gradientNormSquared()) : 0.0;
    r.gradNorm = norm;
    r.lr = apply ? m_lr.at(step - m_sync->staleness()) : 0.0;
    const auto updateStart = trace::nowNs();
    if (!apply) {
    } else if (sparse) {
        // Local gradients (this rank's share of the mean): DGC's local clipping at clip/sqrt(dp).
        const double threshold = m_clip / std::sqrt(double(p.dp * p.cp));
        const float clip = norm > threshold ? static_cast<float>(threshold / (norm + 1e-6)) : 1.0f;
        r.gradNorm = norm * std::sqrt(double(p.dp * p.cp)); // the estimate of the global norm the threshold assumes
        m_sparse->step(*m_adam, params.values.data(), params.grads.data(), clip, m_decay, r.lr, m_codecWarmup);
    } else {
        const float clip = norm > m_clip ? static_cast<float>(m_clip / (norm + 1e-6)) : 1.0f;
        if (m_sharded)
            m_adam->step(m_sharded->shardValues(), m_sharded->shardGrads(), m_sharded->shardDecay(), r.lr, clip);
        else
            m_adam->step(params.values.data(), params.grads.data(), m_decay, r.lr, clip);
    }
    r.update = double(trace::nowNs() - updateStart) * 1e-9;
    record(trace::EventKind::Optimizer, optimizerStart, step);
    if (apply && m_sharded && m_layout.memory.zero == 2)
        m_sharded->gatherFlat(); // ZeRO-2: every rank's updated pieces into the full parameters
    if (apply && m_zero1Pieces && params.values.shared()) {
        // The norm's all-reduce above had every member finish its backward before any update; the
        // barrier has every member's pieces written before any member reads them.
        m_comms.data->barrier()->wait();
    } else if (apply && m_zero1Pieces) {
        m_sync->allGatherPieces(params.values.data(), m_tuning);
    } else if (apply && !sparse && m_layout.memory.zero == 1 && p.dp * p.cp > 1) {
        // ZeRO-1: each DP (dp·cp) rank updated its shard; gather the others' shards.
        const std::size_t replicas = static_cast<std::size_t>(p.dp * p.cp);
        const std::size_t shard = (params.values.size() + replicas - 1) / replicas;
        std::vector<float> mine(shard, 0.0f), all(shard * replicas);
        std::copy(params.values.begin() + static_cast<std::ptrdiff_t>(m_adam->begin()),
            params.values.begin() + static_cast<std::ptrdiff_t>(m_adam->end()), mine.begin());
        m_comms.data
            ->allGather(mine.data(), all.data(), shard, comm::DType::F32,
                m_tuning.shardOptions(all.size() * sizeof(float), static_cast<int>(replicas)))
            ->wait();
        std::copy(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(params.values.size()), params.values.begin());
    }
    m_sync->startDelayed(); // after ZeRO-1's all-gather, so that it does not queue behind the delayed all-reduce

    // The global loss: each data-parallel replica's last stage (TP rank 0, every CP rank) adds its share.
    const bool reports = m_coord.tp == 0 && m_stage->chunks().back().head;
    double share = reports ? lossSum / double(p.microBatches() * p.dp * p.cp) : 0.0;
    if (m_coord.tp == 0) // MoE: every stage's load-balancing losses are part of the loss (MoeLayer.h)
        share += m_auxSum / double(p.microBatches() * p.dp * p.cp);
    m_comms.world->allReduce(&share, 1, comm::DType::F64, comm::ReduceOp::Sum)->wait();
    r.loss = share;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.normInBackward = double(m_squaresNs) * 1e-9;
    const double tokens = double(p.globalBatch * m_layout.model.seqLen);
    r.tokensPerSecond = tokens / r.seconds;
    const plan::StepFlops flops = plan::stepFlops(m_layout);
    r.flopsPerSecond = flops.model / r.seconds;
    r.hardwareFlopsPerSecond = flops.hardware / r.seconds;
    return r;
}

void Trainer::save(const std::string& dir, std::int64_t stepsDone)
{
    const auto& p = m_layout.parallel;
    ParamSet& params = m_stage->params();
    CheckpointRole role;
    // CP ranks hold the same parameters; with ep > 1 the first expert group (dp < ep) writes: each member its
    // own experts, DP rank 0 the rest.
    role.writesParams = m_coord.cp == 0 && m_coord.dp < p.ep;
    role.writesMoments = role.writesParams || (m_layout.memory.zero == 1 && p.dp * p.cp > 1);
    for (int i = 0; i < static_cast<int>(params.specs().size()); ++i) {
        bool owns = params.spec(i).shard != Shard::Replicated || m_coord.tp == 0;
        if (p.ep > 1 && m_coord.dp != 0 && !m_stage->isExpertParam(i))
            owns = false;
        if (i == m_stage->tokenEmbedding() && m_tiedAcrossStages && m_coord.pp != 0)
            owns = false; // the last stage's copy of the tied embedding is the same tensor
        role.ownsTensor.push_back(owns);
    }
    CheckpointInfo info;
    info.step = stepsDone;
    info.adamSteps = m_adam->steps();
    info.seed = m_options.seed;
    info.modelJson = plan::toJson(m_layout.model).dump();
    info.layoutJson = plan::writeLayout(m_layout);
    if (m_sharded) // every DP rank writes its pieces of the parameters and the moments
        saveCheckpoint(dir, info, params, m_sharded->slices(*m_adam), role.ownsTensor, *m_comms.world);
    else
        saveCheckpoint(dir, info, params, *m_adam, role, *m_comms.world);
}

std::int64_t Trainer::resume(const std::string& folder)
{
    const CheckpointInfo info = readCheckpointInfo(folder);
    const auto saved = nlohmann::json::parse(info.modelJson);
    const auto mine = nlohmann::json::parse(plan::toJson(m_layout.model).dump());
    for (const char* key : { "layers", "hidden", "heads", "ffn_hidden", "vocab", "seq_len" })
        if (saved.value(key, -1) != mine.value(key, -2))
            throw std::runtime_error("the checkpoint " + folder + " holds a model with " + key + "="
                + saved.value(key, nlohmann::json()).dump() + " but the layout's model has " + key + "="
                + mine.value(key, nlohmann::json()).dump());
    // The block's form (absent keys: GPT-2's defaults, the same on both sides).
    for (const char* key : { "kv_heads", "mlp", "norm", "position", "bias", "tie_embeddings" })
        if (saved.value(key, nlohmann::json()) != mine.value(key, nlohmann::json()))
            throw std::runtime_error("the checkpoint " + folder + " holds a model with " + key + "="
                + (saved.contains(key) ? saved[key].dump() : std::string("(GPT-2's default)"))
                + " but the layout's model has " + key + "="
                + (mine.contains(key) ? mine[key].dump() : std::string("(GPT-2's default)")));
    if (m_sharded) {
        loadCheckpoint(folder, m_stage->params(), m_sharded->slices(*m_adam));
        if (m_layout.memory.zero == 2)
            m_sharded->gatherFlat();
    } else {
        loadCheckpoint(folder, m_stage->params(), *m_adam);
    }
    m_adam->setSteps(info.adamSteps);
    if (m_stage->params().values.shared()) // the members wrote the same values; all of them before any step
        m_comms.data->barrier()->wait();
    return info.step;
}

} // namespace loom::train
