#pragma once

#include "engine/plan/Diagnostics.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace loom::plan {

// The shape of a decoder-only transformer. The engine trains the GPT-2 form (the defaults); the other
// options describe published models (LLaMA: SwiGLU MLP, RMSNorm, rotary positions, grouped KV heads,
// untied LM head, no biases) so that their parameter counts and memory come out right in the planner.
struct ModelSpec {
    enum class Mlp { Gelu, SwiGlu };
    enum class Norm { LayerNorm, RmsNorm };
    enum class Position { Learned, Rope };

    std::string name;
    std::int64_t layers = 0; // transformer blocks
    std::int64_t hidden = 0; // h
    std::int64_t heads = 0; // a
    std::int64_t kvHeads = 0; // grouped-query attention; 0 means "same as heads"
    std::int64_t ffnHidden = 0; // MLP inner size
    std::int64_t vocab = 0; // V before padding
    std::int64_t seqLen = 0; // s
    std::int64_t vocabPadMultiple = 128; // vocabulary padded up to a multiple of this (Megatron's default)
    Mlp mlp = Mlp::Gelu;
    Norm norm = Norm::LayerNorm;
    Position position = Position::Learned;
    bool bias = true;
    bool tieEmbeddings = true;
    std::string description;
    // Mixture of experts (experts > 0): block l is an MoE block when l % moe_layer_freq == 0; its MLP is
    // `experts` MLPs of moe_ffn_hidden (0: ffn_hidden) and a router (h -> experts, softmax) that sends each
    // token to its top_k experts. capacity_factor 0 is dropless (every routed token is computed);
    // aux_loss_coeff weighs the load-balancing loss experts·Σ_e f_e·P_e (Switch Transformer, GShard).
    std::int64_t experts = 0;
    std::int64_t topK = 0; // 0 with experts: 2
    std::int64_t moeFfnHidden = 0;
    std::int64_t moeLayerFreq = 1;
    double capacityFactor = 0;
    double auxLossCoeff = 0.01;
    // Router and expert options of published MoE models. router_norm_topk: the k gates are the chosen
    // probabilities divided by their sum (Mixtral, DeepSeek's norm_topk_prob); router_z_loss: the coefficient
    // of ST-MoE's z-loss, mean over tokens of (log Σ_e exp(logit_e))²; shared_experts: MLPs of
    // shared_expert_hidden (0: the experts' size) every token goes through besides its routed ones (DeepSeek);
    // first_dense_layers: blocks [0, n) keep the dense MLP (DeepSeek's first_k_dense_replace).
    bool routerNormTopK = false;
    double routerZLoss = 0;
    std::int64_t sharedExperts = 0;
    std::int64_t sharedExpertHidden = 0;
    std::int64_t firstDenseLayers = 0;
    // Rotary positions: base θ of the angles p·θ^(−2i/d), and Llama 3.1's frequency scaling (factor 0: none):
    // wavelengths above original/low_freq_factor are divided by factor, those below original/high_freq_factor
    // kept, and those between blended.
    struct RopeScaling {
        double factor = 0;
        double lowFreqFactor = 1;
        double highFreqFactor = 4;
        std::int64_t originalMaxPositions = 8192;
        bool operator==(const RopeScaling&) const = default;
    };
    double ropeTheta = 10000;
    RopeScaling ropeScaling;
    double normEps = 1e-5; // LayerNorm and RMSNorm

    bool operator==(const ModelSpec&) const = default;

    std::int64_t effectiveKvHeads() const { return kvHeads > 0 ? kvHeads : heads; }
    std::int64_t headDim() const { return heads > 0 ? hidden / heads : 0; }
    // The vocabulary rounded up to a multiple of vocabPadMultiple; the embedding and LM head use this size.
    std::int64_t paddedVocab() const;

    // Parameters of one transformer block (attention, MLP, two norms): a dense block.
    std::int64_t blockParameters() const;
    // Mixture of experts (docs/formulas.md): whether block `layer` is an MoE block, how many are, the experts'
    // inner size, top_k (2 unless given), one expert's MLP, the router, and an MoE block's parameters
    // (attention, norms, router and every expert) and those a token uses (top_k experts).
    bool isMoe() const { return experts > 0; }
    bool moeLayer(std::int64_t layer) const
    {
        return experts > 0 && layer >= firstDenseLayers && layer % moeLayerFreq == 0;
    }
    std::int64_t moeLayerCount() const { return moeLayersIn(0, layers - 1); }
    std::int64_t moeLayersIn(std::int64_t first, std::int64_t last) const;
    std::int64_t expertFfn() const { return moeFfnHidden > 0 ? moeFfnHidden : ffnHidden; }
    std::int64_t effectiveTopK() const { return experts > 0 ? (topK > 0 ? topK : 2) : 0; }
    std::int64_t expertParameters() const;
    // The shared experts' inner size (each) and their parameters in one MoE block (all of them).
    std::int64_t sharedExpertFfn() const { return sharedExpertHidden > 0 ? sharedExpertHidden : expertFfn(); }
    std::int64_t sharedExpertParameters() const;
    std::int64_t routerParameters() const { return hidden * experts; }
    std::int64_t moeBlockParameters() const;
    std::int64_t moeBlockActiveParameters() const;
    // Parameters a token goes through (all of them for dense models).
    std::int64_t activeParameterCount() const;
    // Token embedding (padded vocabulary), position embedding when learned.
    std::int64_t embeddingParameters() const;
    // Final norm, plus the LM head when it is not tied to the embedding.
    std::int64_t headParameters() const;
    // Everything, with the vocabulary as published (unpadded), so totals match published counts.
    std::int64_t parameterCount() const;
};

// Reads a model from JSON (an inline layout model or a model profile). `path` prefixes messages.
// Unknown keys warn. Returns nullopt when any field is missing or wrong; every problem is reported.
std::optional<ModelSpec> parseModelSpec(
    const nlohmann::json& object, const std::string& path, Diagnostics& diagnostics);
nlohmann::ordered_json toJson(const ModelSpec& model);

} // namespace loom::plan
