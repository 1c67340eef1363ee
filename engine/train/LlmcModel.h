#pragma once

#include "engine/plan/ModelSpec.h"

#include <string>

namespace loom::train {

// GPT-2 weights in llm.c's model-file format, so models move between Loom and llm.c: 256 int32 header words
// (magic 20240326, version 3, max_seq_len, vocab, layers, heads, channels, padded vocab), then fp32 tensors
// wte, wpe, ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb, lnfw, lnfb, with
// llm.c's (out, in) weight layout. Conversion goes through Loom's checkpoint folder (global tensors), so it
// works for any layout. Throws std::runtime_error naming the file and the problem.

// The model must be llm.c's GPT-2: GELU MLP of 4·hidden, LayerNorm, learned positions, biases, tied head.
void checkLlmcCompatible(const plan::ModelSpec& model);
// Writes the parameters of checkpoint `folder` (made for `model`) as an llm.c model file.
void exportLlmc(const std::string& folder, const plan::ModelSpec& model, const std::string& file);
// Makes a step-0 checkpoint in `folder` (zero optimizer state) from an llm.c model file.
void importLlmc(
    const std::string& file, const plan::ModelSpec& model, const std::string& layoutJson, const std::string& folder);

} // namespace loom::train
