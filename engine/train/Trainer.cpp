#include "engine/train/Trainer.h"

#include "engine/comm/AlgorithmTuner.h"
#include "engine/plan/CostModel.h"
#include "engine/plan/Flops.h"
#include "engine/plan/LayoutParser.h"
#include "engine/train/Checkpoint.h"
#include "engine/train/MoeLayer.h"

#include <nlohmann/json.hpp>

#include <array>
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
    refuseUntrainable();
    const auto& p = layout.parallel;
    m_stage = std::make_unique<GptStage>(stageConfig(), kernels);
    m_stage->setContextParallel(comms.context.get(), static_cast<int>(m_coord.cp), static_cast<int>(p.cp));
    m_stage->setEfficientNorm(layout.memory.efficientNorm);
    setWeightDecay();
    m_stage->params().initialise(options.seed);
    shareParameters(*comms.data); // before anything keeps a pointer into the values
    // The V (ZB-V, DualPipe) puts the embedding and the head both on rank 0: one copy, nothing to add.
    m_tiedAcrossStages
        = p.pp > 1 && layout.model.tieEmbeddings && m_stage->tokenEmbedding() >= 0 && !m_schedule.vShaped();

    m_tuning = dataTuning();
    // What the table is read at: the same bytes the cost model and the simulator read it at (before ZeRO-2/3
    // let the flat buffers go).
    const std::size_t largestBucket = plan::dpAllreduceBytes(layout, double(m_stage->params().values.size()));
    const comm::CollectiveOptions sync = dataOptions(largestBucket);
    m_sync = makeGradientSync(sync);
    m_codecWarmup = codecWarmupSteps(layout, options.steps);
    m_sharding = makeSharding(shardingKind(layout), shardingContext(sync, largestBucket));
    if (m_sharding->kind() == ShardingKind::DistributedOptimizer) // after GradientSync::setShardedReduction
        shareRows(*comms.data, embeddingRowsPay(*comms.data), weightRowsThatPay(*comms.data));
    m_lr = plan::lrSchedule(layout.optimizer, options.lr, options.warmup, options.steps);
    m_clip = layout.optimizer.clipGrad > 0 ? layout.optimizer.clipGrad : INFINITY;
    prepareNormSquares();
    // Zero-bubble schedules: B leaves the weight matrices' products to W, and a chunk's gradients are
    // final after its last W (TrainerSchedule.cpp).
    m_stage->setSplitBackward(m_schedule.splitsBackward());
    findLastBackwards();
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

namespace {

// An event of one pass (kind, step, micro-batch, stage, chunk), its times still to be set.
trace::TraceEvent passEvent(trace::EventKind kind, std::int64_t step, int microBatch, std::int64_t stage, int chunk)
{
    trace::TraceEvent e;
    e.kind = kind;
    e.step = static_cast<std::int32_t>(step);
    e.microBatch = microBatch;
    e.stage = static_cast<std::int32_t>(stage);
    e.chunk = chunk;
    return e;
}

} // namespace

void Trainer::record(
    trace::EventKind kind, std::int64_t start, std::int64_t step, int microBatch, std::int64_t stage, int chunk)
{
    if (!m_options.recorder)
        return;
    trace::TraceEvent e = passEvent(kind, step, microBatch, stage, chunk);
    e.startNs = start;
    e.endNs = trace::nowNs();
    m_options.recorder->record(std::move(e));
}

namespace {

// A timeline region's name for an event kind (names only need to tell the kinds apart): "kind0", "kind1"...,
// made once, so that timing an op allocates no name.
const std::string& regionName(trace::EventKind kind)
{
    static const auto names = [] {
        std::array<std::string, static_cast<std::size_t>(trace::EventKind::Launch) + 1> all;
        for (std::size_t i = 0; i < all.size(); ++i)
            all[i] = "kind" + std::to_string(i);
        return all;
    }();
    return names.at(static_cast<std::size_t>(kind));
}

} // namespace

std::vector<trace::TraceEvent> withDeviceTimes(std::vector<trace::TraceEvent> events,
    const std::vector<device::DeviceTimeline::Span>& spans, std::int64_t originNs)
{
    if (spans.size() != events.size())
        throw std::runtime_error("device timeline: " + std::to_string(spans.size()) + " spans for "
            + std::to_string(events.size()) + " device-timed events of this step (one each expected)");
    for (std::size_t i = 0; i < spans.size(); ++i) {
        events[i].startNs = originNs + std::llround(spans[i].startMs * 1e6);
        events[i].endNs = events[i].startNs + std::llround(spans[i].durationMs * 1e6);
    }
    return events;
}

void Trainer::beginDevice(trace::EventKind kind, std::int64_t step, int microBatch, std::int64_t stage, int chunk)
{
    if (!m_timeline)
        return;
    m_timeline->begin(regionName(kind)); // first, so that a region that failed to begin has no event
    m_deviceEvents.push_back(passEvent(kind, step, microBatch, stage, chunk));
}

void Trainer::endDevice(trace::EventKind kind)
{
    if (m_timeline)
        m_timeline->end(regionName(kind));
}

void Trainer::flushDeviceEvents()
{
    if (!m_timeline)
        return;
    const auto spans = m_timeline->collect(); // in begin order, as m_deviceEvents
    std::vector<trace::TraceEvent> events = std::move(m_deviceEvents);
    m_deviceEvents.clear();
    for (trace::TraceEvent& e : withDeviceTimes(std::move(events), spans, m_timelineOriginNs))
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
    // Where each DP rank holds the reduced gradient of its pieces only, the DP group adds too.
    const std::optional<double> shard = m_sharding->shardNormSquared([this](int t) { return countsInNorm(t); });
    if (shard) {
        sum = *shard;
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
    const bool sharded = shard.has_value();
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

StepResult Trainer::step(std::int64_t step)
{
    const auto t0 = std::chrono::steady_clock::now();
    ParamSet& params = m_stage->params();
    if (m_options.recorder) {
        m_options.recorder->setStep(static_cast<std::int32_t>(step));
        if (!m_timeline)
            m_timeline = std::make_unique<device::DeviceTimeline>(params.values.device());
        m_deviceEvents.clear();
        m_timelineOriginNs = trace::nowNs(); // a lower bound of the origin's time
        m_timeline->start();
    }
    params.zeroGrads();
    std::fill(m_squares.begin(), m_squares.end(), -1.0);
    m_squaresNs = 0;
    m_sync->setCompressed(step >= m_codecWarmup);
    m_sharding->beginStep(step); // whether the buckets are reduced, ZeRO-2/3's whole-step buffers
    m_sync->reset();
    double lossSum = 0;
    m_auxSum = 0;
    runSchedule(step, lossSum);
    m_stage->sumSequenceParallelGrads(m_stage->outerParams());
    // The token embedding's two copies add their gradients before any bucket holding it starts reducing.
    syncTiedEmbedding();
    for (int i = 0; i < static_cast<int>(params.specs().size()); ++i)
        if (params.spec(i).role == TensorRole::Outer)
            m_sync->markReady(i); // embedding and head tensors: reduced after backward
    // Staleness 1: the gradient applied now is the previous step's (averaged while this step computed),
    // with that step's learning rate; the first step has none and leaves the weights as they are.
    const auto waitStart = trace::nowNs(); // the gradient reduction's exposed part (the trace's "wait")
    const bool apply = m_sync->finish();
    m_sharding->finishGradients();
    record(trace::EventKind::Wait, waitStart, step);

    StepResult r;
    r.step = step;
    const auto& p = m_layout.parallel;
    // The optimizer's event holds the clipping norm too (with its small all-reduces), as Megatron's
    // "optimizer" timer does: the norm reads every gradient once more, a seventh of the update's traffic.
    beginDevice(trace::EventKind::Optimizer, step);
    const double norm = apply ? std::sqrt(gradientNormSquared()) : 0.0;
    r.gradNorm = norm;
    r.lr = apply ? m_lr.at(step - m_sync->staleness()) : 0.0;
    const auto updateStart = trace::nowNs();
    if (apply)
        r.gradNorm = m_sharding->update(step, norm, m_clip, r.lr);
    r.update = double(trace::nowNs() - updateStart) * 1e-9;
    endDevice(trace::EventKind::Optimizer);
    if (apply)
        m_sharding->gatherParameters(); // every member's updated parameters on every member
    m_sync->startDelayed(); // after ZeRO-1's all-gather, so that it does not queue behind the delayed all-reduce

    // The global loss: each data-parallel replica's last stage (TP rank 0, every CP rank) adds its share.
    const bool reports = m_coord.tp == 0 && m_stage->chunks().back().head;
    double share = reports ? lossSum / double(p.microBatches() * p.dp * p.cp) : 0.0;
    if (m_coord.tp == 0) // MoE: every stage's load-balancing losses are part of the loss (MoeLayer.h)
        share += m_auxSum / double(p.microBatches() * p.dp * p.cp);
    m_comms.world->allReduce(&share, 1, comm::DType::F64, comm::ReduceOp::Sum)->wait();
    r.loss = share;
    flushDeviceEvents();
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
    role.writesMoments = role.writesParams || m_sharding->shardsMoments();
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
    info.adamSteps = m_sharding->adam().steps();
    info.seed = m_options.seed;
    info.modelJson = plan::toJson(m_layout.model).dump();
    info.layoutJson = plan::writeLayout(m_layout);
    m_sharding->save(dir, info, role, *m_comms.world);
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
    m_sharding->load(folder);
    m_sharding->adam().setSteps(info.adamSteps);
    if (m_stage->params().values.shared()) // the members wrote the same values; all of them before any step
        m_comms.data->barrier()->wait();
    return info.step;
}

} // namespace loom::train
