#pragma once

#include <cstddef>

// GELU, tanh form, in a translation unit of its own: it is compiled with -ffast-math so the tanh calls
// vectorise (glibc's libmvec); nothing here compares against infinities.
namespace loom::train::gelu {

void forward(float* out, const float* in, std::size_t n);
void backward(float* dIn, const float* dOut, const float* in, std::size_t n);

} // namespace loom::train::gelu
