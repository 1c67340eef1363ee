#pragma once

#include "engine/device/KernelMath.h"

#include <cstddef>
#include <cstdint>
#include <string>

// Between the C++ side of the CUDA parts (CudaDevice.cpp, CudaKernels.cpp) and the kernels (*.cu): plain
// launch functions, streams as void* (a cudaStream_t), so no C++ file needs nvcc. Each launch returns at
// once; the caller checks cudaGetLastError. Shapes are CudaKernels.h's (row-major).
namespace loom::device {

// Throws DeviceError "<device>: <call> failed: <name> (<text>)" unless status is cudaSuccess (0).
void checkCuda(int status, const std::string& device, const char* call);

void launchFillFloats(float* dst, float value, std::size_t n, void* stream);

// CudaElementwise.cu
void launchGelu(float* out, const float* in, std::size_t n, void* stream);
void launchGeluBackward(float* dIn, const float* dOut, const float* in, std::size_t n, void* stream);
void launchSwiglu(float* out, const float* gate, const float* up, std::size_t n, void* stream);
void launchSwigluBackward(
    float* dGate, float* dUp, const float* dOut, const float* gate, const float* up, std::size_t n, void* stream);
void launchRope(
    float* x, const std::int32_t* positions, int rows, int heads, int d, const double* freq, double sign, void* stream);
void launchAddBias(float* out, const float* bias, int rows, int cols, void* stream);
void launchBiasBackward(float* dBias, const float* dOut, int rows, int cols, void* stream);
void launchToBf16(std::uint16_t* out, const float* in, std::size_t n, void* stream);
void launchToFp16(std::uint16_t* out, const float* in, std::size_t n, void* stream);
void launchFromBf16(float* out, const std::uint16_t* in, std::size_t n, void* stream);
void launchFromFp16(float* out, const std::uint16_t* in, std::size_t n, void* stream);

// CudaNorms.cu
void launchLayerNorm(float* out, float* mean, float* rstd, const float* in, const float* gamma, const float* beta,
    int rows, int cols, float eps, void* stream);
void launchLayerNormBackward(float* dIn, float* dGamma, float* dBeta, const float* dOut, const float* in,
    const float* mean, const float* rstd, const float* gamma, int rows, int cols, void* stream);
void launchRmsNorm(
    float* out, float* rstd, const float* in, const float* gamma, int rows, int cols, float eps, void* stream);
void launchRmsNormBackward(float* dIn, float* dGamma, const float* dOut, const float* in, const float* rstd,
    const float* gamma, int rows, int cols, void* stream);
void launchNormInputFromOutput(float* in, const float* out, const float* mean, const float* rstd, const float* gamma,
    const float* beta, int rows, int cols, void* stream);

// CudaSoftmax.cu: P rows of s (rows = batch·s, row r is query r % s), scores already scaled.
void launchCausalSoftmax(float* p, int rows, int s, void* stream);
void launchCausalSoftmaxBackward(float* dP, const float* p, int rows, int s, float scale, void* stream);
void launchCrossEntropyStats(const float* z, int T, int Vl, std::int64_t first, std::int64_t vocab,
    const std::int32_t* targets, float* max, float* sum, float* targetShift, void* stream);
void launchCrossEntropyGradient(float* z, int T, int Vl, std::int64_t first, std::int64_t vocab, const float* max,
    const float* sum, const std::int32_t* targets, float scale, void* stream);

// CudaOptimizer.cu (built with -fmad=false)
void launchAdamw(float* params, const float* grads, float* m, float* v, const std::uint8_t* decayMask, std::size_t n,
    const math::AdamStep& step, void* stream);
// Adds Σ x² into *sum (device memory, zeroed by the caller).
void launchSumOfSquares(double* sum, const float* x, std::size_t n, void* stream);
// grads *= invScale; *overflow (device memory, zeroed by the caller) becomes 1 if any was not finite.
void launchUnscaleAndCheck(float* grads, std::size_t n, float invScale, int* overflow, void* stream);

} // namespace loom::device
