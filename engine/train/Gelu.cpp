#include "engine/train/Gelu.h"

#include <cmath>

namespace loom::train::gelu {

namespace {
constexpr float kGeluScale = 0.7978845608028654f; // √(2/π)
}

void forward(float* out, const float* in, std::size_t n)
{
    for (std::size_t i = 0; i < n; ++i) {
        const float x = in[i];
        out[i] = 0.5f * x * (1.0f + std::tanh(kGeluScale * (x + 0.044715f * x * x * x)));
    }
}

void backward(float* dIn, const float* dOut, const float* in, std::size_t n)
{
    for (std::size_t i = 0; i < n; ++i) {
        const float x = in[i];
        const float u = kGeluScale * (x + 0.044715f * x * x * x);
        const float t = std::tanh(u);
        const float du = kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
        dIn[i] = dOut[i] * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du);
    }
}

} // namespace loom::train::gelu
