// DeepSpeed: the JSON config (train_batch_size, zero_optimization, fp16 / bf16, ...) and a launch script that
// runs Megatron-DeepSpeed's pretrain_gpt.py, which takes the model shape, tp and pp as arguments (DeepSpeed's
// config has no place for them).
#include "engine/bridges/ExportDetail.h"

#include <nlohmann/json.hpp>

#include <cmath>

namespace loom::plan::exporting {

namespace {

nlohmann::ordered_json deepSpeedConfig(const Layout& l, ExportResult& result)
{
    const auto& p = l.parallel;
    nlohmann::ordered_json c;
    c["train_batch_size"] = p.globalBatch;
    c["train_micro_batch_size_per_gpu"] = p.microBatch;
    c["gradient_accumulation_steps"] = p.microBatches();
    c["steps_per_print"] = 10;

    if (p.pp > 1 && l.memory.zero >= 2)
        result.refusals.push_back("memory.zero " + std::to_string(l.memory.zero)
            + ": DeepSpeed's pipeline engine works with ZeRO stage 0 or 1 only; use zero 0 or 1, or pp 1");
    if (l.memory.zero > 3)
        result.refusals.push_back("memory.zero " + std::to_string(l.memory.zero) + ": DeepSpeed has stages 0 to 3");
    // DeepSpeed counts buckets in elements; gradients are reduced in the training precision.
    const auto elements = std::llround(l.comm.bucketMb * double(1 << 20) / bytesPerElement(l.precision));
    auto& zero = c["zero_optimization"];
    zero["stage"] = l.memory.zero;
    zero["overlap_comm"] = l.comm.overlap;
    zero["contiguous_gradients"] = true;
    zero["reduce_bucket_size"] = elements;
    zero["allgather_bucket_size"] = elements;
    if (l.memory.zero == 0 && l.comm.overlap)
        result.notes.push_back("comm.overlap: at ZeRO stage 0 DeepSpeed reduces gradients after the backward pass; "
                               "overlap_comm and the bucket sizes take effect from stage 1");

    if (l.precision == Precision::Fp16)
        c["fp16"] = { { "enabled", true }, { "loss_scale", 0 } };
    else if (l.precision == Precision::Bf16)
        c["bf16"] = { { "enabled", true } };

    switch (l.comm.dpCodec.kind) {
    case Codec::Kind::None:
        break;
    case Codec::Kind::Fp16:
        c["communication_data_type"] = "fp16";
        break;
    case Codec::Kind::Bf16:
        c["communication_data_type"] = "bf16";
        break;
    default:
        result.refusals.push_back(codecRefusal(l, "DeepSpeed",
            " (communication_data_type covers only \"fp16\" and \"bf16\"); use one of those or \"none\""));
    }
    deepSpeedOptimizerConfig(l, c);
    if (l.memory.recompute == Recompute::Full)
        c["activation_checkpointing"] = { { "partition_activations", false },
            { "contiguous_memory_optimization", false }, { "cpu_checkpointing", false } };
    return c;
}

} // namespace

ExportResult exportDeepSpeed(const Layout& layout, const std::string& primaryName, const std::string& version)
{
    ExportResult result;
    auto args = megatronArgs(layout, result, true);
    commonComm(layout, "DeepSpeed", result);
    commonNotes(layout, "DeepSpeed", result);
    ExportFile config;
    config.name = primaryName.empty() ? layout.name + ".ds_config.json" : primaryName;
    config.text = deepSpeedConfig(layout, result).dump(2) + "\n";
    const auto slash = config.name.find_last_of('/');
    const std::string configFile = slash == std::string::npos ? config.name : config.name.substr(slash + 1);
    const std::string preamble = "# For Megatron-DeepSpeed and DeepSpeed " + version
        + " (the commits named in Loom's docs/bridges.md).\n"
          "# Data and tokenizer: arguments given to this script are appended and win,\n"
          "# e.g. --data-path DATA --vocab-file V --merge-file M --train-iters N --lr LR\n"
          "MEGATRON_DEEPSPEED=${MEGATRON_DEEPSPEED:-.}  # a Megatron-DeepSpeed checkout\n"
          "DS_CONFIG=${DS_CONFIG:-\"${SLURM_SUBMIT_DIR:-$(dirname \"$0\")}\"/"
        + shellWord(configFile) + "}\n";
    std::string after = "ARGS+=(--deepspeed --deepspeed_config \"$DS_CONFIG\")\n";
    if (layout.parallel.sp && layout.parallel.tp > 1) // Megatron-DeepSpeed's validate_args asks for it
        after = "export CUDA_DEVICE_MAX_CONNECTIONS=1  # Megatron-DeepSpeed requires it with sequence parallelism\n"
            + after;
    auto script = launchScript(layout, ExportTarget::DeepSpeed, "\"$MEGATRON_DEEPSPEED/pretrain_gpt.py\"", args,
        preamble, result, companionName(config.name, ".ds_config.json", ".deepspeed.sh"), after);
    result.files.push_back(std::move(config));
    result.files.push_back(std::move(script));
    return result;
}

} // namespace loom::plan::exporting
