#pragma once

#include "engine/plan/ModelSpec.h"

#include <string>

namespace loom::train {

// Hugging Face's layout of a model's weights in safetensors, both ways, through Loom's checkpoint folder
// (global tensors), so it works for any layout: loading shards over tp and pp the way resuming does.
//
// Names and shapes are transformers' (GPT2LMHeadModel; LlamaForCausalLM; MixtralForCausalLM for a Llama-form
// MoE; DeepSeek-MoE's names when the model has shared experts or leading dense layers). nn.Linear weights
// are (out, in), the transpose of Loom's (in, out); GPT-2's Conv1D weights are (in, out) like Loom's. Loom
// turns the adjacent pairs (2i, 2i+1) of each head by RoPE, transformers' rotate_half the pairs (i, i + d/2):
// the q and k projections' outputs are permuted within each head (Loom feature 2i is HF feature i, 2i+1 is
// i + d/2), which leaves every attention score as it was. The vocabulary is unpadded in the file (Loom's
// padding rows are zero on import).
//
// Refused, naming what cannot be expressed: GPT-2 blocks with experts, Llama-form blocks with LayerNorm,
// GELU MLPs, learned positions or biases.
void checkHfCompatible(const plan::ModelSpec& model);
// Writes DIR/model.safetensors (F32, or BF16 when `bf16`) and DIR/config.json from checkpoint `folder`.
void exportSafetensors(const std::string& folder, const plan::ModelSpec& model, const std::string& dir, bool bf16);
// Makes a step-0 checkpoint in `folder` from DIR/model.safetensors, or from the files that
// DIR/model.safetensors.index.json's weight_map names. Every tensor the model needs must be there with its
// shape; others are refused by name.
void importSafetensors(
    const std::string& dir, const plan::ModelSpec& model, const std::string& layoutJson, const std::string& folder);
// transformers' config.json for the model (what exportSafetensors writes).
std::string hfConfigJson(const plan::ModelSpec& model);

} // namespace loom::train
