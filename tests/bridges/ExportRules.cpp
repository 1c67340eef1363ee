// The cross-field rules of the frameworks that Loom's layouts can reach, each with where it is checked:
// Megatron-LM's megatron/training/arguments.py validate_args and megatron/core/transformer/
// transformer_config.py (__post_init__), DeepSpeed's runtime/config.py batch check, torchtitan v0.2's
// distributed/pipeline_parallel.py and distributed/parallel_dims.py.
#include "ExportChecker.h"

#include <nlohmann/json.hpp>

#include <regex>
#include <sstream>

namespace loom::test {

namespace {

long long num(const std::map<std::string, std::string>& a, const std::string& dest, long long fallback)
{
    const auto it = a.find(dest);
    if (it == a.end() || it->second.empty())
        return fallback;
    return std::strtoll(it->second.c_str(), nullptr, 10);
}

bool has(const std::map<std::string, std::string>& a, const std::string& dest)
{
    return a.count(dest) > 0;
}

// --pipeline-model-parallel-layout unrolled ("t*3" -> "ttt", "(t|)*2" -> "t|t|"), as parse_str_to_list does.
std::string unrollLayout(std::string s)
{
    s = std::regex_replace(s, std::regex(","), "");
    for (const char* pattern : { R"(\(([^)]+)\)\*(\d+))", R"((.)\*(\d+))" }) {
        const std::regex re(pattern);
        std::smatch m;
        while (std::regex_search(s, m, re)) {
            std::string repeated;
            for (int i = 0; i < std::stoi(m[2].str()); ++i)
                repeated += m[1].str();
            s = m.prefix().str() + repeated + m.suffix().str();
        }
    }
    return s;
}

void layoutRules(const std::string& layout, long long layers, long long pp, std::vector<std::string>& problems)
{
    const std::string s = unrollLayout(layout);
    const long long stages = std::count(s.begin(), s.end(), '|') + 1;
    if (stages % pp != 0)
        problems.push_back("Megatron-LM: --pipeline-model-parallel-layout has " + std::to_string(stages)
            + " stages, not a multiple of pp " + std::to_string(pp));
    if (s.find_first_not_of("EtL|") != std::string::npos)
        problems.push_back("Megatron-LM: --pipeline-model-parallel-layout has a character other than E, t, L, |");
    if (s.empty() || s.front() != 'E' || s.back() != 'L' || std::count(s.begin(), s.end(), 'E') != 1
        || std::count(s.begin(), s.end(), 'L') != 1)
        problems.push_back("Megatron-LM: --pipeline-model-parallel-layout must start with E and end with L, once each");
    if (std::count(s.begin(), s.end(), 't') != layers)
        problems.push_back("Megatron-LM: --pipeline-model-parallel-layout holds "
            + std::to_string(std::count(s.begin(), s.end(), 't')) + " layers, --num-layers " + std::to_string(layers));
}

void pipelineRules(const std::map<std::string, std::string>& a, long long pp, std::vector<std::string>& problems)
{
    const long long layers = num(a, "num_layers", 0);
    const int ways = int(has(a, "num_layers_per_virtual_pipeline_stage"))
        + int(has(a, "num_virtual_stages_per_pipeline_rank")) + int(has(a, "pipeline_model_parallel_layout"));
    if (ways > 1)
        problems.push_back("Megatron-LM: more than one of --num-layers-per-virtual-pipeline-stage, "
                           "--num-virtual-stages-per-pipeline-rank, --pipeline-model-parallel-layout");
    const long long counted = layers + int(has(a, "account_for_embedding_in_pipeline_split"))
        + int(has(a, "account_for_loss_in_pipeline_split"));
    const bool firstLast = has(a, "decoder_first_pipeline_num_layers") || has(a, "decoder_last_pipeline_num_layers");
    if (has(a, "pipeline_model_parallel_layout")) {
        layoutRules(a.at("pipeline_model_parallel_layout"), layers, pp, problems);
    } else if (has(a, "num_layers_per_virtual_pipeline_stage")) {
        if (firstLast)
            problems.push_back("Megatron-LM: --decoder-first/last-pipeline-num-layers need "
                               "--num-virtual-stages-per-pipeline-rank with interleaving");
        const long long per = counted / std::max(1LL, pp), v = num(a, "num_layers_per_virtual_pipeline_stage", 1);
        if (counted % pp != 0 || per % v != 0)
            problems.push_back("Megatron-LM: the layers do not divide into pp x virtual stages");
    } else if (!firstLast && counted % pp != 0) {
        problems.push_back("Megatron-LM: " + std::to_string(counted)
            + " layers (with the embedding and loss counted) do not divide by pp " + std::to_string(pp));
    }
    if (firstLast && pp > 2) {
        const long long inner
            = layers - num(a, "decoder_first_pipeline_num_layers", 0) - num(a, "decoder_last_pipeline_num_layers", 0);
        if (inner % (pp - 2) != 0)
            problems.push_back("Megatron-LM: the inner stages' layers do not divide by pp - 2");
    }
}

} // namespace

void ExportChecker::megatronRules(
    const Parsed& a, const Launch& launch, int minor, std::vector<std::string>& problems) const
{
    const long long tp = num(a, "tensor_model_parallel_size", 1), pp = num(a, "pipeline_model_parallel_size", 1);
    const long long cp = num(a, "context_parallel_size", 1), heads = num(a, "num_attention_heads", 0);
    const bool fsdp = has(a, "use_megatron_fsdp") || has(a, "use_custom_fsdp");
    // validate_args: tp or cp > 1 before Blackwell needs CUDA_DEVICE_MAX_CONNECTIONS=1 (FSDP: a warning).
    if ((tp > 1 || cp > 1) && !fsdp && launch.maxConnections != "1")
        problems.push_back(
            "Megatron-LM: tp or cp > 1 needs CUDA_DEVICE_MAX_CONNECTIONS=1, the launch has " + launch.maxConnections);
    if (fsdp && launch.maxConnections == "1")
        problems.push_back("Megatron-LM: its FSDP refuses CUDA_DEVICE_MAX_CONNECTIONS=1");
    if (has(a, "use_megatron_fsdp") && minor >= 14 && a.count("ckpt_format") && a.at("ckpt_format") != "fsdp_dtensor")
        problems.push_back("Megatron-LM: --use-megatron-fsdp needs --ckpt-format fsdp_dtensor");
    if (has(a, "use_megatron_fsdp") && minor >= 14 && !a.count("ckpt_format"))
        problems.push_back("Megatron-LM: --use-megatron-fsdp needs --ckpt-format fsdp_dtensor");
    if (has(a, "use_custom_fsdp") && !has(a, "use_distributed_optimizer"))
        problems.push_back("Megatron-LM: --use-custom-fsdp needs --use-distributed-optimizer");
    if (a.count("ckpt_format") && a.at("ckpt_format") == "fsdp_dtensor" && !has(a, "use_megatron_fsdp"))
        problems.push_back("Megatron-LM: --ckpt-format fsdp_dtensor needs --use-megatron-fsdp");
    if (has(a, "fp16") && has(a, "bf16"))
        problems.push_back("Megatron-LM: --fp16 and --bf16 together");
    // TransformerConfig: heads and query groups against tp.
    if (heads % tp != 0)
        problems.push_back("Megatron-LM: num_attention_heads is not a multiple of tp");
    const long long groups = num(a, "num_query_groups", heads);
    if (groups % tp != 0 && !(minor >= 16 && tp % groups == 0))
        problems.push_back("Megatron-LM " + std::to_string(minor) + ": num_query_groups " + std::to_string(groups)
            + " against tp " + std::to_string(tp));
    // TransformerConfig's MoE rules.
    if (has(a, "num_experts")) {
        if (num(a, "moe_router_topk", 2) == 1 && !has(a, "moe_router_pre_softmax"))
            problems.push_back("Megatron-LM: --moe-router-topk 1 needs --moe-router-pre-softmax");
        if (!has(a, "add_bias_linear") && num(a, "expert_tensor_parallel_size", tp) != 1)
            problems.push_back("Megatron-LM: MoE with biases needs --expert-tensor-parallel-size 1");
        if (tp > 1 && !has(a, "sequence_parallel")) // moe_layer.py, in training
            problems.push_back("Megatron-LM: MoE with tp > 1 needs --sequence-parallel");
        const long long ep = num(a, "expert_model_parallel_size", 1);
        if (num(a, "num_experts", 0) % ep != 0)
            problems.push_back("Megatron-LM: num_experts is not a multiple of ep");
    } else if (num(a, "expert_model_parallel_size", 1) > 1) {
        problems.push_back("Megatron-LM: expert parallelism without --num-experts");
    }
    pipelineRules(a, pp, problems);
    const long long dp = launchWorld(launch) / std::max(1LL, tp * pp * cp);
    const long long micro = num(a, "micro_batch_size", 1), global = num(a, "global_batch_size", micro * dp);
    if (dp <= 0 || launchWorld(launch) % (tp * pp * cp) != 0 || global % (micro * dp) != 0)
        problems.push_back("Megatron-LM: the global batch is not a multiple of micro batch x dp");
    if (!has(a, "mock_data") && !has(a, "data_path"))
        problems.push_back("Megatron-LM: no data source");
}

void ExportChecker::deepSpeedConfig(
    const std::string& text, const Parsed& a, const Launch& launch, std::vector<std::string>& problems) const
{
    const auto c = nlohmann::json::parse(text, nullptr, false);
    if (c.is_discarded() || !c.is_object()) {
        problems.push_back("DeepSpeed: the config is not a JSON object");
        return;
    }
    const auto known = [&](const std::string& list, const std::string& key) {
        const auto& l = m_deepSpeed.at(list);
        return std::find(l.begin(), l.end(), key) != l.end();
    };
    for (const auto& [key, value] : c.items()) {
        if (!known("top_level_strings", key))
            problems.push_back("DeepSpeed: no config key " + key);
        if (key == "zero_optimization" || key == "fp16" || key == "bf16")
            for (const auto& [k, v] : value.items())
                if (!known(key, k))
                    problems.push_back("DeepSpeed: no key " + key + "." + k);
        if (key == "activation_checkpointing")
            for (const auto& [k, v] : value.items())
                if (!known("activation_checkpointing_strings", k))
                    problems.push_back("DeepSpeed: no key activation_checkpointing." + k);
        if (key == "communication_data_type" && !known("communication_data_type", value.get<std::string>()))
            problems.push_back("DeepSpeed: communication_data_type " + value.dump());
    }
    if (c.contains("zero_optimization") && c["zero_optimization"].value("stage", 0) > 3)
        problems.push_back("DeepSpeed: ZeRO stage beyond 3");
    // DeepSpeed's batch identity: train_batch_size = micro batch x gradient accumulation x data parallelism.
    const long long tp = num(a, "tensor_model_parallel_size", 1), pp = num(a, "pipeline_model_parallel_size", 1);
    const long long dp = launchWorld(launch) / std::max(1LL, tp * pp);
    if (c.value("train_batch_size", 0LL)
        != c.value("train_micro_batch_size_per_gpu", 0LL) * c.value("gradient_accumulation_steps", 0LL) * dp)
        problems.push_back("DeepSpeed: train_batch_size is not micro batch x accumulation x dp");
    if (has(a, "fp16") != c.contains("fp16") || has(a, "bf16") != c.contains("bf16"))
        problems.push_back("DeepSpeed: the precision of the arguments and of the config differ");
}

} // namespace loom::test
