#include "engine/plan/LayoutValidator.h"

#include "engine/plan/CostModel.h"
#include "engine/plan/ExpertGroups.h"
#include "engine/plan/MicrobatchGroup.h"
#include "engine/plan/RankGrid.h"
#include "engine/plan/Simulator.h"
#include "engine/plan/TextUtil.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace loom::plan {

namespace {

using std::to_string;
using text::joinInts;

class Rules {
public:
    Rules(const Layout& layout, const Diagnostics& reported, Diagnostics& out)
        : l(layout)
        , p(layout.parallel)
        , m(layout.model)
        , known(reported)
        , d(out)
    {
    }

    void run()
    {
        if (!positive())
            return; // a layout built in memory with a zero degree; the reader never produces one
        if (fine({ "parallel.tp", "parallel.pp", "parallel.dp", "parallel.cp" }) && p.worldSize() > kMaxRanks) {
            d.error("parallel",
                degreeProduct() + " ranks is more than Loom's limit of " + to_string(kMaxRanks)
                    + "; choose smaller degrees");
            return; // the other rules would reason about an absurd grid
        }
        deviceCount();
        tensorParallel();
        contextParallel();
        pipelineStages();
        batch();
        schedule();
        validateMicrobatchGroup(l, known, d);
        memoryAndComm();
        fp8();
        placement();
        replayable();
        validateExperts(l, known, d);
        if (checkMemory)
            memoryFit();
    }

private:
    bool positive()
    {
        const std::pair<const char*, std::int64_t> values[] = { { "parallel.tp", p.tp }, { "parallel.pp", p.pp },
            { "parallel.dp", p.dp }, { "parallel.cp", p.cp }, { "parallel.vpp", p.vpp },
            { "parallel.micro_batch", p.microBatch }, { "parallel.global_batch", p.globalBatch }, { "nodes", l.nodes },
            { "model.layers", m.layers }, { "model.hidden", m.hidden }, { "model.heads", m.heads },
            { "model.ffn_hidden", m.ffnHidden }, { "model.vocab", m.vocab }, { "model.seq_len", m.seqLen },
            { "model.vocab_pad_multiple", m.vocabPadMultiple } };
        bool ok = true;
        for (auto [field, value] : values) {
            if (value < 1 && !known.hasErrorAt(field)) {
                d.error(field, std::string(field) + "=" + to_string(value) + " is too small; it must be at least 1");
                ok = false;
            }
        }
        return ok;
    }

    // True when none of the fields had an error while reading.
    bool fine(std::initializer_list<const char*> fields) const
    {
        for (const char* f : fields)
            if (known.hasErrorAt(f))
                return false;
        return true;
    }

    // "parallel.tp·pp·dp = 2·2·2 = 8", with cp when it is above 1: "parallel.tp·cp·pp·dp = 2·2·2·2 = 16".
    std::string degreeProduct() const
    {
        if (p.cp > 1)
            return "parallel.tp·cp·pp·dp = " + to_string(p.tp) + "·" + to_string(p.cp) + "·" + to_string(p.pp) + "·"
                + to_string(p.dp) + " = " + to_string(p.worldSize());
        return "parallel.tp·pp·dp = " + to_string(p.tp) + "·" + to_string(p.pp) + "·" + to_string(p.dp) + " = "
            + to_string(p.worldSize());
    }

    void deviceCount()
    {
        if (!fine({ "parallel.tp", "parallel.pp", "parallel.dp", "parallel.cp", "nodes", "cluster" }))
            return;
        const auto& c = l.cluster;
        const std::string product = degreeProduct();
        if (l.nodes > 1 && !c.interNode) {
            d.error("nodes",
                "nodes=" + to_string(l.nodes) + " but cluster " + c.name
                    + " has no inter-node link (it is one machine); set nodes to 1 or use a cluster "
                      "profile with hosts");
            return;
        }
        if (c.autoDevices())
            return; // the local cluster has as many devices as the layout asks for
        const std::int64_t devices = l.nodes * c.devicesPerNode;
        if (p.worldSize() == devices)
            return;
        std::string fix;
        const std::int64_t tpp = p.tp * p.cp * p.pp;
        if (devices % tpp == 0)
            fix = "with tp=" + to_string(p.tp) + (p.cp > 1 ? ", cp=" + to_string(p.cp) : std::string())
                + " and pp=" + to_string(p.pp) + " use dp=" + to_string(devices / tpp);
        if (p.worldSize() % c.devicesPerNode == 0)
            fix += std::string(fix.empty() ? "" : ", or ") + "set nodes to "
                + to_string(p.worldSize() / c.devicesPerNode);
        if (fix.empty())
            fix = std::string(p.cp > 1 ? "choose tp·cp·pp·dp" : "choose tp·pp·dp") + " equal to " + to_string(devices)
                + " or a multiple of " + to_string(c.devicesPerNode);
        d.error("parallel",
            product + " does not match the " + to_string(devices) + " devices of nodes=" + to_string(l.nodes) + " × "
                + to_string(c.devicesPerNode) + " devices per node (" + c.name + "); " + fix);
    }

    void tensorParallel()
    {
        if (!fine({ "parallel.tp", "model" }))
            return;
        const std::string valid = "; valid tp: " + joinInts(validTensorParallelDegrees(m));
        if (m.heads % p.tp != 0)
            d.error("parallel.tp",
                "parallel.tp=" + to_string(p.tp) + " does not divide model.heads=" + to_string(m.heads) + valid);
        if (m.kvHeads > 0 && m.kvHeads % p.tp != 0)
            d.error("parallel.tp",
                "parallel.tp=" + to_string(p.tp) + " does not divide model.kv_heads=" + to_string(m.kvHeads)
                    + " (Loom splits the KV heads over the tp ranks as Megatron-LM does and never replicates them, "
                      "so every rank needs whole KV heads)"
                    + valid);
        if (m.ffnHidden % p.tp != 0)
            d.error("parallel.tp",
                "parallel.tp=" + to_string(p.tp) + " does not divide model.ffn_hidden=" + to_string(m.ffnHidden)
                    + valid);
        if (m.paddedVocab() % p.tp != 0)
            d.error("parallel.tp",
                "parallel.tp=" + to_string(p.tp) + " does not divide the padded vocabulary "
                    + to_string(m.paddedVocab()) + " (model.vocab=" + to_string(m.vocab)
                    + " rounded up to a multiple of " + to_string(m.vocabPadMultiple) + ")" + valid);
    }

    // Ring attention with the load-balanced causal split: each sequence is cut into 2·cp equal chunks.
    void contextParallel()
    {
        if (p.cp == 1 || !fine({ "parallel.cp", "model" }))
            return;
        std::vector<std::int64_t> good;
        for (auto c : text::divisors(m.seqLen))
            if (c % 2 == 0 && c / 2 > 1)
                good.push_back(c / 2);
        const std::string valid = good.empty()
            ? "; model.seq_len=" + to_string(m.seqLen) + " has no such split, so use cp 1"
            : "; with model.seq_len=" + to_string(m.seqLen) + " use cp in {" + joinInts(good) + "}";
        if (m.seqLen % (2 * p.cp) != 0)
            d.error("parallel.cp",
                "parallel.cp=" + to_string(p.cp) + " needs model.seq_len=" + to_string(m.seqLen)
                    + " divisible by 2·cp = " + to_string(2 * p.cp)
                    + " (each sequence is cut into 2·cp equal chunks and CP rank i holds chunks i and 2·cp-1-i, so "
                      "that every rank does the same causal attention work)"
                    + valid);
        if (fine({ "memory.attention" }) && l.memory.attention == Attention::Materialized)
            d.warning("memory.attention",
                "memory.attention=\"materialized\" with parallel.cp=" + to_string(p.cp)
                    + ": ring attention computes the scores one K/V block at a time and keeps only each row's "
                      "log-sum-exp, so no s×s matrix is stored and the planner counts the attention as flash; set "
                      "memory.attention to \"flash\" to say so");
    }

    void pipelineStages()
    {
        if (!fine({ "parallel.pp", "parallel.vpp", "model" }))
            return;
        const std::int64_t stages = l.virtualStages();
        // Listed stages may leave the first and the last chunk without layers (embedding or LM head alone).
        const std::int64_t spare = p.stages.empty() ? 0 : std::min<std::int64_t>(2, stages);
        if (stages > m.layers + spare) {
            const std::string what = p.vpp > 1
                ? "parallel.pp·vpp = " + to_string(p.pp) + "·" + to_string(p.vpp) + " = " + to_string(stages)
                : "parallel.pp=" + to_string(p.pp);
            d.error("parallel.pp",
                what + " is more than model.layers=" + to_string(m.layers) + (spare > 0 ? " + 2" : "")
                    + "; every pipeline stage needs at least one layer"
                    + (spare > 0 ? " (only the first and the last may hold none)" : "") + ", so use pp·vpp ≤ "
                    + to_string(m.layers + spare));
            return;
        }
        if (p.stages.empty() || !fine({ "parallel.stages" }))
            return;
        const std::string field = "parallel.stages";
        if (static_cast<std::int64_t>(p.stages.size()) != stages) {
            d.error(field,
                field + " has " + to_string(p.stages.size()) + " entries but the pipeline has " + to_string(stages)
                    + (p.vpp > 1 ? " virtual stages (pp·vpp)" : " stages (pp)")
                    + "; give one [first_layer, last_layer] per stage, or remove \"stages\" for an even split");
            return;
        }
        std::vector<int> count(static_cast<std::size_t>(m.layers), 0);
        bool inRange = true;
        for (std::size_t i = 0; i < p.stages.size(); ++i) {
            const auto& s = p.stages[i];
            const std::string ep = field + "[" + to_string(i) + "]";
            if (s.empty() && s.last == s.first - 1) {
                if (i != 0 && i + 1 != p.stages.size()) {
                    d.error(ep,
                        ep
                            + "=[] holds no layers; only the first virtual stage (the embedding alone) and the "
                              "last (the LM head and the loss alone) may be empty, as in Llama 3's pipeline; give "
                              "it at least one layer");
                    inRange = false;
                }
                continue;
            }
            if (s.first > s.last) {
                d.error(ep,
                    ep + "=[" + to_string(s.first) + ", " + to_string(s.last)
                        + "] starts after it ends; write [first_layer, last_layer] with first ≤ last, or [] for "
                          "a first chunk holding only the embedding or a last chunk holding only the LM head");
                inRange = false;
                continue;
            }
            if (s.last >= m.layers) {
                d.error(ep,
                    ep + "=[" + to_string(s.first) + ", " + to_string(s.last) + "] goes past the last layer "
                        + to_string(m.layers - 1) + " (model.layers=" + to_string(m.layers) + ", counted from 0)");
                inRange = false;
                continue;
            }
            for (auto layer = s.first; layer <= s.last; ++layer)
                ++count[static_cast<std::size_t>(layer)];
        }
        std::vector<std::int64_t> missing, doubled;
        for (std::int64_t layer = 0; layer < m.layers; ++layer) {
            if (count[static_cast<std::size_t>(layer)] == 0)
                missing.push_back(layer);
            else if (count[static_cast<std::size_t>(layer)] > 1)
                doubled.push_back(layer);
        }
        if (!missing.empty() && inRange)
            d.error(field,
                field + " leaves layer" + (missing.size() > 1 ? "s " : " ") + text::ranges(missing)
                    + " on no stage; every layer from 0 to " + to_string(m.layers - 1)
                    + " must be in exactly one stage");
        if (!doubled.empty())
            d.error(field,
                field + " puts layer" + (doubled.size() > 1 ? "s " : " ") + text::ranges(doubled)
                    + " on more than one stage; every layer must be in exactly one stage");
        if (inRange && missing.empty() && doubled.empty()) {
            for (std::size_t i = 1; i < p.stages.size(); ++i) {
                if (p.stages[i].first != p.stages[i - 1].last + 1) {
                    d.error(field,
                        field + " is not in layer order: stage " + to_string(i) + " starts at layer "
                            + to_string(p.stages[i].first) + " but stage " + to_string(i - 1) + " ends at layer "
                            + to_string(p.stages[i - 1].last)
                            + "; list the stages so each starts where the previous one ended");
                    break;
                }
            }
        }
    }

    void batch()
    {
        if (!fine({ "parallel.dp", "parallel.micro_batch", "parallel.global_batch" }))
            return;
        const std::int64_t unit = p.microBatch * p.dp;
        if (p.globalBatch % unit == 0)
            return;
        const std::int64_t below = p.globalBatch / unit * unit;
        const std::int64_t above = below + unit;
        std::string fix = below > 0 ? "use global_batch " + to_string(below) + " or " + to_string(above)
                                    : "use global_batch " + to_string(above);
        d.error("parallel.global_batch",
            "parallel.global_batch=" + to_string(p.globalBatch) + " is not a multiple of micro_batch·dp = "
                + to_string(p.microBatch) + "·" + to_string(p.dp) + " = " + to_string(unit) + "; " + fix);
    }

    void schedule()
    {
        if (!fine({ "parallel.schedule", "parallel.vpp", "parallel.pp" }))
            return;
        if (splitsBackward(p.schedule)) {
            zeroBubble();
            return;
        }
        if (p.schedule != ScheduleKind::Interleaved) {
            if (p.vpp > 1)
                d.error("parallel.vpp",
                    "parallel.vpp=" + to_string(p.vpp) + " needs schedule \"interleaved\" (schedule is \""
                        + std::string(toString(p.schedule)) + "\"); set schedule to \"interleaved\" or vpp to 1");
            return;
        }
        if (p.pp < 2)
            d.error("parallel.schedule",
                "parallel.schedule=\"interleaved\" needs a pipeline (pp ≥ 2, here pp=" + to_string(p.pp)
                    + "); use schedule \"1f1b\" or raise pp");
        if (p.vpp < 2)
            d.error("parallel.vpp",
                "parallel.schedule=\"interleaved\" needs vpp ≥ 2 model chunks per pipeline rank "
                "(here vpp=1); set vpp to 2 or more, or use schedule \"1f1b\"");
        if (fine({ "model" }) && m.layers % l.virtualStages() != 0 && p.stages.empty()) {
            std::vector<std::int64_t> good;
            for (auto v : text::divisors(m.layers))
                if (v % p.pp == 0 && v / p.pp >= 2)
                    good.push_back(v / p.pp);
            d.error("parallel.vpp",
                "schedule \"interleaved\" needs model.layers=" + to_string(m.layers) + " divisible by pp·vpp = "
                    + to_string(p.pp) + "·" + to_string(p.vpp) + " = " + to_string(l.virtualStages())
                    + (good.empty() ? "; no vpp works with this pp, so change pp"
                                    : "; with pp=" + to_string(p.pp) + " use vpp in {" + joinInts(good) + "}")
                    + ", or list uneven parallel.stages (pp·vpp entries; only the first and the last may be [])");
        }
        if (fine({ "parallel.dp", "parallel.micro_batch", "parallel.global_batch" })
            && p.globalBatch % (p.microBatch * p.dp) == 0 && p.microBatches() % p.pp != 0
            && p.microbatchGroup == 0) // with microbatch_group, validateMicrobatchGroup's rule instead
            d.error("parallel.global_batch",
                "schedule \"interleaved\" needs the micro-batches per step (global_batch / (micro_batch·dp) = "
                    + to_string(p.microBatches()) + ") divisible by pp=" + to_string(p.pp)
                    + "; use global_batch a multiple of " + to_string(p.microBatch * p.dp * p.pp));
    }

    // ZB-H1/H2 keep one chunk a rank; ZB-V and DualPipe two in a V (vpp 2); all need a pipeline.
    void zeroBubble()
    {
        const std::string name = "parallel.schedule=\"" + std::string(toString(p.schedule)) + "\"";
        if (p.pp < 2)
            d.error("parallel.schedule",
                name + " needs a pipeline (pp ≥ 2, here pp=" + to_string(p.pp)
                    + "); use schedule \"1f1b\" or raise pp");
        const std::int64_t chunks = vShaped(p.schedule) ? 2 : 1;
        if (p.vpp != chunks)
            d.error("parallel.vpp",
                name
                    + (chunks == 2 ? " holds two model chunks per pipeline rank in a V"
                                   : " holds one model chunk per rank")
                    + "; set vpp to " + to_string(chunks) + " (here vpp=" + to_string(p.vpp) + ")");
        else if (chunks == 2 && fine({ "model" }) && m.layers % l.virtualStages() != 0 && p.stages.empty())
            d.error("parallel.vpp",
                name + " needs model.layers=" + to_string(m.layers) + " divisible by 2·pp = "
                    + to_string(l.virtualStages()) + ", or uneven parallel.stages (2·pp entries)");
        if (p.schedule == ScheduleKind::DualPipe
            && fine({ "parallel.dp", "parallel.micro_batch", "parallel.global_batch" })
            && p.globalBatch % (p.microBatch * p.dp) == 0 && p.microBatches() < 2 * p.pp)
            d.error("parallel.global_batch",
                name + " needs at least 2·pp = " + to_string(2 * p.pp) + " micro-batches per step (here "
                    + to_string(p.microBatches()) + "); use global_batch at least "
                    + to_string(2 * p.pp * p.microBatch * p.dp));
    }

    void fp8()
    {
        if (l.fp8 == Fp8Recipe::None || !fine({ "fp8", "precision", "cluster" }))
            return;
        if (l.precision == Precision::Fp32)
            d.error("fp8",
                "fp8=\"" + std::string(toString(l.fp8))
                    + "\" runs the linear layers in FP8 beside 16-bit training, but precision is fp32; set precision "
                      "to bf16");
        else if (l.cluster.device.fp8PeakTflops(l.fp8) <= 0)
            d.error("fp8",
                "fp8=\"" + std::string(toString(l.fp8)) + "\" needs FP8 tensor cores, but " + l.cluster.device.name
                    + " has no peak_tflops." + (l.fp8 == Fp8Recipe::Mxfp8 ? "mxfp8" : "fp8")
                    + " in its profile; choose a device that has it (H100 and later; mxfp8: Blackwell) or remove fp8");
    }

    void memoryAndComm()
    {
        if (fine({ "memory.zero", "parallel.dp" }) && l.memory.zero >= 1 && p.dp * p.cp == 1)
            d.warning("memory.zero",
                "memory.zero=" + to_string(l.memory.zero) + " shards "
                    + (l.memory.zero == 1        ? "optimizer state"
                            : l.memory.zero == 2 ? "optimizer state and gradients"
                                                 : "optimizer state, gradients and parameters")
                    + " across the DP group, but dp=1, so it saves nothing");
        if (fine({ "parallel.sp", "parallel.tp" }) && p.sp && p.tp == 1)
            d.warning("parallel.sp",
                "parallel.sp=true splits the norm and dropout activations along the sequence over the tp ranks, "
                "but tp=1, so it changes nothing");
        if (fine({ "parallel.sp", "parallel.tp", "model" }) && p.sp && p.tp > 1 && m.seqLen % p.tp != 0)
            d.error("parallel.sp",
                "parallel.sp=true gives each tp rank seq_len/tp positions of every sequence, but tp=" + to_string(p.tp)
                    + " does not divide model.seq_len=" + to_string(m.seqLen)
                    + "; choose a tp that divides it or set sp to false");
        else if (fine({ "parallel.sp", "parallel.tp", "parallel.cp", "model" }) && p.sp && p.tp > 1 && p.cp > 1
            && m.seqLen % (p.cp * p.tp) != 0)
            d.error("parallel.sp",
                "parallel.sp=true with parallel.cp=" + to_string(p.cp)
                    + " gives each tp rank seq_len/(cp·tp) positions, but " + "cp·tp=" + to_string(p.cp * p.tp)
                    + " does not divide model.seq_len=" + to_string(m.seqLen)
                    + "; choose tp and cp whose product divides it, or set sp to false");
        if (fine({ "comm.dp_codec", "parallel.dp" }) && l.comm.dpCodec.kind != Codec::Kind::None && p.dp * p.cp == 1)
            d.warning("comm.dp_codec",
                "comm.dp_codec=\"" + l.comm.dpCodec.toString()
                    + "\" compresses the data-parallel all-reduce, but dp=1, so there is none");
        const bool sparseAdam = l.comm.dpCodec.kind == Codec::Kind::TopK && l.comm.errorFeedback && p.dp * p.cp > 1;
        if (fine({ "comm.dp_codec", "comm.error_feedback", "comm.codec_warmup", "parallel.dp" }) && sparseAdam
            && l.comm.codecWarmup == 0)
            d.error("comm.codec_warmup",
                "comm.codec_warmup=0 with comm.dp_codec=\"" + l.comm.dpCodec.toString()
                    + "\" and error_feedback leaves no uncompressed AdamW steps to freeze the variance from; "
                      "use at least 1 (1-bit Adam uses 15-25% of the run), or leave the field out for a tenth of the "
                      "run");
        staleness(sparseAdam);
        shardedGradients();
        if (fine({ "comm.allreduce", "nodes" }) && l.comm.allreduce == AllreduceAlgorithm::Hierarchical && l.nodes == 1)
            d.warning("comm.allreduce",
                "comm.allreduce=\"hierarchical\" splits the all-reduce into in-node and "
                "across-node steps, but the layout has one node, so it acts as a ring");
        if (fine({ "comm.allreduce", "nodes", "comm.backend" }) && l.comm.allreduce == AllreduceAlgorithm::SharedMemory
            && (l.nodes > 1 || l.comm.backend == CommBackend::Nccl))
            d.warning("comm.allreduce",
                std::string("comm.allreduce=\"shm\" reduces through a shared-memory segment of one machine's host "
                            "memory, but ")
                    + (l.comm.backend == CommBackend::Nccl ? "NCCL's buffers are on the GPU"
                                                           : "the layout spans " + std::to_string(l.nodes) + " nodes")
                    + ": a group that cannot share one runs the ring");
        if (fine({ "comm.backend", "cluster" }) && l.comm.backend == CommBackend::Nccl && !l.onGpuCluster())
            d.error("comm.backend",
                "comm.backend=\"nccl\" needs a GPU cluster, but cluster " + l.cluster.name
                    + "'s devices are not GPUs (its intra_node link is \""
                    + std::string(toString(l.cluster.intraNode.kind))
                    + "\", not nvlink or pcie); use \"mpi\" or \"gloo\" on CPU clusters");
        if (fine({ "nodes", "cluster" }) && !l.cluster.hosts.empty()
            && static_cast<std::int64_t>(l.cluster.hosts.size()) < l.nodes)
            d.warning("nodes",
                "nodes=" + to_string(l.nodes) + " but cluster " + l.cluster.name + " lists "
                    + to_string(l.cluster.hosts.size()) + " host(s); add hosts before launching");
    }

    void staleness(bool sparseAdam)
    {
        if (l.comm.staleness == 0 || !fine({ "comm.staleness", "parallel.dp" }))
            return;
        if (p.dp * p.cp == 1)
            d.warning("comm.staleness",
                "comm.staleness=1 delays each gradient by one step to hide the data-parallel all-reduce, but "
                "dp=1, so there is none to hide and the delay only slows convergence; use staleness 0");
        if (sparseAdam && fine({ "comm.dp_codec", "comm.error_feedback" }))
            d.error("comm.staleness",
                "comm.staleness=1 cannot be combined with comm.dp_codec=\"" + l.comm.dpCodec.toString()
                    + "\" and error_feedback: top-k's sparse AdamW exchanges the update inside the optimizer step, "
                      "so there is no gradient all-reduce to delay; use staleness 0, or error_feedback false");
    }

    // ZeRO-2/3 reduce-scatter the gradients (the engine's ShardedParams): the codecs and the delayed
    // all-reduce act on an all-reduce of whole gradients, which these stages do not run.
    void shardedGradients()
    {
        if (l.memory.zero < 2 || p.dp * p.cp < 2 || !fine({ "memory.zero", "parallel.dp" }))
            return;
        if (fine({ "comm.dp_codec" }) && l.comm.dpCodec.kind != Codec::Kind::None)
            d.error("comm.dp_codec",
                "comm.dp_codec=\"" + l.comm.dpCodec.toString() + "\" compresses the data-parallel all-reduce, but "
                    + "memory.zero=" + to_string(l.memory.zero)
                    + " reduce-scatters the gradients instead; use dp_codec \"none\", or memory.zero 1");
        if (fine({ "comm.staleness" }) && l.comm.staleness > 0)
            d.error("comm.staleness",
                "comm.staleness=" + to_string(l.comm.staleness) + " delays the gradient all-reduce by a step, but "
                    + "memory.zero=" + to_string(l.memory.zero)
                    + " reduce-scatters each block's gradient during backward; use staleness 0, or memory.zero 1");
    }

    void placement()
    {
        if (!fine({ "parallel.tp", "parallel.pp", "parallel.dp", "parallel.cp", "cluster", "nodes" })
            || d.hasErrorAt("parallel"))
            return;
        for (const auto& note : RankGrid::forLayout(l).placementNotes())
            d.warning(note.rfind("a CP group", 0) == 0 ? "parallel.cp" : "parallel.tp", note);
    }

    // The planner's limit, as a rule: predict, simulate and search refuse what this refuses, and nothing else.
    void replayable()
    {
        if (d.hasErrors() || !fine({ "parallel.global_batch", "parallel.micro_batch", "parallel.dp" })
            || simulatable(l))
            return;
        d.error("parallel.micro_batch",
            to_string(p.microBatches()) + " micro-batches per step on " + to_string(p.pp) + " pipeline stages"
                + (p.vpp > 1 ? " of " + to_string(p.vpp) + " chunks" : std::string()) + " make " + replayLimitText()
                + "; use a larger micro_batch or a smaller global_batch");
    }

    void memoryFit()
    {
        if (known.hasErrors() || d.hasErrors() || !simulatable(l))
            return; // the planner needs a valid layout of a size it can replay
        warnIfItDoesNotFit(l, predict(l, false), d);
    }

    const Layout& l;
    const ParallelSpec& p;
    const ModelSpec& m;
    const Diagnostics& known;
    Diagnostics& d;

public:
    bool checkMemory = true;
};

} // namespace

std::vector<std::int64_t> validTensorParallelDegrees(const ModelSpec& model)
{
    std::int64_t g = std::gcd(model.heads, model.ffnHidden);
    g = std::gcd(g, model.paddedVocab());
    if (model.kvHeads > 0)
        g = std::gcd(g, model.kvHeads);
    return g > 0 ? text::divisors(g) : std::vector<std::int64_t> { 1 };
}

Diagnostics validateLayout(const Layout& layout, const Diagnostics& alreadyReported)
{
    Diagnostics out;
    Rules(layout, alreadyReported, out).run();
    return out;
}

// What may still lower the memory: only the choices the layout has not made already (advising recompute
// when recompute is already full sent users in circles).
static std::string fitAdvice(const Layout& l)
{
    std::vector<std::string> ways { "raise tp or pp" };
    const int zero = l.memory.zero;
    if (l.parallel.dp > 1 && zero < 3)
        ways.push_back("raise memory.zero (now " + std::to_string(zero) + ") to shard more of the model state");
    else if (l.parallel.dp == 1 && zero < 3)
        ways.push_back("use memory.zero " + std::to_string(std::max(1, zero)) + " with dp > 1");
    if (l.memory.recompute != Recompute::Full)
        ways.push_back("recompute activations (memory.recompute full)");
    std::string out;
    for (std::size_t i = 0; i < ways.size(); ++i)
        out += (i == 0 ? "" : i + 1 == ways.size() ? ", or " : ", ") + ways[i];
    return out;
}

void warnIfItDoesNotFit(const Layout& l, const Prediction& prediction, Diagnostics& d)
{
    if (prediction.fits)
        return;
    const auto& mem = prediction.memory;
    auto gb = [](double x) { return text::number(std::round(x * 10) / 10); };
    d.warning("memory",
        "the layout needs about " + gb(mem.total()) + " GB per device (parameters " + gb(mem.params) + ", gradients "
            + gb(mem.grads) + ", optimizer " + gb(mem.optimizer) + ", activations " + gb(mem.activations) + ", reserve "
            + gb(mem.reserve) + ") but " + l.cluster.device.name + " has " + gb(prediction.memoryCapacityGB) + " GB; "
            + fitAdvice(l));
}

Diagnostics validateRules(const Layout& layout)
{
    Diagnostics out;
    const Diagnostics none;
    Rules rules(layout, none, out);
    rules.checkMemory = false;
    rules.run();
    return out;
}

} // namespace loom::plan
