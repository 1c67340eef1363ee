#include "engine/plan/ModelSpec.h"

#include "engine/plan/JsonFields.h"

#include <nlohmann/json.hpp>

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

std::int64_t ModelSpec::moeBlockParameters() const
{
    // A dense block without its MLP, plus the router and the experts.
    const std::int64_t f = ffnHidden, gates = mlp == Mlp::SwiGlu ? 3 : 2;
    const std::int64_t denseMlp = gates * hidden * f + (bias ? f * (mlp == Mlp::SwiGlu ? 2 : 1) + hidden : 0);
    return blockParameters() - denseMlp + routerParameters() + experts * expertParameters();
}

std::int64_t ModelSpec::moeBlockActiveParameters() const
{
    return moeBlockParameters() - (experts - effectiveTopK()) * expertParameters();
}

std::int64_t ModelSpec::moeLayersIn(std::int64_t first, std::int64_t last) const
{
    if (experts <= 0 || last < first)
        return 0;
    auto upTo = [&](std::int64_t l) { return l < 0 ? 0 : l / moeLayerFreq + 1; }; // MoE blocks in [0, l]
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
    r.warnUnknown(
        { "name", "layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab", "seq_len", "vocab_pad_multiple",
            "mlp", "norm", "position", "bias", "tie_embeddings", "description", "source", "loom_profile", "kind",
            "experts", "top_k", "moe_ffn_hidden", "moe_layer_freq", "capacity_factor", "aux_loss_coeff" });

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
    }
    return j;
}

} // namespace loom::plan
