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

    bool operator==(const ModelSpec&) const = default;

    std::int64_t effectiveKvHeads() const { return kvHeads > 0 ? kvHeads : heads; }
    std::int64_t headDim() const { return heads > 0 ? hidden / heads : 0; }
    // The vocabulary rounded up to a multiple of vocabPadMultiple; the embedding and LM head use this size.
    std::int64_t paddedVocab() const;

    // Parameters of one transformer block (attention, MLP, two norms).
    std::int64_t blockParameters() const;
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
