#pragma once

#include "engine/plan/ClusterSpec.h"
#include "engine/plan/ModelSpec.h"
#include "engine/plan/OptimizerSpec.h"
#include "engine/plan/Precision.h"
#include "engine/plan/SoftwareStack.h"
#include "engine/plan/WordTable.h"
#include "engine/trace/TraceEvent.h"

#include <array>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom::plan {

// ZbH1, ZbH2, ZbV and DualPipe split each backward into B (input gradients) and W (weight gradients);
// ZbV and DualPipe hold two chunks per rank in a V (Schedule.h).
enum class ScheduleKind { GPipe, OneFOneB, Interleaved, ZbH1, ZbH2, ZbV, DualPipe };
enum class Recompute { None, Selective, Full };
// The all-reduce a layout asks for: one enum with the communication layer (comm::CollectiveAlgorithm) and
// the trace (what ran), trace::Algorithm; comm.allreduce names one of kLayoutAllreduceAlgorithms, written
// with trace::toString ("auto", "library", "ring", "hierarchical", "shm"). Auto is chosen per backend, message size
// and group by plan::chooseAllreduce (engine/plan/AllreduceChoice.h) before a communicator sees it, the same
// choice the cost model prices and the simulator names.
using AllreduceAlgorithm = trace::Algorithm;
inline constexpr WordTable<AllreduceAlgorithm, 5> kAllreduceWords { { { AllreduceAlgorithm::Auto, "auto" },
    { AllreduceAlgorithm::Library, "library" }, { AllreduceAlgorithm::Ring, "ring" },
    { AllreduceAlgorithm::Hierarchical, "hierarchical" }, { AllreduceAlgorithm::SharedMemory, "shm" } } };
inline constexpr std::array<AllreduceAlgorithm, 5> kLayoutAllreduceAlgorithms = valuesOf(kAllreduceWords);
// Which parallel dimension varies fastest across consecutive ranks (see RankGrid.h). Context parallelism
// (cp) always comes right after tp, so both orders read with cp inserted: tp-cp-pp-dp and tp-cp-dp-pp (the
// latter is Megatron-LM's tp-cp-ep-dp-pp; expert groups add no ranks, they are carved out of dp·cp).
enum class RankOrder { TpPpDp, TpDpPp };
// The communication library the engine trains with (layout field comm.backend).
enum class CommBackend { Mpi, Gloo, Nccl };
// How attention keeps its scores: "flash" never stores the s×s matrix (the backward recomputes it),
// "materialized" keeps the softmax output (and its dropout mask) for the backward.
enum class Attention { Flash, Materialized };
// Zero-bubble schedules (parallel.weight_fill): "idle" lets a rank that would wait for its next input run
// a W of an earlier B ahead of its place in the op list (EarlyWeights.h); "listed" runs every W exactly
// where the schedule lists it, the paper's order. A layout without the field, a Schedule not told otherwise
// and the simulator all take kDefaultWeightFill; the writer leaves it out.
enum class WeightFill { Idle, Listed };
inline constexpr WeightFill kDefaultWeightFill = WeightFill::Listed;

// Each enum's words in the layout file (WordTable.h), in the order the workbench offers them. The reader
// accepts exactly these (parallel.order also its long forms with cp and ep), the writer and toString print
// them, the panels and the lessons list them.
inline constexpr WordTable<ScheduleKind, 7> kScheduleWords { { { ScheduleKind::GPipe, "gpipe" },
    { ScheduleKind::OneFOneB, "1f1b" }, { ScheduleKind::Interleaved, "interleaved" }, { ScheduleKind::ZbH1, "zb-h1" },
    { ScheduleKind::ZbH2, "zb-h2" }, { ScheduleKind::ZbV, "zb-v" }, { ScheduleKind::DualPipe, "dualpipe" } } };
inline constexpr WordTable<Recompute, 3> kRecomputeWords { { { Recompute::None, "none" },
    { Recompute::Selective, "selective" }, { Recompute::Full, "full" } } };
inline constexpr WordTable<RankOrder, 2> kRankOrderWords { { { RankOrder::TpPpDp, "tp-pp-dp" },
    { RankOrder::TpDpPp, "tp-dp-pp" } } };
inline constexpr WordTable<CommBackend, 3> kCommBackendWords { { { CommBackend::Mpi, "mpi" },
    { CommBackend::Gloo, "gloo" }, { CommBackend::Nccl, "nccl" } } };
inline constexpr WordTable<WeightFill, 2> kWeightFillWords { { { WeightFill::Idle, "idle" },
    { WeightFill::Listed, "listed" } } };
inline constexpr WordTable<Attention, 2> kAttentionWords { { { Attention::Flash, "flash" },
    { Attention::Materialized, "materialized" } } };

std::string_view toString(ScheduleKind kind);
// The kind of a schedule name toString() writes (OneFOneB for any other text; the parser checks names).
ScheduleKind scheduleKindOf(std::string_view name);
// Whether the schedule splits backwards into B and W, and whether it places two chunks per rank in a V.
bool splitsBackward(ScheduleKind kind);
bool vShaped(ScheduleKind kind);
// Model chunks per pipeline rank the schedule runs (vpp for interleaved, 2 for the V, else 1), and the
// virtual stage of rank r's chunk ch (chunk·pp + r; the V's way back 2·pp-1-r).
std::int64_t scheduleChunks(ScheduleKind kind, std::int64_t vpp);
std::int64_t stageOfChunk(ScheduleKind kind, std::int64_t pp, std::int64_t r, std::int64_t ch);
// Its inverse: the pipeline rank that holds virtual stage vs, and which of that rank's chunks vs is.
// Interleaved: vs = chunk·pp + rank (Megatron-LM's order); in a V rank r holds r and 2·pp-1-r, so the last
// virtual stage, with the LM head, is on rank 0.
std::int64_t rankOfStage(ScheduleKind kind, std::int64_t pp, std::int64_t vs);
std::int64_t chunkOfStage(ScheduleKind kind, std::int64_t pp, std::int64_t vs);
std::string_view toString(Recompute recompute);
std::string_view toString(RankOrder order);
std::string_view toString(CommBackend backend);
std::string_view toString(Attention attention);

// The data-parallel gradient codec: "none", "fp16", "bf16", "int8", "int4", "topk:<fraction>", "lz4".
struct Codec {
    enum class Kind { None, Fp16, Bf16, Int8, Int4, TopK, Lz4 };
    Kind kind = Kind::None;
    double topkFraction = 0; // only for TopK, in (0, 1)

    bool operator==(const Codec&) const = default;
    std::string toString() const;
    // Parses the text form; on failure returns nullopt and sets `why` to a sentence naming the fix.
    static std::optional<Codec> parse(std::string_view text, std::string* why = nullptr);
    bool lossy() const { return kind != Kind::None && kind != Kind::Lz4; }
};

// The codec kinds' words; topk's layout text adds ":<fraction>".
inline constexpr WordTable<Codec::Kind, 7> kCodecWords { { { Codec::Kind::None, "none" }, { Codec::Kind::Fp16, "fp16" },
    { Codec::Kind::Bf16, "bf16" }, { Codec::Kind::Int8, "int8" }, { Codec::Kind::Int4, "int4" },
    { Codec::Kind::TopK, "topk" }, { Codec::Kind::Lz4, "lz4" } } };

// Transformer blocks [first, last], both inclusive, counted from 0. A range with last = first - 1 holds no
// blocks: the first virtual stage with only the embedding, or the last with only the LM head and the loss
// (Llama 3's pipeline; Megatron-LM's --account-for-embedding/loss-in-pipeline-split).
struct StageRange {
    std::int64_t first = 0;
    std::int64_t last = 0;

    bool operator==(const StageRange&) const = default;
    std::int64_t size() const { return last - first + 1; }
    bool empty() const { return last < first; }
};

struct ParallelSpec {
    std::int64_t tp = 1;
    std::int64_t pp = 1;
    std::int64_t dp = 1;
    std::int64_t vpp = 1; // virtual stages (model chunks) per pipeline rank
    std::int64_t microBatch = 1; // sequences per micro-batch
    std::int64_t globalBatch = 1; // sequences per optimizer step, over all replicas
    ScheduleKind schedule = ScheduleKind::OneFOneB;
    std::vector<StageRange> stages; // empty: an even split; else pp*vpp entries in virtual-stage order
    RankOrder order = RankOrder::TpPpDp;
    bool sp = false; // sequence parallelism (Korthikanti et al. 2022): norms and dropout split along s over tp
    // Context parallelism: each sequence split over cp ranks in 2·cp chunks (rank i holds chunks i and
    // 2·cp-1-i, so causal attention work is even); K/V travel around the CP group (ring attention).
    std::int64_t cp = 1;
    std::int64_t ep = 1; // expert parallelism: ep consecutive DP ranks share out the experts (adds no ranks)
    // Megatron-Core's expert_tensor_parallel_size: with it set, the expert layers get their own grid over a
    // stage's tp·cp·dp ranks, expert_tp × ep × expert-data-parallel (ExpertGroups.h); 0 (absent): the
    // carving above, ep out of dp with the experts whole on every TP rank.
    std::int64_t expertTp = 0;
    // Interleaved schedule: micro-batches run back to back through each chunk (Megatron-LM's
    // --microbatch-group-size-per-virtual-pipeline-stage, the Llama 3 paper's N); 0 (field absent): pp.
    std::int64_t microbatchGroup = 0;
    WeightFill weightFill = kDefaultWeightFill; // zero-bubble schedules: "idle" lets W run early where a rank waits

    bool operator==(const ParallelSpec&) const = default;
    std::int64_t worldSize() const { return tp * cp * pp * dp; }
    // Micro-batches per pipeline per step: global_batch / (micro_batch * dp).
    std::int64_t microBatches() const { return globalBatch / (microBatch * dp); }
    // The interleaved schedule's micro-batch group N: microbatch_group, or pp when it is not set.
    std::int64_t group() const { return microbatchGroup > 0 ? microbatchGroup : pp; }
};

struct MemorySpec {
    int zero = 0; // ZeRO stage 0-3: shards optimizer state (1), gradients too (2), parameters too (3) over dp
    Recompute recompute = Recompute::None;
    Attention attention = Attention::Flash;
    // Memory-efficient norms (Megatron-LM's --memory-efficient-layer-norm, apex's memory_efficient): each
    // norm keeps its output, which the next product keeps anyway, instead of its input, and the backward
    // recovers the normalised values from the output and the gain (which must have no zero entry).
    bool efficientNorm = false;

    bool operator==(const MemorySpec&) const = default;
};

struct CommSpec {
    Codec dpCodec;
    bool errorFeedback = true;
    bool overlap = true;
    double bucketMb = 25; // PyTorch DDP's default bucket size
    double chunkKb = 1024; // chunk size of the chunked ring all-reduce
    AllreduceAlgorithm allreduce = AllreduceAlgorithm::Auto;
    // Steps whose data-parallel all-reduce is uncompressed before dp_codec starts; -1 (field absent): 0,
    // except for topk with error feedback, where it is a tenth of the run (AdamW's variance is frozen then).
    std::int64_t codecWarmup = -1;
    // "mpi", "gloo" or "nccl"; absent: nccl on a GPU cluster, mpi otherwise (Layout::commBackend()).
    std::optional<CommBackend> backend;
    // Data-parallel gradient staleness: 0 applies each step's averaged gradient at once; 1 keeps the
    // all-reduce of step k in flight while step k+1 computes and applies it at the end of step k+1
    // (delayed-gradient SGD, as in PipeDream-2BW), so the reduction hides behind a whole step.
    int staleness = 0;
    // Overlaps of today's Megatron-Core (defaults as its own): tensor-parallel communication pipelined with
    // the GEMMs beside it (--tp-comm-overlap, userbuffers; off), the gradients' reduction bucket by bucket
    // during the last backward (--overlap-grad-reduce; absent: `overlap`), and with ZeRO-1 (the distributed
    // optimizer) the updated parameters' all-gather during the next step's first forward
    // (--overlap-param-gather; off).
    bool tpCommOverlap = false;
    std::optional<bool> overlapGradReduce;
    bool overlapParamGather = false;

    bool operator==(const CommSpec&) const = default;
    bool gradReduceOverlapped() const { return overlapGradReduce.value_or(overlap); }
};

// What runs where: the one description that the workbench, the planner, the simulator and the engine read.
struct Layout {
    static constexpr int kVersion = 1;

    std::string name;
    std::string description;
    ModelSpec model;
    std::string modelProfile; // the profile name when the file named one; written back as the name
    ClusterSpec cluster;
    std::string clusterProfile;
    std::int64_t nodes = 1;
    ParallelSpec parallel;
    MemorySpec memory;
    Precision precision = Precision::Fp32;
    Fp8Recipe fp8 = Fp8Recipe::None; // layout key "fp8": the linear layers' GEMMs in FP8 (Precision.h)
    CommSpec comm;
    OptimizerSpec optimizer; // OptimizerSpec.h
    InitSpec init;
    // Layout key "stack": the framework whose kernels the planner prices (SoftwareStack.h); absent: the newest
    // Megatron-Core, whose efficiencies the cluster profiles carry.
    StackSpec stack;

    bool operator==(const Layout&) const = default;

    std::int64_t virtualStages() const { return parallel.pp * parallel.vpp; }
    // comm.backend, or its default: nccl on a GPU cluster (intra-node links nvlink or pcie), mpi otherwise.
    CommBackend commBackend() const;
    bool onGpuCluster() const;
    // The explicit stages, or the default split: layers spread evenly over pp*vpp virtual stages, with any
    // remainder going to the inner stages first (the first holds the embedding, the last the LM head).
    std::vector<StageRange> stageRanges() const;
};

// An even split of `layers` blocks over `count` virtual stages (count <= layers).
std::vector<StageRange> evenStageSplit(std::int64_t layers, std::int64_t count);
// The even split with the embedding and the LM head counted as one layer each (Megatron-LM's
// --account-for-embedding/loss-in-pipeline-split, Llama 3's pipeline): the first and the last stage hold
// one block fewer than the others, none when the others hold one. Empty unless count divides layers + 2.
std::vector<StageRange> accountedStageSplit(std::int64_t layers, std::int64_t count);

} // namespace loom::plan
