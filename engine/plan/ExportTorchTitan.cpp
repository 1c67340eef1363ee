// torchtitan: the TOML job config ([model], [training], [parallelism], [activation_checkpoint]) and a launch
// script that runs torchtitan's train module with it.
#include "engine/plan/ExportDetail.h"

#include <algorithm>

namespace loom::plan::exporting {

namespace {

std::string quoted(const std::string& s)
{
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\')
            out += '\\';
        if (static_cast<unsigned char>(c) >= 0x20)
            out += c;
    }
    return out + "\"";
}

// torchtitan's models are Llama-style: RMSNorm, SwiGLU, rotary positions, no biases, untied head.
void checkModel(const ModelSpec& m, ExportResult& result)
{
    std::vector<std::string> differences;
    if (m.norm != ModelSpec::Norm::RmsNorm)
        differences.push_back("LayerNorm");
    if (m.mlp != ModelSpec::Mlp::SwiGlu)
        differences.push_back("a GELU MLP");
    if (m.position != ModelSpec::Position::Rope)
        differences.push_back("learned positions");
    if (m.bias)
        differences.push_back("biases");
    if (m.tieEmbeddings)
        differences.push_back("a tied LM head");
    if (differences.empty())
        return;
    std::string list;
    for (std::size_t i = 0; i < differences.size(); ++i)
        list += (i == 0 ? "" : i + 1 == differences.size() ? " and " : ", ") + differences[i];
    result.refusals.push_back("model \"" + m.name
        + "\": torchtitan trains Llama-style models (RMSNorm, SwiGLU, "
          "rotary positions, no biases, untied head); this model has "
        + list + ", so torchtitan would train a different network; export it to megatron or deepspeed");
}

std::string parallelism(const Layout& l, ExportResult& result)
{
    const auto& p = l.parallel;
    std::int64_t replicate = p.dp, shard = 1;
    std::string reshard;
    switch (l.memory.zero) {
    case 0:
        if (p.dp > 1 && (p.tp > 1 || p.pp > 1))
            result.refusals.push_back(
                "memory.zero 0: torchtitan's plain data parallelism "
                "(data_parallel_replicate_degree) cannot be combined with tensor or pipeline parallelism; its "
                "sharded data parallelism (FSDP) keeps parameters sharded too (ZeRO-3), which Loom's zero 3 describes");
        break;
    case 1:
        result.refusals.push_back("memory.zero 1: torchtitan shards parameters and gradients together with the "
                                  "optimizer state (FSDP); it has no optimizer-state-only sharding");
        break;
    case 2:
        replicate = 1, shard = p.dp, reshard = "never";
        break;
    case 3:
        replicate = 1, shard = p.dp, reshard = "default";
        break;
    default:
        result.refusals.push_back("memory.zero " + std::to_string(l.memory.zero) + ": torchtitan has no such stage");
    }
    std::string s = "[parallelism]\n";
    s += "data_parallel_replicate_degree = " + std::to_string(replicate) + "\n";
    s += "data_parallel_shard_degree = " + std::to_string(shard) + "\n";
    if (!reshard.empty())
        s += "fsdp_reshard_after_forward = " + quoted(reshard) + "\n";
    s += "tensor_parallel_degree = " + std::to_string(p.tp) + "\n";
    s += "pipeline_parallel_degree = " + std::to_string(p.pp) + "\n";
    if (p.pp > 1) {
        const char* schedule = p.schedule == ScheduleKind::GPipe ? "GPipe"
            : p.schedule == ScheduleKind::Interleaved            ? "Interleaved1F1B"
                                                                 : "1F1B";
        s += "pipeline_parallel_schedule = " + quoted(schedule) + "\n";
        // torch.distributed.pipelining's Interleaved1F1B runs m / ⌊m/pp⌋ micro-batches per chunk (pp when pp
        // divides m) and has no setting for it.
        const std::int64_t m = p.microBatches(), fixed = m / std::max<std::int64_t>(1, m / p.pp);
        if (p.schedule == ScheduleKind::Interleaved && p.microbatchGroup > 0 && p.microbatchGroup != fixed)
            result.refusals.push_back("parallel.microbatch_group " + std::to_string(p.microbatchGroup)
                + ": torchtitan's Interleaved1F1B (torch.distributed.pipelining) runs " + std::to_string(fixed)
                + " micro-batches per chunk (m / floor(m / pp)) and has no setting for it; remove microbatch_group or "
                  "set it to "
                + std::to_string(fixed));
        s += "pipeline_parallel_microbatch_size = " + std::to_string(p.microBatch) + "\n";
        const auto ranges = l.stageRanges();
        const bool even = std::all_of(
            ranges.begin(), ranges.end(), [&](const StageRange& r) { return r.size() == ranges.front().size(); });
        if (!even)
            result.refusals.push_back("parallel.stages: torchtitan splits the layers evenly "
                                      "(pipeline_parallel_layers_per_stage); this layout's stages are uneven");
        else
            s += "pipeline_parallel_layers_per_stage = " + std::to_string(l.model.layers / l.virtualStages()) + "\n";
    }
    // torchtitan's context parallelism: ring attention over the sequence with the same load-balanced split
    s += "context_parallel_degree = " + std::to_string(p.cp) + "\n";
    if (p.order == RankOrder::TpPpDp && p.pp > 1 && p.dp > 1)
        result.notes.push_back("rank order: torchtitan's device mesh puts pp outermost (tp-dp-pp); the layout's "
                               "tp-pp-dp placement becomes tp-dp-pp");
    return s;
}

} // namespace

ExportResult exportTorchTitan(const Layout& l, const std::string& primaryName)
{
    ExportResult result;
    checkModel(l.model, result);
    const auto& m = l.model;
    const auto& p = l.parallel;
    std::string t
        = "# torchtitan job config for the Loom layout " + quoted(commentText(l.name)) + ", written by loom export.\n";
    t += "# torchtitan reads the model's shape from its model registry: register the flavor below with\n";
    t += "#   dim=" + std::to_string(m.hidden) + ", n_layers=" + std::to_string(m.layers)
        + ", n_heads=" + std::to_string(m.heads) + ", n_kv_heads=" + std::to_string(m.effectiveKvHeads())
        + ", vocab_size=" + std::to_string(m.vocab) + ", FFN hidden " + std::to_string(m.ffnHidden) + "\n";
    t += "[job]\ndescription = " + quoted(commentText(l.description.empty() ? l.name : l.description)) + "\n\n";
    t += "[model]\nname = \"llama3\"\nflavor = " + quoted(m.name) + "\n\n";
    t += "[training]\n";
    // Without a pipeline torchtitan accumulates gradients over local batches (global / (local x dp) of them);
    // with one, each step's local batch is split into micro-batches of pipeline_parallel_microbatch_size.
    t += "local_batch_size = " + std::to_string(p.pp > 1 ? p.globalBatch / p.dp : p.microBatch) + "\n";
    t += "global_batch_size = " + std::to_string(p.globalBatch) + "\n";
    t += "seq_len = " + std::to_string(m.seqLen) + "\n";
    const char* dtype = l.precision == Precision::Bf16 ? "bfloat16"
        : l.precision == Precision::Fp16               ? "float16"
                                                       : "float32";
    t += "mixed_precision_param = " + quoted(dtype) + "\n";
    std::string reduce = "float32";
    const bool sharded = l.memory.zero >= 2;
    if (l.comm.dpCodec.kind == Codec::Kind::Bf16 && sharded)
        reduce = "bfloat16";
    else if (l.comm.dpCodec.kind == Codec::Kind::Fp16 && sharded)
        reduce = "float16";
    else if (l.comm.dpCodec.kind != Codec::Kind::None)
        result.refusals.push_back(codecRefusal(l, "torchtitan",
            " (mixed_precision_reduce gives \"fp16\" and \"bf16\" to its sharded data parallelism, zero 2 or 3, "
            "only); use one of those with zero 2 or 3, or \"none\""));
    t += "mixed_precision_reduce = " + quoted(reduce) + "\n\n";
    t += parallelism(l, result) + "\n";
    t += "[activation_checkpoint]\n";
    switch (l.memory.recompute) {
    case Recompute::None:
        t += "mode = \"none\"\n";
        break;
    case Recompute::Selective:
        t += "mode = \"selective\"\nselective_ac_option = \"op\"\n";
        result.notes.push_back("memory.recompute \"selective\": torchtitan's op-level selective checkpointing keeps "
                               "matmul outputs and recomputes the rest, close to but not the same as Megatron's");
        break;
    case Recompute::Full:
        t += "mode = \"full\"\n";
        break;
    }
    if (l.memory.efficientNorm)
        result.notes.push_back("memory.efficient_norm: torchtitan's RMSNorm keeps its input, 4·s·b·h bytes a layer "
                               "(/t with sp) more than Loom's estimate");
    commonComm(l, "torchtitan", result);
    result.notes.push_back("comm.bucket_mb and comm.overlap: torchtitan reduces gradients per layer (FSDP) or per "
                           "DDP bucket of its own and always overlaps them with the backward pass");
    ExportFile config;
    config.name = primaryName.empty() ? l.name + ".torchtitan.toml" : primaryName;
    config.text = std::move(t);
    const auto slash = config.name.find_last_of('/');
    const std::string configFile = slash == std::string::npos ? config.name : config.name.substr(slash + 1);
    const std::string preamble = "TORCHTITAN=${TORCHTITAN:-.}  # a torchtitan "
                                 "checkout\nCONFIG=${CONFIG:-\"${SLURM_SUBMIT_DIR:-$(dirname \"$0\")}\"/"
        + shellWord(configFile) + "}\ncd \"$TORCHTITAN\"\n";
    auto script = launchScript(l, ExportTarget::TorchTitan, "-m torchtitan.train", {}, preamble, result,
        companionName(config.name, ".torchtitan.toml", ".torchtitan.sh"), "ARGS+=(--job.config_file \"$CONFIG\")\n");
    result.files.push_back(std::move(config));
    result.files.push_back(std::move(script));
    return result;
}

} // namespace loom::plan::exporting
