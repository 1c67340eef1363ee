// Megatron-LM: the arguments of pretrain_gpt.py (megatron/training/arguments.py) in a launch script.
#include "engine/bridges/ExportDetail.h"

#include <cmath>
#include <cstdlib>

namespace loom::plan::exporting {

namespace {

// Megatron-DeepSpeed's arguments.py predates Megatron-LM's renames: its own names for the norm, rotary
// positions, grouped-query attention and the MoE settings.
void deepSpeedModelArgs(const ModelSpec& m, std::int64_t ep, std::vector<Arg>& a, ExportResult& result)
{
    if (m.effectiveKvHeads() != m.heads)
        a.push_back({ "--num-key-value-heads", std::to_string(m.effectiveKvHeads()) });
    if (m.norm == ModelSpec::Norm::RmsNorm)
        a.push_back({ "--normalization", "rmsnorm" });
    if (m.position == ModelSpec::Position::Rope)
        a.push_back({ "--use-rotary-position-embeddings", "" });
    if (!m.isMoe())
        return;
    a.push_back({ "--num-experts", std::to_string(m.experts) });
    a.push_back({ "--topk", std::to_string(m.effectiveTopK()) });
    a.push_back({ "--moe-loss-coeff", number(m.auxLossCoeff) });
    a.push_back({ "--expert-interval", std::to_string(m.moeLayerFreq) }); // its default is 2
    if (m.moeLayerFreq > 1)
        result.notes.push_back("model.moe_layer_freq " + std::to_string(m.moeLayerFreq)
            + ": Megatron-DeepSpeed puts the experts in layers " + std::to_string(m.moeLayerFreq) + ", "
            + std::to_string(2 * m.moeLayerFreq) + ", ... (counting from 1), Loom in layers 1, "
            + std::to_string(m.moeLayerFreq + 1) + ", ...; as many MoE layers when the layer count is a multiple");
    if (m.capacityFactor > 0)
        a.push_back({ "--moe-train-capacity-factor", number(m.capacityFactor) });
    else
        a.push_back({ "--disable-moe-token-dropping", "" });
    if (ep > 1)
        a.push_back({ "--moe-expert-parallel-size", std::to_string(ep) });
    if (m.expertFfn() != m.ffnHidden)
        result.refusals.push_back("model.moe_ffn_hidden " + std::to_string(m.expertFfn())
            + ": Megatron-DeepSpeed's experts have the dense FFN's width (--ffn-hidden-size "
            + std::to_string(m.ffnHidden) + "); use Megatron-LM (--moe-ffn-hidden-size)");
}

void megatronMoeArgs(const ModelSpec& m, std::vector<Arg>& a)
{
    a.push_back({ "--num-experts", std::to_string(m.experts) });
    a.push_back({ "--moe-router-topk", std::to_string(m.effectiveTopK()) });
    // TransformerConfig: a softmax over one chosen expert has no gradient, so top-1 routing needs the
    // softmax before the top-k.
    if (m.effectiveTopK() == 1)
        a.push_back({ "--moe-router-pre-softmax", "" });
    a.push_back({ "--moe-ffn-hidden-size", std::to_string(m.expertFfn()) });
    a.push_back({ "--moe-aux-loss-coeff", number(m.auxLossCoeff) });
    if (m.moeLayerFreq != 1)
        a.push_back({ "--moe-layer-freq", std::to_string(m.moeLayerFreq) });
    if (m.capacityFactor > 0)
        a.push_back({ "--moe-expert-capacity-factor", number(m.capacityFactor) });
}

// memory.attention: Megatron-LM's "unfused" backend keeps the softmax output as Loom's "materialized" does;
// its default (auto) picks a flash or fused kernel that does not. Megatron-DeepSpeed's default attention keeps
// it, its --use-flash-attn-v2 does not.
void attentionArgs(Attention attention, std::int64_t cp, std::vector<Arg>& a, ExportResult& result, bool forDeepSpeed)
{
    if (attention == Attention::Materialized && !forDeepSpeed && cp > 1)
        result.notes.push_back("memory.attention \"materialized\": Megatron-LM's context parallelism runs only in "
                               "Transformer Engine's flash or fused attention, which never keep the s x s scores; "
                               "it holds less than Loom's estimate");
    else if (attention == Attention::Materialized && !forDeepSpeed)
        a.push_back({ "--attention-backend", "unfused" });
    else if (attention == Attention::Flash && forDeepSpeed)
        a.push_back({ "--use-flash-attn-v2", "" });
}

void modelArgs(const ModelSpec& m, const ParallelSpec& p, Attention attention, std::vector<Arg>& a,
    ExportResult& result, bool forDeepSpeed)
{
    a.push_back({ "--num-layers", std::to_string(m.layers) });
    a.push_back({ "--hidden-size", std::to_string(m.hidden) });
    a.push_back({ "--ffn-hidden-size", std::to_string(m.ffnHidden) });
    a.push_back({ "--num-attention-heads", std::to_string(m.heads) });
    if (!forDeepSpeed && m.effectiveKvHeads() != m.heads) {
        a.push_back({ "--group-query-attention", "" });
        a.push_back({ "--num-query-groups", std::to_string(m.effectiveKvHeads()) });
    }
    a.push_back({ "--seq-length", std::to_string(m.seqLen) });
    a.push_back({ "--max-position-embeddings", std::to_string(m.seqLen) });
    if (m.mlp == ModelSpec::Mlp::SwiGlu)
        a.push_back({ "--swiglu", "" });
    if (forDeepSpeed) {
        deepSpeedModelArgs(m, p.ep, a, result);
    } else {
        if (m.norm == ModelSpec::Norm::RmsNorm)
            a.push_back({ "--normalization", "RMSNorm" });
        if (m.position == ModelSpec::Position::Rope)
            a.push_back({ "--position-embedding-type", "rope" });
    }
    if (!m.bias)
        a.push_back({ "--disable-bias-linear", "" });
    attentionArgs(attention, p.cp, a, result, forDeepSpeed);
    if (!m.tieEmbeddings)
        a.push_back({ "--untie-embeddings-and-output-weights", "" });
    if (m.isMoe() && !forDeepSpeed)
        megatronMoeArgs(m, a);
    a.push_back({ "--vocab-size", std::to_string(m.vocab) });
    a.push_back({ "--make-vocab-size-divisible-by", std::to_string(m.vocabPadMultiple) });
    const std::int64_t multiple = m.vocabPadMultiple * p.tp;
    const std::int64_t padded = (m.vocab + multiple - 1) / multiple * multiple;
    if (padded != m.paddedVocab())
        result.notes.push_back(std::string("vocabulary: ") + (forDeepSpeed ? "Megatron-DeepSpeed" : "Megatron-LM")
            + " pads " + std::to_string(m.vocab) + " to " + std::to_string(padded) + " (a multiple of "
            + std::to_string(m.vocabPadMultiple) + " x tp), Loom to " + std::to_string(m.paddedVocab()));
}

// The stages with the arguments every supported Megatron-LM release has: even stages, the first and the
// last stage's own counts, or the embedding and the loss counted as layers. Refusals go into `result`.
void classicStageArgs(const Layout& l, std::vector<Arg>& a, ExportResult& result, bool forDeepSpeed)
{
    const auto& p = l.parallel;
    std::int64_t first = 0, last = 0;
    const bool expressible = megatronStages(l, first, last);
    bool embeddingUnit = false, lossUnit = false;
    const auto ranges = l.stageRanges();
    const bool emptyEnd = !ranges.empty() && (ranges.front().empty() || ranges.back().empty());
    const bool accounted = !forDeepSpeed && megatronAccountedStages(l, embeddingUnit, lossUnit)
        && (p.vpp > 1 || !expressible || emptyEnd);
    if (accounted) {
        if (embeddingUnit)
            a.push_back({ "--account-for-embedding-in-pipeline-split", "" });
        if (lossUnit)
            a.push_back({ "--account-for-loss-in-pipeline-split", "" });
    }
    if (p.vpp > 1) {
        if (forDeepSpeed)
            result.refusals.push_back("parallel.vpp " + std::to_string(p.vpp)
                + ": DeepSpeed's pipeline engine has no interleaved (virtual-stage) schedule; use vpp 1 and \"1f1b\"");
        else if (accounted)
            a.push_back({ "--num-virtual-stages-per-pipeline-rank", std::to_string(p.vpp) });
        else if (!expressible || first != 0)
            result.refusals.push_back("parallel.stages: with vpp " + std::to_string(p.vpp)
                + " Megatron-LM needs the same number of layers in every virtual stage "
                  "(--num-layers-per-virtual-pipeline-stage), counting the embedding and the loss as one layer "
                  "each at most (--account-for-embedding-in-pipeline-split); use such a split");
        else
            a.push_back(
                { "--num-layers-per-virtual-pipeline-stage", std::to_string(l.model.layers / l.virtualStages()) });
        if (p.microbatchGroup > 0 && p.schedule == ScheduleKind::Interleaved) {
            if (forDeepSpeed)
                result.refusals.push_back("parallel.microbatch_group " + std::to_string(p.microbatchGroup)
                    + ": DeepSpeed's pipeline engine has no interleaved schedule whose micro-batch groups it could "
                      "set; remove microbatch_group");
            else
                a.push_back(
                    { "--microbatch-group-size-per-virtual-pipeline-stage", std::to_string(p.microbatchGroup) });
        }
    } else if (!expressible && !accounted) {
        result.refusals.push_back(std::string("parallel.stages: ")
            + (forDeepSpeed ? "Megatron-DeepSpeed balances transformer layers evenly over the stages"
                            : "Megatron-LM can give the first and last stage their own layer counts, but all "
                              "other stages must hold the same number")
            + "; this layout's stages cannot be expressed");
    } else if (emptyEnd && !accounted) {
        result.refusals.push_back(
            "parallel.stages: a pipeline stage without layers needs Megatron-LM's "
            "--account-for-embedding-in-pipeline-split; this layout's stages cannot be expressed");
    } else if (first != 0 && !accounted) {
        if (forDeepSpeed)
            result.refusals.push_back("parallel.stages: Megatron-DeepSpeed balances transformer layers evenly over "
                                      "the stages; this layout's first and last stages differ");
        a.push_back({ "--decoder-first-pipeline-num-layers", std::to_string(first) });
        a.push_back({ "--decoder-last-pipeline-num-layers", std::to_string(last) });
    }
}

void parallelArgs(const Layout& l, std::vector<Arg>& a, ExportResult& result, bool forDeepSpeed, int minor)
{
    const auto& p = l.parallel;
    a.push_back({ "--tensor-model-parallel-size", std::to_string(p.tp) });
    a.push_back({ "--pipeline-model-parallel-size", std::to_string(p.pp) });
    if (l.model.isMoe() && !forDeepSpeed) {
        // Without parallel.expert_tp: expert groups inside the DP group, experts whole on each TP rank, as Loom
        // plans them; Megatron's expert TP defaults to tp, and its MoE biases need expert TP 1 even without
        // expert parallelism. With it: Megatron-Core's expert grid as written.
        if (p.ep > 1)
            a.push_back({ "--expert-model-parallel-size", std::to_string(p.ep) });
        a.push_back({ "--expert-tensor-parallel-size", std::to_string(p.expertTp > 0 ? p.expertTp : 1) });
    }
    if (l.model.isMoe() && forDeepSpeed && p.expertTp > 0 && (p.expertTp != 1 || p.dp % p.ep != 0))
        result.refusals.push_back("parallel.expert_tp " + std::to_string(p.expertTp)
            + ": Megatron-DeepSpeed carves expert groups out of the data-parallel group with the experts whole "
              "(--moe-expert-parallel-size); Megatron-Core's expert grid needs Megatron-LM");
    // Megatron's MoE layer refuses to train with tp > 1 without sequence parallelism (moe_layer.py).
    const bool moeNeedsSp = !forDeepSpeed && l.model.isMoe() && p.tp > 1 && !p.sp;
    if (moeNeedsSp)
        result.notes.push_back("parallel.sp false: Megatron-LM's MoE layers train with tp > 1 only with sequence "
                               "parallelism, so the export turns it on (--sequence-parallel); its norms then hold "
                               "1/tp of the activations Loom's estimate counts");
    if ((p.sp || moeNeedsSp) && p.tp > 1)
        a.push_back({ "--sequence-parallel", "" });
    if (p.cp > 1 && forDeepSpeed)
        result.refusals.push_back("parallel.cp " + std::to_string(p.cp)
            + ": Megatron-DeepSpeed has no ring-attention context parallelism (its sequence parallelism splits "
              "heads, not the sequence); use Megatron-LM");
    else if (p.cp > 1)
        a.push_back({ "--context-parallel-size", std::to_string(p.cp) }); // ring attention, load-balanced split
    if (p.cp > 1)
        result.notes.push_back(
            "data parallelism is implied: dp = processes / (tp x cp x pp) = " + std::to_string(p.dp));
    else
        result.notes.push_back("data parallelism is implied: dp = processes / (tp x pp) = " + std::to_string(p.dp));
    if (p.pp > 1 && p.schedule == ScheduleKind::GPipe)
        result.refusals.push_back(std::string("parallel.schedule \"gpipe\": ")
            + (forDeepSpeed ? "DeepSpeed's pipeline engine" : "Megatron-LM") + " runs only 1F1B"
            + (forDeepSpeed ? "" : " or interleaved 1F1B") + " pipelines; choose \"1f1b\"");
    if (p.pp > 1 && splitsBackward(p.schedule))
        result.refusals.push_back("parallel.schedule \"" + std::string(toString(p.schedule))
            + "\": " + (forDeepSpeed ? "DeepSpeed's pipeline engine" : "Megatron-LM")
            + " has no zero-bubble schedule (no split of the backward into input and weight gradients); choose "
              "\"1f1b\""
            + (forDeepSpeed ? "" : " or \"interleaved\"") + ", or export zb-v to torchtitan");
    ExportResult stages;
    std::vector<Arg> stageArgs;
    classicStageArgs(l, stageArgs, stages, forDeepSpeed);
    if (!forDeepSpeed && !stages.refusals.empty() && minor >= 13) {
        // Any split, interleaved or not, in Megatron-LM's own words (core_v0.13 and later).
        a.push_back({ "--pipeline-model-parallel-layout", megatronLayoutString(l) });
        if (p.vpp > 1 && p.microbatchGroup > 0 && p.schedule == ScheduleKind::Interleaved)
            a.push_back({ "--microbatch-group-size-per-virtual-pipeline-stage", std::to_string(p.microbatchGroup) });
    } else {
        a.insert(a.end(), stageArgs.begin(), stageArgs.end());
        for (auto& r : stages.refusals)
            result.refusals.push_back(forDeepSpeed || p.pp == 1 ? r
                                                                : r
                        + " before core_v0.13; --framework-version core_v0.13 "
                          "or later writes it as --pipeline-model-parallel-layout");
    }
    if (p.pp > 1 && p.dp > 1 && p.order == RankOrder::TpPpDp) {
        if (forDeepSpeed)
            result.notes.push_back(
                "rank order: DeepSpeed places ranks tp fastest, then dp, then pp (tp-dp-pp); "
                "the layout's tp-pp-dp placement becomes tp-dp-pp (same groups' sizes, other links)");
        else
            a.push_back({ "--use-tp-pp-dp-mapping", "" });
    }
    if (forDeepSpeed && p.pp == 1)
        a.push_back({ "--no-pipeline-parallel", "" });
    a.push_back({ "--micro-batch-size", std::to_string(p.microBatch) });
    a.push_back({ "--global-batch-size", std::to_string(p.globalBatch) });
}

// memory.efficient_norm: Megatron-LM's TransformerConfig has memory_efficient_layer_norm (apex's fused
// LayerNorm keeping its output), but its command line never sets it; no Megatron norm is told to drop its input.
void efficientNormNote(const std::string& target, ExportResult& result)
{
    result.notes.push_back("memory.efficient_norm: " + target
        + " has no command-line setting for it; its norms keep their inputs, 4·s·b·h bytes a layer (/t with sp) "
          "more than Loom's estimate");
}

// ZeRO-2/3 as Megatron's own FSDP: --use-custom-fsdp (core_v0.12-0.13, with the distributed optimizer and
// without gradient-accumulation fusion), --use-megatron-fsdp with its fsdp_dtensor checkpoints from 0.14.
void fsdpArgs(int zero, int minor, std::vector<Arg>& a)
{
    if (minor <= 13) {
        a.push_back({ "--use-custom-fsdp", "" });
        a.push_back({ "--use-distributed-optimizer", "" });
        a.push_back({ "--no-gradient-accumulation-fusion", "" });
    } else {
        a.push_back({ "--use-megatron-fsdp", "" });
        a.push_back({ "--ckpt-format", "fsdp_dtensor" });
    }
    a.push_back({ "--data-parallel-sharding-strategy", zero == 2 ? "optim_grads" : "optim_grads_params" });
}

void memoryArgs(const Layout& l, std::vector<Arg>& a, ExportResult& result, bool forDeepSpeed, int minor)
{
    if (l.precision == Precision::Fp16)
        a.push_back({ "--fp16", "" });
    else if (l.precision == Precision::Bf16)
        a.push_back({ "--bf16", "" });
    switch (l.memory.recompute) {
    case Recompute::None:
        break;
    case Recompute::Selective:
        a.push_back({ "--recompute-granularity", "selective" });
        break;
    case Recompute::Full:
        a.push_back({ "--recompute-granularity", "full" });
        a.push_back({ "--recompute-method", "uniform" });
        a.push_back({ "--recompute-num-layers", "1" });
        if (forDeepSpeed)
            a.push_back({ "--deepspeed-activation-checkpointing", "" });
        break;
    }
    if (l.memory.efficientNorm)
        efficientNormNote(forDeepSpeed ? "Megatron-DeepSpeed" : "Megatron-LM", result);
    if (forDeepSpeed) {
        a.push_back({ "--zero-stage", std::to_string(l.memory.zero) });
        return;
    }
    switch (l.memory.zero) {
    case 0:
        break;
    case 1:
        a.push_back({ "--use-distributed-optimizer", "" });
        break;
    case 2:
    case 3:
        fsdpArgs(l.memory.zero, minor, a);
        break;
    default:
        result.refusals.push_back("memory.zero " + std::to_string(l.memory.zero) + ": Megatron-LM has no such stage");
    }
}

void commArgs(const Layout& l, std::vector<Arg>& a)
{
    if (l.comm.overlap)
        a.push_back({ "--overlap-grad-reduce", "" });
    // Megatron counts its bucket in gradient elements; its gradient buffer holds the training precision.
    const double elements = std::round(l.comm.bucketMb * double(1 << 20) / bytesPerElement(l.precision));
    a.push_back({ "--ddp-bucket-size", std::to_string(std::llround(elements)) }); // an int, never 1e+10
}

} // namespace

std::string codecRefusal(const Layout& l, const std::string& target, const std::string& alternative)
{
    return "comm.dp_codec \"" + l.comm.dpCodec.toString() + "\": " + target
        + " all-reduces gradients uncompressed; Loom's gradient codecs have no counterpart there" + alternative;
}

void commonComm(const Layout& l, const std::string& target, ExportResult& result)
{
    if (l.comm.allreduce == AllreduceAlgorithm::Hierarchical)
        result.refusals.push_back("comm.allreduce \"hierarchical\": " + target
            + " uses NCCL's own all-reduce, which has no two-level mode like Loom's; choose \"library\" or \"ring\"");
    if (l.comm.allreduce == AllreduceAlgorithm::SharedMemory)
        result.notes.push_back("comm.allreduce \"shm\": Loom's all-reduce through host shared memory; " + target
            + " all-reduces on the GPUs with NCCL's own algorithm, left to choose");
    if (l.comm.allreduce == AllreduceAlgorithm::Ring)
        result.notes.push_back("comm.allreduce \"ring\": set as NCCL_ALGO=Ring; NCCL chooses its own chunking "
                               "(chunk_kb is Loom's)");
    const auto kind = l.comm.dpCodec.kind;
    if (kind != Codec::Kind::Fp16 && kind != Codec::Kind::Bf16)
        return;
    const std::string codec = l.comm.dpCodec.toString();
    if (l.comm.errorFeedback)
        result.refusals.push_back("comm.error_feedback true: Loom carries each step's " + codec
            + " rounding error into the next step; " + target + " reduces in " + codec
            + " without error feedback; set error_feedback to false");
    if (l.comm.codecWarmup > 0)
        result.refusals.push_back("comm.codec_warmup " + std::to_string(l.comm.codecWarmup) + ": " + target
            + " reduces in " + codec + " from the first step; remove codec_warmup");
}

std::string megatronLayoutString(const Layout& layout)
{
    const auto ranges = layout.stageRanges();
    std::string s;
    for (std::size_t i = 0; i < ranges.size(); ++i) {
        s += i == 0 ? "E" : "|";
        const std::int64_t n = ranges[i].size();
        if (n == 1)
            s += "t";
        else if (n > 1)
            s += "t*" + std::to_string(n);
    }
    return s + "L";
}

void commonNotes(const Layout& l, const std::string& target, ExportResult& result)
{
    if (l.comm.staleness > 0)
        result.notes.push_back("comm.staleness " + std::to_string(l.comm.staleness) + ": Loom applies each step's "
            + "averaged gradient " + std::to_string(l.comm.staleness) + " step(s) late; " + target
            + " has no delayed-gradient mode and applies it in the step it is computed (its losses will differ)");
    if (l.comm.backend && *l.comm.backend != CommBackend::Nccl)
        result.notes.push_back("comm.backend \"" + std::string(l.comm.backend == CommBackend::Mpi ? "mpi" : "gloo")
            + "\": Loom's engine's; " + target + " communicates through NCCL on the GPUs");
}

bool megatronStages(const Layout& layout, std::int64_t& first, std::int64_t& last)
{
    const auto stages = layout.stageRanges();
    first = last = 0;
    bool even = true, innerEven = true;
    for (std::size_t i = 1; i < stages.size(); ++i) {
        even = even && stages[i].size() == stages[0].size();
        if (i + 1 < stages.size())
            innerEven = innerEven && stages[i].size() == stages[1].size();
    }
    if (even)
        return true;
    if (!innerEven || layout.parallel.vpp > 1)
        return false;
    first = stages.front().size();
    last = stages.back().size();
    return true;
}

bool megatronAccountedStages(const Layout& layout, bool& embedding, bool& loss)
{
    const auto stages = layout.stageRanges();
    embedding = loss = false;
    if (stages.size() < 3)
        return false;
    const std::int64_t unit = stages[1].size();
    for (std::size_t i = 1; i + 1 < stages.size(); ++i)
        if (stages[i].size() != unit)
            return false;
    embedding = stages.front().size() == unit - 1;
    loss = stages.back().size() == unit - 1;
    return (embedding || stages.front().size() == unit) && (loss || stages.back().size() == unit)
        && (embedding || loss);
}

int megatronMinor(const std::string& version)
{
    if (version == "main")
        return kMegatronMain;
    return version.starts_with("core_v0.") ? std::atoi(version.c_str() + 8) : 19;
}

std::vector<Arg> megatronArgs(const Layout& layout, ExportResult& result, bool forDeepSpeed, int minor)
{
    std::vector<Arg> a;
    modelArgs(layout.model, layout.parallel, layout.memory.attention, a, result, forDeepSpeed);
    parallelArgs(layout, a, result, forDeepSpeed, minor);
    memoryArgs(layout, a, result, forDeepSpeed, minor);
    megatronOptimizerArgs(layout, a, result, forDeepSpeed, minor);
    if (!forDeepSpeed) {
        commArgs(layout, a);
        if (layout.comm.dpCodec.kind == Codec::Kind::Bf16)
            a.push_back({ "--grad-reduce-in-bf16", "" });
        else if (layout.comm.dpCodec.kind != Codec::Kind::None)
            result.refusals.push_back(codecRefusal(
                layout, "Megatron-LM", " (--grad-reduce-in-bf16 covers \"bf16\"); use \"bf16\" or \"none\""));
        commonComm(layout, "Megatron-LM", result);
    }
    return a;
}

ExportResult exportMegatron(const Layout& layout, const std::string& primaryName, const std::string& version)
{
    ExportResult result;
    const int minor = megatronMinor(version);
    auto args = megatronArgs(layout, result, false, minor);
    commonNotes(layout, "Megatron-LM", result);
    // A runnable default that the caller's own arguments override (argparse keeps the last value).
    args.push_back({ "--tokenizer-type", "NullTokenizer" });
    args.push_back({ "--train-iters", "100" });
    if (!layout.optimizer.lr)
        args.push_back({ "--lr", "1.0e-4" });
    const auto& p = layout.parallel;
    std::string preamble = "# For Megatron-LM " + version
        + " (written with the flags of its arguments.py; --framework-version picks another release).\n"
          "# Data, tokenizer and optimizer: arguments given to this script are appended and win,\n"
          "# e.g. --data-path DATA --tokenizer-type GPT2BPETokenizer --vocab-file V --merge-file M\n"
          "MEGATRON_LM=${MEGATRON_LM:-.}  # a Megatron-LM checkout\n";
    if (layout.memory.zero >= 2)
        preamble += "unset CUDA_DEVICE_MAX_CONNECTIONS  # Megatron's FSDP refuses 1\n";
    else if (p.tp > 1 || p.cp > 1)
        preamble
            += "export CUDA_DEVICE_MAX_CONNECTIONS=1  # Megatron-LM requires it with tp or cp > 1 (before Blackwell)\n";
    // Megatron-LM refuses two data sources: mock data only when the arguments name none.
    const std::string afterArgs = "for arg in \"$@\"; do\n"
                                  "    case $arg in --data-path | --train-data-path | --valid-data-path | "
                                  "--test-data-path | --data-args-path | --per-split-data-args-path | --mock-data) "
                                  "DATA_GIVEN=1 ;; esac\n"
                                  "done\n"
                                  "[[ -n ${DATA_GIVEN:-} ]] || ARGS+=(--mock-data)\n";
    result.files.push_back(launchScript(layout, ExportTarget::Megatron, "\"$MEGATRON_LM/pretrain_gpt.py\"", args,
        preamble, result, primaryName.empty() ? layout.name + ".megatron.sh" : primaryName, afterArgs));
    return result;
}

} // namespace loom::plan::exporting
