#pragma once
// The small GPT-2 shape the finite-difference gradient checks start from (tst_gradcheck, tst_moe_gradcheck).
#include "engine/plan/ModelSpec.h"

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

} // namespace loom::test
