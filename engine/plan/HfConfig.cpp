#include "engine/plan/HfConfig.h"

#include "engine/plan/JsonFields.h"

#include <nlohmann/json.hpp>

namespace loom::plan {

using nlohmann::json;

namespace {

// Refuses `key` when it is present and not one of the values Loom can express (`accept` says so).
template <typename Accept>
void refuseUnless(const json& c, const char* key, Accept accept, const std::string& why, Diagnostics& d)
{
    const auto it = c.find(key);
    if (it != c.end() && !accept(*it))
        d.error(std::string("config.") + key, std::string("config.") + key + " is " + jsonSnippet(*it) + ": " + why);
}

bool isNullOrFalse(const json& v)
{
    return v.is_null() || (v.is_boolean() && !v.get<bool>());
}

void readAttention(const json& c, ObjectReader& r, ModelSpec& m, Diagnostics& d)
{
    m.mlp = ModelSpec::Mlp::SwiGlu;
    m.norm = ModelSpec::Norm::RmsNorm;
    m.position = ModelSpec::Position::Rope;
    m.bias = false;
    m.tieEmbeddings = false;
    if (auto v = r.integer("num_hidden_layers", Presence::Required, 1, 100000))
        m.layers = *v;
    if (auto v = r.integer("hidden_size", Presence::Required, 1, 1 << 20))
        m.hidden = *v;
    if (auto v = r.integer("num_attention_heads", Presence::Required, 1, 1 << 16))
        m.heads = *v;
    if (auto v = r.integer("num_key_value_heads", Presence::Optional, 1, 1 << 16); v && *v != m.heads)
        m.kvHeads = *v;
    if (auto v = r.integer("intermediate_size", Presence::Required, 1, 1 << 20))
        m.ffnHidden = *v;
    if (auto v = r.integer("vocab_size", Presence::Required, 1, 1 << 24))
        m.vocab = *v;
    if (auto v = r.integer("max_position_embeddings", Presence::Required, 1, 1 << 24))
        m.seqLen = *v;
    if (auto v = r.number("rms_norm_eps", Presence::Optional, 0.0, 1.0, true))
        m.normEps = *v;
    if (auto v = r.number("rope_theta", Presence::Optional, 1.0, 1e12))
        m.ropeTheta = *v;
    if (auto v = r.boolean("tie_word_embeddings", Presence::Optional))
        m.tieEmbeddings = *v;
    refuseUnless(
        c, "hidden_act", [](const json& v) { return v == "silu"; },
        "Loom's SwiGLU uses silu (x·σ(x)); no other activation", d);
    refuseUnless(c, "attention_bias", isNullOrFalse, "Loom's Llama-form blocks have no attention biases", d);
    refuseUnless(c, "mlp_bias", isNullOrFalse, "Loom's Llama-form blocks have no MLP biases", d);
    refuseUnless(
        c, "sliding_window", [](const json& v) { return v.is_null(); },
        "Loom's attention is causal over the whole sequence (no sliding window)", d);
    refuseUnless(c, "use_sliding_window", isNullOrFalse, "Loom has no sliding-window attention", d);
    refuseUnless(
        c, "attention_dropout", [](const json& v) { return v.is_number() && v.get<double>() == 0; },
        "loom-train has no dropout", d);
    if (const auto hd = c.find("head_dim"); hd != c.end() && !hd->is_null() && m.heads > 0
        && !(hd->is_number_integer() && hd->get<std::int64_t>() == m.hidden / m.heads))
        d.error("config.head_dim",
            "config.head_dim is " + jsonSnippet(*hd) + ": Loom's head size is hidden_size / num_attention_heads ("
                + std::to_string(m.hidden / m.heads) + ")");
    if (const auto s = c.find("rope_scaling"); s != c.end() && !s->is_null()) {
        const std::string type = s->is_object() ? s->value("rope_type", s->value("type", std::string())) : "";
        if (type != "llama3") {
            d.error("config.rope_scaling",
                "config.rope_scaling is " + jsonSnippet(*s)
                    + ": Loom has Llama 3.1's frequency scaling (rope_type \"llama3\") only");
        } else {
            json scaling = *s;
            scaling.erase("type");
            Diagnostics local;
            json probe = { { "name", "probe" }, { "layers", 1 }, { "hidden", 2 }, { "heads", 1 }, { "ffn_hidden", 1 },
                { "vocab", 1 }, { "seq_len", 1 }, { "position", "rope" }, { "rope_scaling", scaling } };
            if (auto parsed = parseModelSpec(probe, "config", local))
                m.ropeScaling = parsed->ropeScaling;
            d.append(local);
        }
    }
}

void readMixtral(const json& c, ObjectReader& r, ModelSpec& m, Diagnostics& d)
{
    if (auto v = r.integer("num_local_experts", Presence::Required, 2, 1 << 16))
        m.experts = *v;
    if (auto v = r.integer("num_experts_per_tok", Presence::Required, 1, 1 << 16))
        m.topK = *v;
    if (auto v = r.number("router_aux_loss_coef", Presence::Optional, 0.0, 1000.0))
        m.auxLossCoeff = *v;
    m.routerNormTopK = true; // transformers' Mixtral renormalises the top-k weights
    refuseUnless(
        c, "router_jitter_noise", [](const json& v) { return v.is_number() && v.get<double>() == 0; },
        "Loom's router has no jitter noise", d);
}

void readQwen2Moe(const json& c, ObjectReader& r, ModelSpec& m, Diagnostics& d)
{
    if (auto v = r.integer("num_experts", Presence::Required, 2, 1 << 16))
        m.experts = *v;
    if (auto v = r.integer("num_experts_per_tok", Presence::Required, 1, 1 << 16))
        m.topK = *v;
    if (auto v = r.integer("moe_intermediate_size", Presence::Required, 1, 1 << 20))
        m.moeFfnHidden = *v;
    if (auto v = r.boolean("norm_topk_prob", Presence::Optional))
        m.routerNormTopK = *v;
    if (auto v = r.number("router_aux_loss_coef", Presence::Optional, 0.0, 1000.0))
        m.auxLossCoeff = *v;
    refuseUnless(
        c, "decoder_sparse_step", [](const json& v) { return v == 1; },
        "Qwen2-MoE makes block l sparse when (l+1) % step == 0, Loom when l % moe_layer_freq == 0; only step 1 "
        "is the same",
        d);
    refuseUnless(
        c, "mlp_only_layers", [](const json& v) { return v.is_array() && v.empty(); },
        "Loom's dense blocks are the first first_dense_layers, not a list", d);
    refuseUnless(
        c, "shared_expert_intermediate_size", [](const json& v) { return v == 0; },
        "Qwen2-MoE's shared expert is scaled by a sigmoid gate (shared_expert_gate) that Loom's shared experts "
        "do not have",
        d);
    d.error("config.model_type",
        "config.model_type is \"qwen2_moe\": its q/k/v projections always have biases (and no others), which "
        "Loom's bias field (biases on every projection or none) cannot express");
}

void readDeepseek(const json& c, ObjectReader& r, ModelSpec& m, Diagnostics& d)
{
    refuseUnless(
        c, "kv_lora_rank", [](const json& v) { return v.is_null(); },
        "DeepSeek-V2/V3's multi-head latent attention is not Loom's attention", d);
    refuseUnless(
        c, "scoring_func", [](const json& v) { return v == "softmax"; }, "Loom's router scores with a softmax", d);
    refuseUnless(
        c, "topk_method", [](const json& v) { return v == "greedy"; },
        "Loom's router takes the top k over all experts (greedy)", d);
    if (auto v = r.integer("n_routed_experts", Presence::Required, 2, 1 << 16))
        m.experts = *v;
    if (auto v = r.integer("num_experts_per_tok", Presence::Required, 1, 1 << 16))
        m.topK = *v;
    if (auto v = r.integer("moe_intermediate_size", Presence::Required, 1, 1 << 20))
        m.moeFfnHidden = *v;
    if (auto v = r.integer("n_shared_experts", Presence::Optional, 0, 1 << 16); v && *v > 0)
        m.sharedExperts = *v;
    if (auto v = r.integer("first_k_dense_replace", Presence::Optional, 0, 100000))
        m.firstDenseLayers = *v;
    if (auto v = r.integer("moe_layer_freq", Presence::Optional, 1, 100000))
        m.moeLayerFreq = *v;
    if (auto v = r.boolean("norm_topk_prob", Presence::Optional))
        m.routerNormTopK = *v;
    if (auto v = r.number("aux_loss_alpha", Presence::Optional, 0.0, 1000.0))
        m.auxLossCoeff = *v;
}

} // namespace

std::optional<ModelSpec> modelFromHfConfig(const json& c, const std::string& name, Diagnostics& diagnostics)
{
    if (!c.is_object()) {
        diagnostics.error("config", "config.json is " + jsonTypeName(c) + "; expected transformers' config object");
        return std::nullopt;
    }
    Diagnostics d;
    ObjectReader r(c, "config", d, "config.json");
    auto type = r.choice("model_type", Presence::Required,
        { "llama", "mistral", "mixtral", "qwen2_moe", "deepseek", "deepseek_v2", "deepseek_v3" });
    ModelSpec m;
    m.name = name;
    if (type) {
        readAttention(c, r, m, d);
        if (*type == "mixtral")
            readMixtral(c, r, m, d);
        else if (*type == "qwen2_moe")
            readQwen2Moe(c, r, m, d);
        else if (type->rfind("deepseek", 0) == 0)
            readDeepseek(c, r, m, d);
        m.description = "imported from a transformers config.json (model_type " + *type + ")";
    }
    if (m.experts > 0 && m.firstDenseLayers >= m.layers)
        d.error("config.first_k_dense_replace", "config.first_k_dense_replace leaves no MoE block");
    const bool ok = !d.hasErrors();
    diagnostics.append(d);
    if (!ok)
        return std::nullopt;
    // The profile reader's own checks (heads divide hidden, kv heads divide heads, ...) on the result.
    Diagnostics again;
    auto checked = parseModelSpec(json::parse(toJson(m).dump()), "model", again);
    diagnostics.append(again);
    return checked;
}

} // namespace loom::plan
