#pragma once

#include "engine/plan/Diagnostics.h"
#include "engine/plan/ModelSpec.h"

#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>

namespace loom::plan {

// A model profile from a Hugging Face transformers config.json: model_type "llama" or "mistral" (dense),
// "mixtral", "qwen2_moe" and "deepseek" (DeepSeek-MoE). Every field Loom's model cannot express is refused
// with its name (an error in `diagnostics` at "config.<field>"): another activation than silu, attention
// or MLP biases, a sliding window, a rope_scaling other than Llama 3.1's, router jitter, Qwen2-MoE's
// gated shared expert and q/k/v biases, DeepSeek-V2/V3's latent attention, and so on. `name` becomes the
// profile's name.
std::optional<ModelSpec> modelFromHfConfig(
    const nlohmann::json& config, const std::string& name, Diagnostics& diagnostics);

} // namespace loom::plan
