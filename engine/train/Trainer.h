#pragma once

#include "engine/comm/Communicator.h"
#include "engine/device/DeviceTimeline.h"
#include "engine/plan/Layout.h"
#include "engine/plan/RankGrid.h"
#include "engine/plan/Schedule.h"
#include "engine/trace/TraceRecorder.h"
#include "engine/train/Corpus.h"
#include "engine/train/GptStage.h"
#include "engine/train/GradientSync.h"
#include "engine/train/Optimizer.h"
#include "engine/train/Sharding.h"

#include <memory>
#include <optional>

namespace loom::train {

struct TrainOptions {
    std::int64_t steps = 20;
    std::uint64_t seed = 1234;
    double lr = 1e-3;
    std::int64_t warmup = 10;
    double clip = 1.0; // unused: the layout's optimizer.clip_grad clips (kept for existing callers)
    trace::TraceRecorder* recorder = nullptr; // compute, wait and optimizer events when set
    // ZeRO-1 without tp, pp or cp: which gradients DP members may complete row by row where it pays
    // (Trainer::sharesEmbeddingRows, sharedWeightRows); less only to compare (bench_step --rows).
    enum class SharedRows { None, Embedding, All } sharedRows = SharedRows::All;
    // ZeRO-1's distributed optimizer with the DP group on one machine: its ranks keep one copy of the
    // parameters in shared memory (Trainer::sharesParameters); false only to compare (bench_step --share).
    bool shareParameters = true;
    // Where the parameters and gradients live (null: the host, hostDevice()).
    device::Device* device = nullptr;
};

struct StepResult {
    std::int64_t step = 0;
    double loss = 0; // mean over the global batch, the same on every rank
    double gradNorm = 0; // before clipping
    double lr = 0;
    double seconds = 0;
    double tokensPerSecond = 0;
    // plan::stepFlops over the step time, all ranks together: model FLOPs (what MFU divides) and hardware
    // FLOPs (with what memory.recompute computes again; what HFU divides).
    double flopsPerSecond = 0;
    double hardwareFlopsPerSecond = 0;
    // One replica without tp or pp: seconds the backward spent on the clipping norm's squares of each block's
    // finished gradients, taken right after they are complete (the optimizer's work, outside its event).
    double normInBackward = 0;
    // Seconds of the optimizer's event spent in the update itself (AdamW over this rank's parameters), the
    // rest being the norm and its all-reduces.
    double update = 0;
};

// The device-timed events of a step with the times of their timeline spans (one span each, in begin order,
// times in ms from the timeline's origin at `originNs`); throws std::runtime_error naming both counts when they
// differ, so that no event is dropped or given another's time.
std::vector<trace::TraceEvent> withDeviceTimes(std::vector<trace::TraceEvent> events,
    const std::vector<device::DeviceTimeline::Span>& spans, std::int64_t originNs);

// One rank's training: the GPT stage it holds, the pipeline schedule it runs, data-parallel gradient sync,
// global-norm clipping and AdamW, the DP group sharing gradients and optimizer as the layout's sharding
// strategy says (Sharding.h: chosen once, in the constructor). Collective over the world:
// every rank constructs one and calls step() the same number of times. It speaks only comm::Communicator,
// so it trains the same way on every backend; world-wide operations go through `comms.world`.
class Trainer {
public:
    Trainer(const plan::Layout& layout, comm::GridCommunicators& comms, const Corpus& corpus, TrainOptions options,
        Kernels& kernels);
    StepResult step(std::int64_t step);
    // Writes a checkpoint of the state after `stepsDone` steps under `dir` (collective).
    void save(const std::string& dir, std::int64_t stepsDone);
    // Loads `folder` (from any layout of the same model); returns the steps it had completed (collective).
    std::int64_t resume(const std::string& folder);
    // ZeRO-1 without TP, PP or CP: whether each DP rank completes its own rows of the tied token embedding's
    // gradient (GptStage::shareEmbeddingGradient) instead of reducing the whole of it.
    bool sharesEmbeddingRows() const { return m_sharesEmbeddingRows; }
    // The same for the blocks' weight matrices (GptStage::shareWeightGradient): how many are shared.
    int sharedWeightRows() const { return m_sharedWeightRows; }
    // ZeRO-1's distributed optimizer with the DP group on one machine: the group's ranks keep one copy of
    // the parameters in shared memory (Communicator::sharedMemory), each updates its pieces there, and a
    // barrier takes the place of the all-gather of the pieces.
    bool sharesParameters() const { return m_stage->params().values.shared(); }
    GptStage& stage() { return *m_stage; }
    // Bytes of model state this rank holds now (between steps) and the most it held during a step:
    // parameters (with ZeRO-2 the full buffer and the master shard), gradients, AdamW's moments.
    using ModelStateBytes = train::ModelStateBytes;
    ModelStateBytes modelStateBytes() const { return m_sharding->bytes(); }
    // How the DP group shares gradients and the optimizer (shardingKind of the layout).
    ShardingKind sharding() const { return m_sharding->kind(); }
    const plan::RankCoord& coord() const { return m_coord; }

private:
    // TrainerSchedule.cpp: this rank's ops of the pipeline schedule for one step (F, B and, split, W).
    void runSchedule(std::int64_t step, double& lossSum);
    // The W at index `index` of this rank's op list (TrainerSchedule.cpp), and the per-block callback of the
    // op that finishes its chunk's gradients (empty for any other op).
    void runWeight(std::int64_t step, std::size_t index);
    std::function<void(std::int64_t)> chunkFinishing(std::size_t index);
    // After a chunk's last backward (W when split): its blocks' gradients are final; `layer`'s go to the
    // DP reduction (and the norm's squares).
    void blockGradientsDone(std::int64_t layer);
    void batchOf(
        std::int64_t step, int microBatch, std::vector<std::int32_t>& tokens, std::vector<std::int32_t>& targets) const;
    // TrainerSetup.cpp: the constructor's parts.
    void refuseUntrainable() const;
    GptStage::Config stageConfig() const;
    void setWeightDecay();
    comm::CollectiveTuning dataTuning() const;
    comm::CollectiveOptions dataOptions(std::size_t largestBucket) const;
    std::vector<BucketGroup> bucketGroups() const;
    std::unique_ptr<GradientSync> makeGradientSync(const comm::CollectiveOptions& options) const;
    ShardingContext shardingContext(const comm::CollectiveOptions& options, std::size_t largestBucket) const;
    void prepareNormSquares();
    void findLastBackwards();
    // TrainerRows.cpp: whether DP members complete their own rows of the tied embedding's gradient, and of
    // which block weights, and the sharing itself (after GradientSync::setShardedReduction); and whether the
    // DP group keeps one copy of the parameters (shareParameters, before anything points into them).
    bool rowsMayBeShared(const comm::Communicator& data) const;
    bool embeddingRowsPay(const comm::Communicator& data) const;
    std::vector<int> weightRowsThatPay(const comm::Communicator& data) const;
    void shareRows(comm::Communicator& data, bool embedding, const std::vector<int>& weights);
    void shareParameters(comm::Communicator& data);
    int tag(int kind, int microBatch, std::int64_t virtualStage) const;
    double gradientNormSquared();
    // The squares of `tensors`' gradients, now final, into m_squares (in the backward), skipping those taken.
    void takeSquares(const std::vector<int>& tensors);
    void syncTiedEmbedding();
    // Records a compute-lane event of this rank (no-op without a recorder).
    void record(trace::EventKind kind, std::int64_t start, std::int64_t step, int microBatch = -1,
        std::int64_t stage = -1, int chunk = -1);
    // Compute events timed by the device's events (forward, backward, W, optimizer): begun before the work
    // is queued and ended after it, in stream order; flushDeviceEvents() reads their device times once the
    // step is done and records them, so a GPU trace shows when the GPU worked, not when the host queued it
    // (on a CpuDevice the same code gives host times). No-ops without a recorder.
    void beginDevice(
        trace::EventKind kind, std::int64_t step, int microBatch = -1, std::int64_t stage = -1, int chunk = -1);
    void endDevice(trace::EventKind kind);
    void flushDeviceEvents();

    plan::Layout m_layout;
    comm::GridCommunicators& m_comms;
    const Corpus& m_corpus;
    TrainOptions m_options;
    plan::RankGrid m_grid;
    plan::RankCoord m_coord;
    plan::Schedule m_schedule;
    std::unique_ptr<GptStage> m_stage;
    std::unique_ptr<GradientSync> m_sync;
    std::unique_ptr<ShardingStrategy> m_sharding;
    bool m_sharesEmbeddingRows = false;
    int m_sharedWeightRows = 0;
    comm::CollectiveTuning m_tuning; // the DP group's algorithm choice for ZeRO's reduce-scatters and all-gathers
    bool countsInNorm(int tensor) const;
    std::int64_t m_codecWarmup = 0; // steps with an uncompressed data-parallel all-reduce
    plan::LrSchedule m_lr; // the layout's optimizer section, --lr and --warmup for what it leaves out
    double m_clip = 1.0; // optimizer.clip_grad (infinite: no clipping)
    bool m_tiedAcrossStages = false; // the token embedding lives on the first and the last pipeline rank
    std::vector<int> m_lastBackward; // per chunk: index in the schedule of its last backward (W when split)
    double m_auxSum = 0; // MoE: this step's load-balancing losses on this rank
    // One replica, tp = pp = 1: a block's gradients are final in its last backward and nothing reduces them
    // after; their squares are taken there (a weight matrix's right after its product, the others when the
    // block ends), one entry per tensor (-1: not taken this step). Empty in every other layout.
    std::vector<double> m_squares;
    std::int64_t m_squaresNs = 0; // this step's time on them
    // With a recorder: the device-timed events of this step (their kinds and places in begin order, the
    // host time just before the timeline's origin was recorded).
    std::unique_ptr<device::DeviceTimeline> m_timeline;
    std::vector<trace::TraceEvent> m_deviceEvents;
    std::int64_t m_timelineOriginNs = 0;
};

} // namespace loom::train
