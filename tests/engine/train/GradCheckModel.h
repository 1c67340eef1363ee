#pragma once
// What the finite-difference gradient checks share (tst_gradcheck, tst_moe_gradcheck): the small GPT-2 shape
// they start from, its weights and a random batch.
#include "engine/plan/ModelSpec.h"
#include "engine/train/Parameters.h"

#include <cstdint>
#include <random>
#include <vector>

namespace loom::test {

inline plan::ModelSpec smallGradCheckModel()
{
    plan::ModelSpec m;
    m.name = "check";
    m.layers = 2;
    m.hidden = 16;
    m.heads = 2;
    m.ffnHidden = 32;
    m.vocab = 20;
    m.vocabPadMultiple = 8; // padded to 24: the padding must not change the loss
    m.seqLen = 6;
    return m;
}

// Weights from `seed` made ten times GPT-2's 0.02 so every path carries a visible gradient, and norm gains
// (tensors named "….g") back near 1.
inline void initialiseForGradCheck(train::ParamSet& params, std::uint64_t seed)
{
    params.initialise(seed);
    for (auto& v : params.values)
        v *= 10.0f;
    for (const auto& s : params.specs())
        if (s.name.size() > 2 && s.name.compare(s.name.size() - 2, 2, ".g") == 0)
            for (std::size_t k = 0; k < s.size(); ++k)
                params.values[s.offset + k] = 1.0f + 0.1f * params.values[s.offset + k];
}

struct GradCheckBatch {
    std::vector<std::int32_t> tokens, targets;
};

// T random tokens and targets of the model's vocabulary.
inline GradCheckBatch randomBatch(const plan::ModelSpec& m, int T, unsigned seed)
{
    std::mt19937 rng(seed);
    GradCheckBatch b;
    for (int t = 0; t < T; ++t) {
        b.tokens.push_back(static_cast<std::int32_t>(rng() % m.vocab));
        b.targets.push_back(static_cast<std::int32_t>(rng() % m.vocab));
    }
    return b;
}

} // namespace loom::test
