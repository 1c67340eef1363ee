// torchtitan: the TOML job config ([model], [training], [parallelism], [activation_checkpoint]) and a launch
// script that runs torchtitan's train module with it.
#include "engine/bridges/ExportDetail.h"

#include <algorithm>
#include <cstdio>

namespace loom::plan::exporting {

namespace {

// A TOML basic string: quotes and backslashes escaped, control characters (DEL too, which TOML refuses
// raw) as \uXXXX.
std::string quoted(const std::string& s)
{
    std::string out = "\"";
    for (char c : s) {
        const auto u = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (u < 0x20 || u == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(u));
            out += buf;
        } else {
            out += c;
        }
    }
    return out + "\"";
}

// The flavor of torchtitan v0.2's llama3 registry (torchtitan/models/llama3/__init__.py) with the model's
// shape, or "" when none has it.
std::string registeredFlavor(const ModelSpec& m)
{
    struct Flavor {
        const char* name;
        std::int64_t dim, layers, heads, kvHeads, vocab;
    };
    static constexpr Flavor kFlavors[] = { { "8B", 4096, 32, 32, 8, 128256 }, { "70B", 8192, 80, 64, 8, 128256 },
        { "405B", 16384, 126, 128, 8, 128256 } };
    for (const auto& f : kFlavors)
        if (m.hidden == f.dim && m.layers == f.layers && m.heads == f.heads && m.effectiveKvHeads() == f.kvHeads
            && m.vocab == f.vocab)
            return f.name;
    return "";
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
        if (p.dp > 1 && (p.tp > 1 || p.pp > 1 || p.cp > 1))
            result.refusals.push_back(
                "memory.zero 0: torchtitan's plain data parallelism "
                "(data_parallel_replicate_degree) cannot be combined with tensor, pipeline or context parallelism; its "
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
        // torch.distributed.pipelining's schedule names; ZB-V is its ZBVZeroBubble (two stages per rank in a
        // V, the split placed by pipeline_parallel_schedule's "v" style). Its other zero-bubble schedule,
        // InterleavedZeroBubble, loops the chunks like interleaved 1F1B rather than either of Loom's
        // one-chunk forms, and DualPipeV is newer than the torchtitan releases whose facts are checked here.
        const char* schedule = p.schedule == ScheduleKind::GPipe ? "GPipe"
            : p.schedule == ScheduleKind::Interleaved            ? "Interleaved1F1B"
            : p.schedule == ScheduleKind::ZbV                    ? "ZBVZeroBubble"
                                                                 : "1F1B";
        if (p.schedule == ScheduleKind::ZbH1 || p.schedule == ScheduleKind::ZbH2)
            result.refusals.push_back("parallel.schedule \"" + std::string(toString(p.schedule))
                + "\": torchtitan has no one-chunk zero-bubble schedule (its InterleavedZeroBubble loops two or "
                  "more chunks a rank, as interleaved 1F1B does); choose \"zb-v\" (ZBVZeroBubble) or \"1f1b\"");
        if (p.schedule == ScheduleKind::DualPipe)
            result.refusals.push_back("parallel.schedule \"dualpipe\": the torchtitan releases Loom exports for "
                                      "(v0.2.0, v0.2.2) name no DualPipe schedule; choose \"zb-v\" (ZBVZeroBubble), "
                                      "the same V placement");
        if (p.schedule == ScheduleKind::ZbV)
            result.notes.push_back("parallel.schedule \"zb-v\": torch.distributed.pipelining's ZBVZeroBubble runs "
                                   "its own order of F, B and W, built for equal op times; Loom builds its zb-v op "
                                   "lists from the predicted op times, so the bubble Loom predicts is for Loom's "
                                   "order, and torchtitan's may differ");
        if (p.schedule == ScheduleKind::ZbV && p.weightFill == WeightFill::Idle)
            result.notes.push_back("parallel.weight_fill \"idle\": torch.distributed.pipelining's ZBVZeroBubble runs "
                                   "every W where its schedule lists it (Loom's weight_fill \"listed\"); Loom's "
                                   "predicted bubble assumes W may run early where a rank would wait");
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
        // Each stage's modules by name: any split, even or not; torchtitan checks one model part per rank
        // for single-stage schedules and at least two for interleaved ones, as Loom's layouts have them.
        const auto ranges = l.stageRanges();
        s += "module_fqns_per_model_part = [\n";
        for (std::size_t i = 0; i < ranges.size(); ++i) {
            std::string part;
            if (i == 0)
                part += "\"tok_embeddings\"";
            for (std::int64_t layer = ranges[i].first; layer <= ranges[i].last; ++layer)
                part += (part.empty() ? "\"layers." : ", \"layers.") + std::to_string(layer) + "\"";
            if (i + 1 == ranges.size())
                part += std::string(part.empty() ? "" : ", ") + "\"norm\", \"output\"";
            s += "    [" + part + "],\n";
        }
        s += "]\n";
    }
    // torchtitan's context parallelism: ring attention over the sequence with the same load-balanced split
    s += "context_parallel_degree = " + std::to_string(p.cp) + "\n";
    if (p.order == RankOrder::TpPpDp && p.pp > 1 && p.dp > 1)
        result.notes.push_back("rank order: torchtitan's device mesh puts pp outermost (tp-dp-pp); the layout's "
                               "tp-pp-dp placement becomes tp-dp-pp");
    return s;
}

} // namespace

ExportResult exportTorchTitan(const Layout& l, const std::string& primaryName, const std::string& version)
{
    ExportResult result;
    checkModel(l.model, result);
    if (l.model.isMoe())
        result.refusals.push_back("model \"" + commentText(l.model.name)
            + "\": a mixture of experts; torchtitan's llama3 "
            + "model is dense, and its MoE models (deepseek_v3, qwen3, llama4) have other attention or shared experts, "
              "so torchtitan would train a different network; export it to megatron");
    const auto& m = l.model;
    const auto& p = l.parallel;
    std::string t
        = "# torchtitan job config for the Loom layout " + quoted(commentText(l.name)) + ", written by loom export.\n";
    t += "# For torchtitan " + version + ".0 to " + version
        + ".2 (TOML job configs; its main branch reads Python configs).\n";
    const std::string flavor = registeredFlavor(m);
    t += flavor.empty()
        ? "# torchtitan reads the model's shape from its model registry: register the flavor below with\n"
        : "# torchtitan reads the model's shape from its model registry; its flavor " + flavor + " has\n";
    t += "#   dim=" + std::to_string(m.hidden) + ", n_layers=" + std::to_string(m.layers)
        + ", n_heads=" + std::to_string(m.heads) + ", n_kv_heads=" + std::to_string(m.effectiveKvHeads())
        + ", vocab_size=" + std::to_string(m.vocab) + ", FFN hidden " + std::to_string(m.ffnHidden) + "\n";
    t += "[job]\ndescription = " + quoted(l.description.empty() ? l.name : l.description) + "\n\n";
    if (flavor.empty())
        result.notes.push_back("model \"" + commentText(m.name) + "\": torchtitan's llama3 registry has no flavor of "
            + "this shape; add one named \"" + commentText(m.name)
            + "\" (the config's comment gives its shape) to "
              "torchtitan/models/llama3/__init__.py before training");
    t += "[model]\nname = \"llama3\"\nflavor = " + quoted(flavor.empty() ? m.name : flavor) + "\n\n";
    t += "[training]\n";
    // Without a pipeline torchtitan accumulates gradients over local batches (global / (local x dp) of them);
    // with one, each step's local batch is split into micro-batches of pipeline_parallel_microbatch_size.
    t += "local_batch_size = " + std::to_string(p.pp > 1 ? p.globalBatch / p.dp : p.microBatch) + "\n";
    t += "global_batch_size = " + std::to_string(p.globalBatch) + "\n";
    t += "seq_len = " + std::to_string(m.seqLen) + "\n";
    // torchtitan's mixed_precision_param takes bfloat16 or float32; it has no fp16 loss scaling.
    if (l.precision == Precision::Fp16)
        result.refusals.push_back("precision \"fp16\": torchtitan trains in bfloat16 or float32 "
                                  "(mixed_precision_param) and has no fp16 loss scaling; choose \"bf16\"");
    t += "mixed_precision_param = " + quoted(l.precision == Precision::Bf16 ? "bfloat16" : "float32") + "\n";
    // mixed_precision_reduce takes float32 only.
    if (l.comm.dpCodec.kind != Codec::Kind::None)
        result.refusals.push_back(
            codecRefusal(l, "torchtitan", " (its mixed_precision_reduce takes only \"float32\"); use \"none\""));
    t += "mixed_precision_reduce = \"float32\"\n";
    if (optimizerSectionGiven(l))
        t += "max_norm = " + number(l.optimizer.clipGrad) + "\n";
    t += "\n" + torchTitanOptimizer(l, result);
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
    // llama3's parallelize_llama: tensor parallelism with the sequence split and load-balanced context
    // parallelism need the sequence a multiple of tp x 2 x cp.
    if (m.seqLen % (p.tp * 2 * p.cp) != 0)
        result.refusals.push_back("model.seq_len " + std::to_string(m.seqLen)
            + ": torchtitan needs the sequence length a multiple of tp x 2 x cp = " + std::to_string(p.tp * 2 * p.cp));
    if (l.memory.attention == Attention::Materialized)
        result.notes.push_back("memory.attention \"materialized\": torchtitan's attention (SDPA or flex) never "
                               "keeps the s x s scores; it holds less than Loom's estimate");
    if (p.tp > 1 && !p.sp)
        result.notes.push_back("parallel.sp false: torchtitan's tensor parallelism always splits the norms along "
                               "the sequence (sequence parallelism); it holds less than Loom's estimate");
    if (l.memory.efficientNorm)
        result.notes.push_back("memory.efficient_norm: torchtitan's RMSNorm keeps its input, 4·s·b·h bytes a layer "
                               "(/t with sp) more than Loom's estimate");
    commonComm(l, "torchtitan", result);
    commonNotes(l, "torchtitan", result);
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
