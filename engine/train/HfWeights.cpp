#include "engine/train/HfWeights.h"

#include "engine/train/Safetensors.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>

namespace loom::train {

namespace fs = std::filesystem;

namespace {

using Tensor = std::vector<float>;
using M = plan::ModelSpec;

enum class Form { Same, Transpose, Rope, Vocab, Positions };

// One tensor: Loom's name and global shape (rows, cols), transformers' name, and how one becomes the other.
// `heads` is the q or k projection's head count (Rope).
struct Entry {
    std::string loom, hf;
    std::int64_t rows, cols;
    Form form;
    std::int64_t heads = 0;
};

bool gpt2Form(const M& m)
{
    return m.mlp == M::Mlp::Gelu && m.norm == M::Norm::LayerNorm && m.position == M::Position::Learned && m.bias
        && m.tieEmbeddings && m.effectiveKvHeads() == m.heads;
}

bool deepseekNames(const M& m)
{
    return m.sharedExperts > 0 || m.firstDenseLayers > 0;
}

std::vector<Entry> gpt2Entries(const M& m)
{
    const std::int64_t h = m.hidden, f = m.ffnHidden;
    std::vector<Entry> e { { "wte", "transformer.wte.weight", m.paddedVocab(), h, Form::Vocab },
        { "wpe", "transformer.wpe.weight", m.seqLen, h, Form::Positions } };
    for (std::int64_t l = 0; l < m.layers; ++l) {
        const std::string p = "h" + std::to_string(l) + ".", q = "transformer.h." + std::to_string(l) + ".";
        for (const Entry& x : std::vector<Entry> { { "ln1.g", "ln_1.weight", 1, h, Form::Same },
                 { "ln1.b", "ln_1.bias", 1, h, Form::Same }, { "qkv.w", "attn.c_attn.weight", h, 3 * h, Form::Same },
                 { "qkv.b", "attn.c_attn.bias", 1, 3 * h, Form::Same },
                 { "proj.w", "attn.c_proj.weight", h, h, Form::Same },
                 { "proj.b", "attn.c_proj.bias", 1, h, Form::Same }, { "ln2.g", "ln_2.weight", 1, h, Form::Same },
                 { "ln2.b", "ln_2.bias", 1, h, Form::Same }, { "fc.w", "mlp.c_fc.weight", h, f, Form::Same },
                 { "fc.b", "mlp.c_fc.bias", 1, f, Form::Same }, { "fcproj.w", "mlp.c_proj.weight", f, h, Form::Same },
                 { "fcproj.b", "mlp.c_proj.bias", 1, h, Form::Same } })
            e.push_back({ p + x.loom, q + x.hf, x.rows, x.cols, x.form });
    }
    e.push_back({ "lnf.g", "transformer.ln_f.weight", 1, h, Form::Same });
    e.push_back({ "lnf.b", "transformer.ln_f.bias", 1, h, Form::Same });
    return e;
}

void addMlp(
    std::vector<Entry>& e, const std::string& loom, const std::string& hf, std::int64_t h, std::int64_t f, bool mixtral)
{
    e.push_back({ loom + "gate.w", hf + (mixtral ? "w1.weight" : "gate_proj.weight"), h, f, Form::Transpose });
    e.push_back({ loom + "up.w", hf + (mixtral ? "w3.weight" : "up_proj.weight"), h, f, Form::Transpose });
    e.push_back({ loom + "down.w", hf + (mixtral ? "w2.weight" : "down_proj.weight"), f, h, Form::Transpose });
}

std::vector<Entry> llamaEntries(const M& m)
{
    const std::int64_t h = m.hidden, d = m.headDim(), kv = m.effectiveKvHeads();
    std::vector<Entry> e { { "wte", "model.embed_tokens.weight", m.paddedVocab(), h, Form::Vocab } };
    const bool mixtral = !deepseekNames(m);
    for (std::int64_t l = 0; l < m.layers; ++l) {
        const std::string p = "h" + std::to_string(l) + ".", q = "model.layers." + std::to_string(l) + ".";
        e.push_back({ p + "ln1.g", q + "input_layernorm.weight", 1, h, Form::Same });
        e.push_back({ p + "q.w", q + "self_attn.q_proj.weight", h, m.heads * d, Form::Rope, m.heads });
        e.push_back({ p + "k.w", q + "self_attn.k_proj.weight", h, kv * d, Form::Rope, kv });
        e.push_back({ p + "v.w", q + "self_attn.v_proj.weight", h, kv * d, Form::Transpose });
        e.push_back({ p + "proj.w", q + "self_attn.o_proj.weight", m.heads * d, h, Form::Transpose });
        e.push_back({ p + "ln2.g", q + "post_attention_layernorm.weight", 1, h, Form::Same });
        if (!m.moeLayer(l)) {
            addMlp(e, p, q + "mlp.", h, m.ffnHidden, false);
            continue;
        }
        const std::string moe = q + (mixtral ? "block_sparse_moe." : "mlp.");
        e.push_back({ p + "router.w", moe + "gate.weight", h, m.experts, Form::Transpose });
        for (std::int64_t x = 0; x < m.experts; ++x)
            addMlp(e, p + "expert" + std::to_string(x) + ".", moe + "experts." + std::to_string(x) + ".", h,
                m.expertFfn(), mixtral);
        if (m.sharedExperts > 0)
            addMlp(e, p + "shared.", moe + "shared_experts.", h, m.sharedExperts * m.sharedExpertFfn(), false);
    }
    e.push_back({ "lnf.g", "model.norm.weight", 1, h, Form::Same });
    if (!m.tieEmbeddings)
        e.push_back({ "lm_head", "lm_head.weight", m.paddedVocab(), h, Form::Vocab });
    return e;
}

std::vector<Entry> entries(const M& m)
{
    checkHfCompatible(m);
    return gpt2Form(m) ? gpt2Entries(m) : llamaEntries(m);
}

// Loom feature `j` of a head of d: transformers' rotate_half feature.
std::int64_t hfFeature(std::int64_t j, std::int64_t d)
{
    return j % 2 == 0 ? j / 2 : j / 2 + d / 2;
}

std::vector<std::int64_t> hfShape(const Entry& e, const M& m)
{
    switch (e.form) {
    case Form::Transpose:
    case Form::Rope:
        return { e.cols, e.rows };
    case Form::Vocab:
        return { m.vocab, e.cols };
    case Form::Positions:
        return { e.rows, e.cols };
    case Form::Same:
        break;
    }
    return e.rows == 1 ? std::vector<std::int64_t> { e.cols } : std::vector<std::int64_t> { e.rows, e.cols };
}

// Loom (rows × cols) -> transformers' tensor.
Tensor toHf(const Entry& e, const Tensor& t, const M& m)
{
    const auto R = static_cast<std::size_t>(e.rows), C = static_cast<std::size_t>(e.cols);
    if (e.form == Form::Vocab)
        return Tensor(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(m.vocab) * C));
    if (e.form != Form::Transpose && e.form != Form::Rope)
        return t;
    Tensor o(t.size());
    const std::int64_t d = m.headDim();
    for (std::size_t c = 0; c < C; ++c) {
        std::size_t row = c; // transformers' output feature of Loom column c
        if (e.form == Form::Rope) {
            const auto j = static_cast<std::int64_t>(c) % d, head = static_cast<std::int64_t>(c) / d;
            row = static_cast<std::size_t>(head * d + hfFeature(j, d));
        }
        for (std::size_t r = 0; r < R; ++r)
            o[row * R + r] = t[r * C + c];
    }
    return o;
}

// transformers' tensor -> Loom (rows × cols).
Tensor fromHf(const Entry& e, const Tensor& t, const M& m)
{
    const auto R = static_cast<std::size_t>(e.rows), C = static_cast<std::size_t>(e.cols);
    if (e.form == Form::Vocab) {
        Tensor o(R * C, 0.0f); // padding rows are zero
        std::copy(t.begin(), t.end(), o.begin());
        return o;
    }
    if (e.form != Form::Transpose && e.form != Form::Rope)
        return t;
    Tensor o(t.size());
    const std::int64_t d = m.headDim();
    for (std::size_t c = 0; c < C; ++c) {
        std::size_t row = c;
        if (e.form == Form::Rope) {
            const auto j = static_cast<std::int64_t>(c) % d, head = static_cast<std::int64_t>(c) / d;
            row = static_cast<std::size_t>(head * d + hfFeature(j, d));
        }
        for (std::size_t r = 0; r < R; ++r)
            o[r * C + c] = t[row * R + r];
    }
    return o;
}

Tensor readLoom(const fs::path& folder, const std::string& name, std::size_t count)
{
    std::ifstream in(folder / (name + ".f32"), std::ios::binary);
    Tensor t(count);
    if (!in.read(reinterpret_cast<char*>(t.data()), static_cast<std::streamsize>(count * 4)))
        throw std::runtime_error("the checkpoint " + folder.string() + " lacks a complete " + name);
    return t;
}

void writeLoom(const fs::path& folder, const std::string& name, const Tensor& t)
{
    const Tensor zeros(t.size(), 0.0f);
    for (const auto& [suffix, data] :
        { std::pair { ".f32", &t }, { ".adam_m.f32", &zeros }, { ".adam_v.f32", &zeros } }) {
        std::ofstream out(folder / (name + suffix), std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(data->data()), static_cast<std::streamsize>(data->size() * 4));
        if (!out)
            throw std::runtime_error("cannot write " + (folder / name).string() + " (is the disk full?)");
    }
}

} // namespace

void checkHfCompatible(const M& m)
{
    const std::string why = "model " + m.name + " has no Hugging Face layout: ";
    if (gpt2Form(m)) {
        if (m.isMoe())
            throw std::runtime_error(why
                + "GPT-2 blocks with experts (experts) are not a transformers model; use "
                  "Llama-form blocks (mlp swiglu, norm rmsnorm, position rope)");
        return;
    }
    if (m.norm != M::Norm::RmsNorm)
        throw std::runtime_error(why + "Llama-form blocks with norm \"layernorm\" (transformers' Llama has RMSNorm)");
    if (m.mlp != M::Mlp::SwiGlu)
        throw std::runtime_error(why + "Llama-form blocks with mlp \"gelu\" (transformers' Llama has SwiGLU)");
    if (m.position != M::Position::Rope)
        throw std::runtime_error(why + "Llama-form blocks with position \"learned\" (transformers' Llama has RoPE)");
    if (m.bias)
        throw std::runtime_error(why
            + "Llama-form blocks with bias true (transformers' Llama has no biases); set "
              "bias false");
}

void exportSafetensors(const std::string& folderText, const M& m, const std::string& dir, bool bf16)
{
    const fs::path folder(folderText);
    std::vector<SafeTensorOut> out;
    for (const Entry& e : entries(m)) {
        const Tensor t = readLoom(folder, e.loom, static_cast<std::size_t>(e.rows * e.cols));
        out.push_back({ e.hf, hfShape(e, m), toHf(e, t, m) });
    }
    fs::create_directories(dir);
    writeSafetensors((fs::path(dir) / "model.safetensors").string(), out, bf16, { { "format", "pt" } });
    std::ofstream config(fs::path(dir) / "config.json", std::ios::trunc);
    config << hfConfigJson(m);
    if (!config)
        throw std::runtime_error("cannot write " + (fs::path(dir) / "config.json").string());
}

void importSafetensors(const std::string& dir, const M& m, const std::string& layoutJson, const std::string& folderText)
{
    const auto list = entries(m);
    std::vector<SafetensorsFile> files;
    const fs::path index = fs::path(dir) / "model.safetensors.index.json";
    if (fs::exists(index)) {
        std::ifstream in(index);
        const auto j = nlohmann::json::parse(in, nullptr, false);
        if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
            throw std::runtime_error(index.string() + ": expected an object with a weight_map of tensor -> file");
        std::set<std::string> names;
        for (const auto& [tensor, file] : j["weight_map"].items()) {
            const std::string f = file.is_string() ? file.get<std::string>() : "";
            if (f.empty() || f.find('/') != std::string::npos || f.find("..") != std::string::npos)
                throw std::runtime_error(index.string() + ": weight_map." + tensor.substr(0, 100)
                    + " is not a file name in the same folder");
            names.insert(f);
        }
        for (const auto& f : names)
            files.push_back(SafetensorsFile::read((fs::path(dir) / f).string()));
    } else {
        files.push_back(SafetensorsFile::read((fs::path(dir) / "model.safetensors").string()));
    }
    std::set<std::string> wanted;
    for (const Entry& e : list)
        wanted.insert(e.hf);
    for (const auto& f : files)
        for (const auto& [name, t] : f.tensors())
            if (!wanted.count(name) && name.find("rotary_emb.inv_freq") == std::string::npos)
                throw std::runtime_error(f.path() + ": tensor \"" + name.substr(0, 200) + "\" has no place in model "
                    + m.name + " (is the model profile the one the weights were made for?)");
    const fs::path folder(folderText);
    fs::remove_all(folder);
    fs::create_directories(folder);
    for (const Entry& e : list) {
        const SafetensorsFile* holder = nullptr;
        for (const auto& f : files)
            if (f.tensors().count(e.hf))
                holder = &f;
        if (!holder)
            throw std::runtime_error(dir + ": no file holds tensor \"" + e.hf + "\" (Loom's " + e.loom + ") that model "
                + m.name + " needs");
        auto shape = hfShape(e, m);
        if (e.form == Form::Positions) { // the first seq_len of the file's positions
            const auto& t = holder->tensors().at(e.hf);
            if (t.shape.size() == 2 && t.shape[0] >= e.rows && t.shape[1] == e.cols)
                shape[0] = t.shape[0];
        }
        Tensor values = holder->floats(e.hf, shape);
        values.resize(static_cast<std::size_t>(e.rows * e.cols));
        writeLoom(folder, e.loom, fromHf(e, values, m));
    }
    nlohmann::ordered_json meta = { { "loom_checkpoint", 1 }, { "step", 0 }, { "adam_steps", 0 }, { "seed", 0 },
        { "model", plan::toJson(m) }, { "layout", nlohmann::json::parse(layoutJson) }, { "imported_from", dir } };
    std::ofstream(folder / "checkpoint.json") << meta.dump(2) << "\n";
}

std::string hfConfigJson(const M& m)
{
    nlohmann::ordered_json j;
    if (gpt2Form(m)) {
        j = { { "architectures", { "GPT2LMHeadModel" } }, { "model_type", "gpt2" }, { "vocab_size", m.vocab },
            { "n_positions", m.seqLen }, { "n_embd", m.hidden }, { "n_layer", m.layers }, { "n_head", m.heads },
            { "n_inner", m.ffnHidden }, { "activation_function", "gelu_new" }, { "layer_norm_epsilon", m.normEps },
            { "tie_word_embeddings", true } };
        return j.dump(2) + "\n";
    }
    const bool moe = m.isMoe(), deepseek = moe && deepseekNames(m);
    j = { { "architectures",
              { !moe             ? "LlamaForCausalLM"
                      : deepseek ? "DeepseekForCausalLM"
                                 : "MixtralForCausalLM" } },
        { "model_type",
            !moe           ? "llama"
                : deepseek ? "deepseek"
                           : "mixtral" },
        { "vocab_size", m.vocab }, { "hidden_size", m.hidden }, { "intermediate_size", m.ffnHidden },
        { "num_hidden_layers", m.layers }, { "num_attention_heads", m.heads },
        { "num_key_value_heads", m.effectiveKvHeads() }, { "head_dim", m.headDim() },
        { "max_position_embeddings", m.seqLen }, { "rms_norm_eps", m.normEps }, { "rope_theta", m.ropeTheta },
        { "tie_word_embeddings", m.tieEmbeddings }, { "hidden_act", "silu" }, { "attention_bias", false },
        { "mlp_bias", false } };
    if (m.ropeScaling.factor > 0)
        j["rope_scaling"] = { { "rope_type", "llama3" }, { "factor", m.ropeScaling.factor },
            { "low_freq_factor", m.ropeScaling.lowFreqFactor }, { "high_freq_factor", m.ropeScaling.highFreqFactor },
            { "original_max_position_embeddings", m.ropeScaling.originalMaxPositions } };
    if (moe && !deepseek) {
        j["num_local_experts"] = m.experts;
        j["num_experts_per_tok"] = m.effectiveTopK();
        j["router_aux_loss_coef"] = m.auxLossCoeff;
        if (m.expertFfn() != m.ffnHidden || m.moeLayerFreq != 1 || !m.routerNormTopK)
            j["loom_note"] = "transformers' Mixtral has every block MoE, experts of intermediate_size and "
                             "renormalised top-k; this model differs (see its Loom profile)";
    } else if (deepseek) {
        j["n_routed_experts"] = m.experts;
        j["num_experts_per_tok"] = m.effectiveTopK();
        j["moe_intermediate_size"] = m.expertFfn();
        j["n_shared_experts"] = m.sharedExperts;
        j["first_k_dense_replace"] = m.firstDenseLayers;
        j["moe_layer_freq"] = m.moeLayerFreq;
        j["norm_topk_prob"] = m.routerNormTopK;
        j["aux_loss_alpha"] = m.auxLossCoeff;
        if (m.sharedExperts > 0 && m.sharedExpertFfn() != m.expertFfn())
            j["loom_note"] = "DeepSeek-MoE's shared experts have moe_intermediate_size each; this model's have "
                + std::to_string(m.sharedExpertFfn()) + " (mlp.shared_experts holds all of them as one MLP)";
    }
    return j.dump(2) + "\n";
}

} // namespace loom::train
