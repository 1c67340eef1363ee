#pragma once

#include "engine/plan/ModelSpec.h"

#include <vector>

namespace loom::train {

// The d/2 rotary frequencies of a model (d its head size): θ^(−2i/d) with θ = rope_theta, and with
// rope_scaling Llama 3.1's rescaling of them (Meta's reference `apply_scaling`, as Hugging Face's "llama3"
// rope type): a wavelength 2π/f longer than original/low_freq_factor is divided by factor, one shorter than
// original/high_freq_factor kept, and one between blended linearly in original/wavelength.
std::vector<double> ropeFrequencies(const plan::ModelSpec& model);

} // namespace loom::train
