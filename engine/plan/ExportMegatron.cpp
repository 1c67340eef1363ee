// Megatron-LM: the arguments of pretrain_gpt.py (megatron/training/arguments.py) in a launch script.
#include "engine/plan/ExportDetail.h"

#include <cmath>

namespace loom::plan::exporting {

namespace {

void modelArgs(const ModelSpec& m, std::int64_t tp, std::vector<Arg>& a, ExportResult& result)
{
    a.push_back({ "--num-layers", std::to_string(m.layers) });
    a.push_back({ "--hidden-size", std::to_string(m.hidden) });
    a.push_back({ "--ffn-hidden-size", std::to_string(m.ffnHidden) });
    a.push_back({ "--num-attention-heads", std::to_string(m.heads) });
    if (m.effectiveKvHeads() != m.heads) {
        a.push_back({ "--group-query-attention", "" });
        a.push_back({ "--num-query-groups", std::to_string(m.effectiveKvHeads()) });
    }
    a.push_back({ "--seq-length", std::to_string(m.seqLen) });
    a.push_back({ "--max-position-embeddings", std::to_string(m.seqLen) });
    if (m.mlp == ModelSpec::Mlp::SwiGlu)
        a.push_back({ "--swiglu", "" });
    if (m.norm == ModelSpec::Norm::RmsNorm)
        a.push_back({ "--normalization", "RMSNorm" });
    if (m.position == ModelSpec::Position::Rope)
        a.push_back({ "--position-embedding-type", "rope" });
    if (!m.bias)
        a.push_back({ "--disable-bias-linear", "" });
    if (!m.tieEmbeddings)
        a.push_back({ "--untie-embeddings-and-output-weights", "" });
    if (m.isMoe()) { // Megatron-Core's MoE arguments
        a.push_back({ "--num-experts", std::to_string(m.experts) });
        a.push_back({ "--moe-router-topk", std::to_string(m.effectiveTopK()) });
        a.push_back({ "--moe-ffn-hidden-size", std::to_string(m.expertFfn()) });
        a.push_back({ "--moe-aux-loss-coeff", std::to_string(m.auxLossCoeff) });
        if (m.moeLayerFreq != 1)
            a.push_back({ "--moe-layer-freq", std::to_string(m.moeLayerFreq) });
        if (m.capacityFactor > 0)
            a.push_back({ "--moe-expert-capacity-factor", std::to_string(m.capacityFactor) });
    }
    a.push_back({ "--vocab-size", std::to_string(m.vocab) });
    a.push_back({ "--make-vocab-size-divisible-by", std::to_string(m.vocabPadMultiple) });
    const std::int64_t multiple = m.vocabPadMultiple * tp;
    const std::int64_t padded = (m.vocab + multiple - 1) / multiple * multiple;
    if (padded != m.paddedVocab())
        result.notes.push_back("vocabulary: Megatron-LM pads " + std::to_string(m.vocab) + " to "
            + std::to_string(padded) + " (a multiple of " + std::to_string(m.vocabPadMultiple) + " x tp), Loom to "
            + std::to_string(m.paddedVocab()));
}

void parallelArgs(const Layout& l, std::vector<Arg>& a, ExportResult& result, bool forDeepSpeed)
{
    const auto& p = l.parallel;
    a.push_back({ "--tensor-model-parallel-size", std::to_string(p.tp) });
    a.push_back({ "--pipeline-model-parallel-size", std::to_string(p.pp) });
    if (p.ep > 1) { // expert groups inside the DP group, experts whole on each TP rank, as Loom plans them
        a.push_back({ "--expert-model-parallel-size", std::to_string(p.ep) });
        a.push_back({ "--expert-tensor-parallel-size", "1" });
    }
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

// memory.efficient_norm: Megatron-LM's flag asks apex's fused LayerNorm of the local transformer layers to
// keep its output; its RMSNorm and Transformer Engine's norms keep their inputs whatever the flag says.
void efficientNormArgs(const Layout& l, std::vector<Arg>& a, ExportResult& result)
{
    a.push_back({ "--memory-efficient-layer-norm", "" });
    if (l.model.norm == ModelSpec::Norm::LayerNorm) {
        a.push_back({ "--transformer-impl", "local" });
        return;
    }
    result.notes.push_back("memory.efficient_norm: Megatron-LM honours --memory-efficient-layer-norm only for "
                           "apex's LayerNorm; its RMSNorm keeps each norm's input, 4·s·b·h bytes a layer (/t with "
                           "sp) more than Loom's estimate");
}

void memoryArgs(const Layout& l, std::vector<Arg>& a, ExportResult& result, bool forDeepSpeed)
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
    if (l.memory.efficientNorm && forDeepSpeed)
        result.notes.push_back("memory.efficient_norm: Megatron-DeepSpeed's norms keep their inputs, 4·s·b·h bytes "
                               "a layer (/t with sp) more than Loom's estimate");
    else if (l.memory.efficientNorm)
        efficientNormArgs(l, a, result);
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
        a.push_back({ "--use-custom-fsdp", "" });
        a.push_back({ "--data-parallel-sharding-strategy", "optim_grads" });
        break;
    case 3:
        a.push_back({ "--use-custom-fsdp", "" });
        a.push_back({ "--data-parallel-sharding-strategy", "optim_grads_params" });
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
    a.push_back({ "--ddp-bucket-size", number(elements) });
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

std::vector<Arg> megatronArgs(const Layout& layout, ExportResult& result, bool forDeepSpeed)
{
    std::vector<Arg> a;
    modelArgs(layout.model, layout.parallel.tp, a, result);
    parallelArgs(layout, a, result, forDeepSpeed);
    memoryArgs(layout, a, result, forDeepSpeed);
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

ExportResult exportMegatron(const Layout& layout, const std::string& primaryName)
{
    ExportResult result;
    auto args = megatronArgs(layout, result, false);
    // A runnable default that the caller's own arguments override (argparse keeps the last value).
    args.push_back({ "--tokenizer-type", "NullTokenizer" });
    args.push_back({ "--mock-data", "" });
    args.push_back({ "--train-iters", "100" });
    args.push_back({ "--lr", "1.0e-4" });
    const std::string preamble
        = "# Data, tokenizer and optimizer: arguments given to this script are appended and win,\n"
          "# e.g. --data-path DATA --tokenizer-type GPT2BPETokenizer --vocab-file V --merge-file M\n"
          "MEGATRON_LM=${MEGATRON_LM:-.}  # a Megatron-LM checkout\n";
    result.files.push_back(launchScript(layout, ExportTarget::Megatron, "\"$MEGATRON_LM/pretrain_gpt.py\"", args,
        preamble, result, primaryName.empty() ? layout.name + ".megatron.sh" : primaryName));
    return result;
}

} // namespace loom::plan::exporting
