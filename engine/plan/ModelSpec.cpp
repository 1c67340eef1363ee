#include "engine/plan/ModelSpec.h"

#include "engine/plan/JsonFields.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

namespace loom::plan {

using nlohmann::json;

namespace {
constexpr std::int64_t kMaxLayers = 100000;
constexpr std::int64_t kMaxWidth = 1 << 20; // hidden, ffn_hidden
constexpr std::int64_t kMaxHeads = 1 << 16;
constexpr std::int64_t kMaxVocab = 1 << 24;
constexpr std::int64_t kMaxSeq = 1 << 24;

std::int64_t vocabParameters(const ModelSpec& m, std::int64_t vocab)
{
    std::int64_t p = vocab * m.hidden;
    if (m.position == ModelSpec::Position::Learned)
        p += m.seqLen * m.hidden;
    return p;
}

std::int64_t normParameters(const ModelSpec& m)
{
    return m.norm == ModelSpec::Norm::LayerNorm ? 2 * m.hidden : m.hidden;
}
// rope_scaling: Llama 3.1's form (rope_type "llama3" when given, as in Hugging Face's config.json).
void parseRopeScaling(const json& object, const std::string& path, Diagnostics& local, ModelSpec::RopeScaling& out)
{
    if (!object.is_object()) {
        local.error(path,
            path + " is " + jsonTypeName(object)
                + "; expected an object with factor, low_freq_factor, high_freq_factor and "
                  "original_max_position_embeddings");
        return;
    }
    ObjectReader r(object, path, local, "the model");
    auto type = r.choice("rope_type", Presence::Optional, { "llama3" });
    auto factor = r.number("factor", Presence::Required, 1.0, 1e6);
    auto low = r.number("low_freq_factor", Presence::Required, 0.0, 1e6, true);
    auto high = r.number("high_freq_factor", Presence::Required, 0.0, 1e6, true);
    auto original = r.integer("original_max_position_embeddings", Presence::Required, 1, kMaxSeq);
    r.warnUnknown(
        { "rope_type", "type", "factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings" });
    (void)type;
    if (factor)
        out.factor = *factor;
    if (low)
        out.lowFreqFactor = *low;
    if (high)
        out.highFreqFactor = *high;
    if (original)
        out.originalMaxPositions = *original;
    if (low && high && *high <= *low)
        local.error(r.pathOf("high_freq_factor"),
            r.pathOf("high_freq_factor") + "=" + jsonSnippet(object["high_freq_factor"]) + " is not above "
                + r.pathOf("low_freq_factor") + "=" + jsonSnippet(object["low_freq_factor"])
                + "; Llama 3.1's scaling blends the wavelengths between the two (it uses 1 and 4)");
}

} // namespace

std::int64_t ModelSpec::paddedVocab() const
{
    if (vocabPadMultiple <= 1)
        return vocab;
    return (vocab + vocabPadMultiple - 1) / vocabPadMultiple * vocabPadMultiple;
}

std::int64_t ModelSpec::blockParameters() const
{
    const std::int64_t h = hidden;
    const std::int64_t kv = headDim() * effectiveKvHeads();
    std::int64_t attention = h * (h + 2 * kv) + h * h; // QKV and output projection
    std::int64_t mlpWeights = (mlp == Mlp::SwiGlu ? 3 : 2) * h * ffnHidden;
    std::int64_t biases = bias ? (h + 2 * kv) + h + ffnHidden * (mlp == Mlp::SwiGlu ? 2 : 1) + h : 0;
    return attention + mlpWeights + biases + 2 * normParameters(*this);
}

std::int64_t ModelSpec::expertParameters() const
{
    const std::int64_t f = expertFfn(), gates = mlp == Mlp::SwiGlu ? 3 : 2;
    return gates * hidden * f + (bias ? f * (mlp == Mlp::SwiGlu ? 2 : 1) + hidden : 0);
}

std::int64_t ModelSpec::sharedExpertParameters() const
{
    const std::int64_t f = sharedExpertFfn() * sharedExperts, gates = mlp == Mlp::SwiGlu ? 3 : 2;
    return sharedExperts > 0 ? gates * hidden * f + (bias ? f * (mlp == Mlp::SwiGlu ? 2 : 1) + hidden : 0) : 0;
}

std::int64_t ModelSpec::moeBlockParameters() const
{
    // A dense block without its MLP, plus the router and the experts.
    const std::int64_t f = ffnHidden, gates = mlp == Mlp::SwiGlu ? 3 : 2;
    const std::int64_t denseMlp = gates * hidden * f + (bias ? f * (mlp == Mlp::SwiGlu ? 2 : 1) + hidden : 0);
    return blockParameters() - denseMlp + routerParameters() + experts * expertParameters() + sharedExpertParameters();
}

std::int64_t ModelSpec::moeBlockActiveParameters() const
{
    return moeBlockParameters() - (experts - effectiveTopK()) * expertParameters();
}

std::int64_t ModelSpec::moeLayersIn(std::int64_t first, std::int64_t last) const
{
    if (experts <= 0 || last < first)
        return 0;
    first = std::max(first, firstDenseLayers);
    if (last < first)
        return 0;
    auto upTo = [&](std::int64_t l) { return l < 0 ? 0 : l / moeLayerFreq + 1; }; // multiples of freq in [0, l]
    return upTo(last) - upTo(first - 1);
}

std::int64_t ModelSpec::activeParameterCount() const
{
    const std::int64_t moe = moeLayerCount();
    return parameterCount() - moe * (moeBlockParameters() - moeBlockActiveParameters());
}

std::int64_t ModelSpec::embeddingParameters() const
{
    return vocabParameters(*this, paddedVocab());
}

std::int64_t ModelSpec::headParameters() const
{
    return normParameters(*this) + (tieEmbeddings ? 0 : paddedVocab() * hidden);
}

std::int64_t ModelSpec::parameterCount() const
{
    const std::int64_t moe = moeLayerCount();
    return (layers - moe) * blockParameters() + moe * moeBlockParameters() + vocabParameters(*this, vocab)
        + normParameters(*this) + (tieEmbeddings ? 0 : vocab * hidden);
}

std::optional<ModelSpec> parseModelSpec(const json& object, const std::string& path, Diagnostics& diagnostics)
{
    if (!object.is_object()) {
        diagnostics.error(path,
            (path.empty() ? std::string("the model") : path) + " is " + jsonTypeName(object)
                + "; write a model profile name in quotes or an object with layers, hidden, "
                  "heads, ffn_hidden, vocab and seq_len");
        return std::nullopt;
    }
    Diagnostics local;
    ObjectReader r(object, path, local, "the model");
    ModelSpec m;
    auto name = r.string("name", Presence::Required, 128);
    auto layers = r.integer("layers", Presence::Required, 1, kMaxLayers);
    auto hidden = r.integer("hidden", Presence::Required, 1, kMaxWidth);
    auto heads = r.integer("heads", Presence::Required, 1, kMaxHeads);
    auto kvHeads = r.integer("kv_heads", Presence::Optional, 1, kMaxHeads);
    auto ffn = r.integer("ffn_hidden", Presence::Required, 1, kMaxWidth);
    auto vocab = r.integer("vocab", Presence::Required, 1, kMaxVocab);
    auto seq = r.integer("seq_len", Presence::Required, 1, kMaxSeq);
    auto pad = r.integer("vocab_pad_multiple", Presence::Optional, 1, 1 << 16);
    auto mlp = r.choice("mlp", Presence::Optional, { "gelu", "swiglu" });
    auto norm = r.choice("norm", Presence::Optional, { "layernorm", "rmsnorm" });
    auto position = r.choice("position", Presence::Optional, { "learned", "rope" });
    auto bias = r.boolean("bias", Presence::Optional);
    auto tie = r.boolean("tie_embeddings", Presence::Optional);
    auto description = r.string("description", Presence::Optional, 4096);
    auto experts = r.integer("experts", Presence::Optional, 0, 1 << 16);
    auto topK = r.integer("top_k", Presence::Optional, 1, 1 << 16);
    auto moeFfn = r.integer("moe_ffn_hidden", Presence::Optional, 1, kMaxWidth);
    auto moeFreq = r.integer("moe_layer_freq", Presence::Optional, 1, kMaxLayers);
    auto capacity = r.number("capacity_factor", Presence::Optional, 0.0, 1024.0);
    auto auxCoeff = r.number("aux_loss_coeff", Presence::Optional, 0.0, 1000.0);
    auto normTopK = r.boolean("router_norm_topk", Presence::Optional);
    auto zLoss = r.number("router_z_loss", Presence::Optional, 0.0, 1000.0);
    auto shared = r.integer("shared_experts", Presence::Optional, 0, 1 << 16);
    auto sharedHidden = r.integer("shared_expert_hidden", Presence::Optional, 1, kMaxWidth);
    auto firstDense = r.integer("first_dense_layers", Presence::Optional, 0, kMaxLayers);
    auto theta = r.number("rope_theta", Presence::Optional, 1.0, 1e12);
    auto eps = r.number("norm_eps", Presence::Optional, 0.0, 1.0, true);
    if (const json* scaling = r.find("rope_scaling"))
        parseRopeScaling(*scaling, r.pathOf("rope_scaling"), local, m.ropeScaling);
    r.warnUnknown({ "name", "layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab", "seq_len",
        "vocab_pad_multiple", "mlp", "norm", "position", "bias", "tie_embeddings", "description", "source",
        "loom_profile", "kind", "experts", "top_k", "moe_ffn_hidden", "moe_layer_freq", "capacity_factor",
        "aux_loss_coeff", "router_norm_topk", "router_z_loss", "shared_experts", "shared_expert_hidden",
        "first_dense_layers", "rope_theta", "rope_scaling", "norm_eps" });

    if (name)
        m.name = *name;
    if (layers)
        m.layers = *layers;
    if (hidden)
        m.hidden = *hidden;
    if (heads)
        m.heads = *heads;
    if (kvHeads)
        m.kvHeads = *kvHeads;
    if (vocab)
        m.vocab = *vocab;
    if (seq)
        m.seqLen = *seq;
    if (pad)
        m.vocabPadMultiple = *pad;
    if (mlp)
        m.mlp = *mlp == "swiglu" ? ModelSpec::Mlp::SwiGlu : ModelSpec::Mlp::Gelu;
    if (norm)
        m.norm = *norm == "rmsnorm" ? ModelSpec::Norm::RmsNorm : ModelSpec::Norm::LayerNorm;
    if (position)
        m.position = *position == "rope" ? ModelSpec::Position::Rope : ModelSpec::Position::Learned;
    if (bias)
        m.bias = *bias;
    if (tie)
        m.tieEmbeddings = *tie;
    if (description)
        m.description = *description;
    if (ffn)
        m.ffnHidden = *ffn;
    if (experts)
        m.experts = *experts;
    if (topK)
        m.topK = *topK;
    if (moeFfn)
        m.moeFfnHidden = *moeFfn;
    if (moeFreq)
        m.moeLayerFreq = *moeFreq;
    if (capacity)
        m.capacityFactor = *capacity;
    if (auxCoeff)
        m.auxLossCoeff = *auxCoeff;
    if (normTopK)
        m.routerNormTopK = *normTopK;
    if (zLoss)
        m.routerZLoss = *zLoss;
    if (shared)
        m.sharedExperts = *shared;
    if (sharedHidden)
        m.sharedExpertHidden = *sharedHidden;
    if (firstDense)
        m.firstDenseLayers = *firstDense;
    if (theta)
        m.ropeTheta = *theta;
    if (eps)
        m.normEps = *eps;
    for (const char* key :
        { "router_norm_topk", "router_z_loss", "shared_experts", "shared_expert_hidden", "first_dense_layers" })
        if (r.find(key) && m.experts == 0)
            local.error(r.pathOf(key),
                r.pathOf(key) + " is given but " + r.pathOf("experts")
                    + " is not; it describes a mixture of experts (set experts, or remove it)");
    if (sharedHidden && m.sharedExperts == 0)
        local.error(r.pathOf("shared_expert_hidden"),
            r.pathOf("shared_expert_hidden") + " is given but " + r.pathOf("shared_experts")
                + " is 0; set the number of shared experts");
    if (firstDense && layers && *firstDense >= *layers)
        local.error(r.pathOf("first_dense_layers"),
            r.pathOf("first_dense_layers") + "=" + std::to_string(*firstDense) + " leaves no MoE block among "
                + r.pathOf("layers") + "=" + std::to_string(*layers) + "; use fewer, or a dense model");
    if ((theta || r.find("rope_scaling")) && m.position != ModelSpec::Position::Rope)
        local.error(r.pathOf(theta ? "rope_theta" : "rope_scaling"),
            r.pathOf(theta ? "rope_theta" : "rope_scaling")
                + " is given but the model's position is \"learned\"; set position to \"rope\" or remove it");
    if (topK && !experts)
        local.error(r.pathOf("top_k"),
            r.pathOf("top_k") + " is given but " + r.pathOf("experts")
                + " is not; a dense model routes nothing (set experts, or remove top_k)");
    if (experts && *experts > 0 && m.effectiveTopK() > *experts)
        local.error(r.pathOf("top_k"),
            r.pathOf("top_k") + "=" + std::to_string(m.effectiveTopK()) + " is more than " + r.pathOf("experts") + "="
                + std::to_string(*experts) + "; each token goes to at most every expert (use top_k <= experts)");
    if (experts && *experts == 1)
        local.error(r.pathOf("experts"),
            r.pathOf("experts") + "=1 routes every token to the same MLP; use 0 for a dense model or 2 or more");

    if (hidden && heads && *hidden % *heads != 0)
        local.error(r.pathOf("heads"),
            r.pathOf("heads") + "=" + std::to_string(*heads) + " does not divide " + r.pathOf("hidden") + "="
                + std::to_string(*hidden) + "; the hidden size must split evenly into attention heads");
    if (heads && kvHeads && *heads % *kvHeads != 0)
        local.error(r.pathOf("kv_heads"),
            r.pathOf("kv_heads") + "=" + std::to_string(*kvHeads) + " does not divide " + r.pathOf("heads") + "="
                + std::to_string(*heads) + "; grouped-query attention needs heads to be a multiple of kv_heads");

    bool ok = !local.hasErrors();
    diagnostics.append(local);
    if (!ok)
        return std::nullopt;
    return m;
}

nlohmann::ordered_json toJson(const ModelSpec& m)
{
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    j["name"] = m.name;
    j["layers"] = m.layers;
    j["hidden"] = m.hidden;
    j["heads"] = m.heads;
    if (m.kvHeads > 0)
        j["kv_heads"] = m.kvHeads;
    j["ffn_hidden"] = m.ffnHidden;
    j["vocab"] = m.vocab;
    j["seq_len"] = m.seqLen;
    if (m.vocabPadMultiple != 128)
        j["vocab_pad_multiple"] = m.vocabPadMultiple;
    if (m.mlp != ModelSpec::Mlp::Gelu)
        j["mlp"] = "swiglu";
    if (m.norm != ModelSpec::Norm::LayerNorm)
        j["norm"] = "rmsnorm";
    if (m.position != ModelSpec::Position::Learned)
        j["position"] = "rope";
    if (!m.bias)
        j["bias"] = false;
    if (!m.tieEmbeddings)
        j["tie_embeddings"] = false;
    if (!m.description.empty())
        j["description"] = m.description;
    if (m.experts > 0) {
        j["experts"] = m.experts;
        j["top_k"] = m.effectiveTopK();
        if (m.moeFfnHidden > 0)
            j["moe_ffn_hidden"] = m.moeFfnHidden;
        if (m.moeLayerFreq != 1)
            j["moe_layer_freq"] = m.moeLayerFreq;
        if (m.capacityFactor > 0)
            j["capacity_factor"] = m.capacityFactor;
        if (m.auxLossCoeff != 0.01)
            j["aux_loss_coeff"] = m.auxLossCoeff;
        if (m.routerNormTopK)
            j["router_norm_topk"] = true;
        if (m.routerZLoss > 0)
            j["router_z_loss"] = m.routerZLoss;
        if (m.sharedExperts > 0)
            j["shared_experts"] = m.sharedExperts;
        if (m.sharedExpertHidden > 0)
            j["shared_expert_hidden"] = m.sharedExpertHidden;
        if (m.firstDenseLayers > 0)
            j["first_dense_layers"] = m.firstDenseLayers;
    }
    if (m.ropeTheta != 10000)
        j["rope_theta"] = m.ropeTheta;
    if (m.ropeScaling.factor > 0)
        j["rope_scaling"] = { { "rope_type", "llama3" }, { "factor", m.ropeScaling.factor },
            { "low_freq_factor", m.ropeScaling.lowFreqFactor }, { "high_freq_factor", m.ropeScaling.highFreqFactor },
            { "original_max_position_embeddings", m.ropeScaling.originalMaxPositions } };
    if (m.normEps != 1e-5)
        j["norm_eps"] = m.normEps;
    return j;
}

} // namespace loom::plan
