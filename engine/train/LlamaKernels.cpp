// The CPU kernels of the Llama block: RMSNorm, SwiGLU and rotary positions (declared in CpuKernels.h).
#include "engine/train/CpuKernels.h"
#include "engine/train/Rope.h"

#include <cmath>
#include <vector>

namespace loom::train {

namespace {

float sigmoid(float x)
{
    return 1.0f / (1.0f + std::exp(-x));
}

// Turns every head's pairs of each row by ±positions[r]·freq[i].
void rotate(float* x, const std::int32_t* positions, int rows, int heads, int d, const double* freq, double sign)
{
    const int half = d / 2;
    std::vector<float> cosines(static_cast<std::size_t>(half)), sines(static_cast<std::size_t>(half));
    for (int r = 0; r < rows; ++r) {
        for (int i = 0; i < half; ++i) {
            const double angle = sign * positions[r] * freq[i];
            cosines[static_cast<std::size_t>(i)] = static_cast<float>(std::cos(angle));
            sines[static_cast<std::size_t>(i)] = static_cast<float>(std::sin(angle));
        }
        float* row = x + static_cast<std::size_t>(r) * heads * d;
        for (int h = 0; h < heads; ++h)
            for (int i = 0; i < half; ++i) {
                float* p = row + h * d + 2 * i;
                const float c = cosines[static_cast<std::size_t>(i)], s = sines[static_cast<std::size_t>(i)];
                const float a = p[0], b = p[1];
                p[0] = a * c - b * s;
                p[1] = a * s + b * c;
            }
    }
}

} // namespace

void CpuKernels::rmsNormForward(
    float* out, float* rstd, const float* in, const float* gamma, int rows, int cols, float eps)
{
    for (int r = 0; r < rows; ++r) {
        const float* x = in + static_cast<std::size_t>(r) * cols;
        float* y = out + static_cast<std::size_t>(r) * cols;
        double ms = 0;
        for (int c = 0; c < cols; ++c)
            ms += static_cast<double>(x[c]) * x[c];
        const float s = static_cast<float>(1.0 / std::sqrt(ms / cols + eps));
        for (int c = 0; c < cols; ++c)
            y[c] = x[c] * s * gamma[c];
        rstd[r] = s;
    }
}

void CpuKernels::rmsNormBackward(float* dIn, float* dGamma, const float* dOut, const float* in, const float* rstd,
    const float* gamma, int rows, int cols)
{
    // y = x·s·g with s = (mean(x²)+ε)^(−1/2): dx = s·(dy·g − x̂·mean(dy·g·x̂)), x̂ = x·s.
    for (int r = 0; r < rows; ++r) {
        const float* x = in + static_cast<std::size_t>(r) * cols;
        const float* dy = dOut + static_cast<std::size_t>(r) * cols;
        float* dx = dIn + static_cast<std::size_t>(r) * cols;
        const float s = rstd[r];
        double sumDnX = 0;
        for (int c = 0; c < cols; ++c) {
            const float xhat = x[c] * s;
            sumDnX += dy[c] * gamma[c] * xhat;
            dGamma[c] += dy[c] * xhat;
        }
        const float b = static_cast<float>(sumDnX / cols);
        for (int c = 0; c < cols; ++c)
            dx[c] += (dy[c] * gamma[c] - x[c] * s * b) * s;
    }
}

void CpuKernels::normInputFromOutput(float* in, const float* out, const float* mean, const float* rstd,
    const float* gamma, const float* beta, int rows, int cols)
{
    for (int r = 0; r < rows; ++r) {
        const float* y = out + static_cast<std::size_t>(r) * cols;
        float* x = in + static_cast<std::size_t>(r) * cols;
        const float shift = mean ? mean[r] : 0.0f, scale = 1.0f / rstd[r];
        for (int c = 0; c < cols; ++c)
            x[c] = (y[c] - (beta ? beta[c] : 0.0f)) / gamma[c] * scale + shift;
    }
}

void CpuKernels::swigluForward(float* out, const float* gate, const float* up, std::size_t n)
{
    for (std::size_t i = 0; i < n; ++i)
        out[i] = gate[i] * sigmoid(gate[i]) * up[i];
}

void CpuKernels::swigluBackward(
    float* dGate, float* dUp, const float* dOut, const float* gate, const float* up, std::size_t n)
{
    for (std::size_t i = 0; i < n; ++i) {
        const float g = gate[i], sg = sigmoid(g);
        dUp[i] = dOut[i] * g * sg;
        dGate[i] = dOut[i] * up[i] * sg * (1.0f + g * (1.0f - sg)); // silu'(g) = σ(g)·(1 + g·(1 − σ(g)))
    }
}

void CpuKernels::ropeForward(float* x, const std::int32_t* positions, int rows, int heads, int d, const double* freq)
{
    rotate(x, positions, rows, heads, d, freq, 1.0);
}

void CpuKernels::ropeBackward(float* dx, const std::int32_t* positions, int rows, int heads, int d, const double* freq)
{
    rotate(dx, positions, rows, heads, d, freq, -1.0);
}

std::vector<double> ropeFrequencies(const plan::ModelSpec& model)
{
    const int d = static_cast<int>(model.headDim());
    std::vector<double> freq(static_cast<std::size_t>(d / 2));
    const auto& scaling = model.ropeScaling;
    const double pi = std::acos(-1.0), original = static_cast<double>(scaling.originalMaxPositions);
    for (int i = 0; i < d / 2; ++i) {
        double f = std::pow(model.ropeTheta, -2.0 * i / d);
        if (scaling.factor > 0) { // Llama 3.1: long wavelengths slowed by factor, short ones kept, a blend between
            const double wavelength = 2 * pi / f;
            if (wavelength > original / scaling.lowFreqFactor) {
                f /= scaling.factor;
            } else if (wavelength >= original / scaling.highFreqFactor) {
                const double smooth = (original / wavelength - scaling.lowFreqFactor)
                    / (scaling.highFreqFactor - scaling.lowFreqFactor);
                f = (1 - smooth) * f / scaling.factor + smooth * f;
            }
        }
        freq[static_cast<std::size_t>(i)] = f;
    }
    return freq;
}

} // namespace loom::train
