// Element-wise kernels: grid-stride loops over KernelMath.h's functions.
#include "engine/device/CudaGrid.cuh"
#include "engine/device/CudaLaunch.h"

namespace loom::device {

namespace km = math;
using namespace grid;

namespace {

__global__ void fillKernel(float* dst, float value, std::size_t n)
{
    for (std::size_t i = firstIndex(); i < n; i += strideAll())
        dst[i] = value;
}

__global__ void geluKernel(float* out, const float* in, std::size_t n)
{
    for (std::size_t i = firstIndex(); i < n; i += strideAll())
        out[i] = km::geluForward(in[i]);
}

__global__ void geluBackwardKernel(float* dIn, const float* dOut, const float* in, std::size_t n)
{
    for (std::size_t i = firstIndex(); i < n; i += strideAll())
        dIn[i] = km::geluBackward(dOut[i], in[i]);
}

__global__ void swigluKernel(float* out, const float* gate, const float* up, std::size_t n)
{
    for (std::size_t i = firstIndex(); i < n; i += strideAll())
        out[i] = km::swigluForward(gate[i], up[i]);
}

__global__ void swigluBackwardKernel(
    float* dGate, float* dUp, const float* dOut, const float* gate, const float* up, std::size_t n)
{
    for (std::size_t i = firstIndex(); i < n; i += strideAll()) {
        float dg, du;
        km::swigluBackward(dOut[i], gate[i], up[i], dg, du);
        dGate[i] = dg;
        dUp[i] = du;
    }
}

// One thread per (row, head, pair); the angle in double, as the CPU takes it.
__global__ void ropeKernel(
    float* x, const std::int32_t* positions, int rows, int heads, int d, const double* freq, double sign)
{
    const int half = d / 2;
    const std::size_t n = std::size_t(rows) * heads * half;
    for (std::size_t i = firstIndex(); i < n; i += strideAll()) {
        const int pair = int(i % half);
        const std::size_t rh = i / half;
        const int r = int(rh / heads);
        const double angle = sign * positions[r] * freq[pair];
        float* p = x + rh * d + 2 * pair;
        km::ropeTurn(p[0], p[1], float(cos(angle)), float(sin(angle)));
    }
}

__global__ void addBiasKernel(float* out, const float* bias, int rows, int cols)
{
    const std::size_t n = std::size_t(rows) * cols;
    for (std::size_t i = firstIndex(); i < n; i += strideAll())
        out[i] += bias[i % cols];
}

// One thread per column, down the rows (coalesced across a warp's columns; no atomics, so the same bits
// every run).
__global__ void biasBackwardKernel(float* dBias, const float* dOut, int rows, int cols)
{
    const int c = int(blockIdx.x) * blockDim.x + threadIdx.x;
    if (c >= cols)
        return;
    float sum = 0;
    for (int r = 0; r < rows; ++r)
        sum += dOut[std::size_t(r) * cols + c];
    dBias[c] += sum;
}

__global__ void toBf16Kernel(std::uint16_t* out, const float* in, std::size_t n)
{
    for (std::size_t i = firstIndex(); i < n; i += strideAll())
        out[i] = km::toBf16(in[i]);
}

__global__ void toFp16Kernel(std::uint16_t* out, const float* in, std::size_t n)
{
    for (std::size_t i = firstIndex(); i < n; i += strideAll())
        out[i] = km::toFp16(in[i]);
}

__global__ void fromBf16Kernel(float* out, const std::uint16_t* in, std::size_t n)
{
    for (std::size_t i = firstIndex(); i < n; i += strideAll())
        out[i] = km::fromBf16(in[i]);
}

__global__ void fromFp16Kernel(float* out, const std::uint16_t* in, std::size_t n)
{
    for (std::size_t i = firstIndex(); i < n; i += strideAll())
        out[i] = km::fromFp16(in[i]);
}

} // namespace

void launchFillFloats(float* dst, float value, std::size_t n, void* s)
{
    fillKernel<<<blocks(n), kThreads, 0, stream(s)>>>(dst, value, n);
}

void launchGelu(float* out, const float* in, std::size_t n, void* s)
{
    geluKernel<<<blocks(n), kThreads, 0, stream(s)>>>(out, in, n);
}

void launchGeluBackward(float* dIn, const float* dOut, const float* in, std::size_t n, void* s)
{
    geluBackwardKernel<<<blocks(n), kThreads, 0, stream(s)>>>(dIn, dOut, in, n);
}

void launchSwiglu(float* out, const float* gate, const float* up, std::size_t n, void* s)
{
    swigluKernel<<<blocks(n), kThreads, 0, stream(s)>>>(out, gate, up, n);
}

void launchSwigluBackward(
    float* dGate, float* dUp, const float* dOut, const float* gate, const float* up, std::size_t n, void* s)
{
    swigluBackwardKernel<<<blocks(n), kThreads, 0, stream(s)>>>(dGate, dUp, dOut, gate, up, n);
}

void launchRope(
    float* x, const std::int32_t* positions, int rows, int heads, int d, const double* freq, double sign, void* s)
{
    const std::size_t n = std::size_t(rows) * heads * (d / 2);
    ropeKernel<<<blocks(n), kThreads, 0, stream(s)>>>(x, positions, rows, heads, d, freq, sign);
}

void launchAddBias(float* out, const float* bias, int rows, int cols, void* s)
{
    addBiasKernel<<<blocks(std::size_t(rows) * cols), kThreads, 0, stream(s)>>>(out, bias, rows, cols);
}

void launchBiasBackward(float* dBias, const float* dOut, int rows, int cols, void* s)
{
    const unsigned b = static_cast<unsigned>((cols + kThreads - 1) / kThreads);
    biasBackwardKernel<<<b, kThreads, 0, stream(s)>>>(dBias, dOut, rows, cols);
}

void launchToBf16(std::uint16_t* out, const float* in, std::size_t n, void* s)
{
    toBf16Kernel<<<blocks(n), kThreads, 0, stream(s)>>>(out, in, n);
}

void launchToFp16(std::uint16_t* out, const float* in, std::size_t n, void* s)
{
    toFp16Kernel<<<blocks(n), kThreads, 0, stream(s)>>>(out, in, n);
}

void launchFromBf16(float* out, const std::uint16_t* in, std::size_t n, void* s)
{
    fromBf16Kernel<<<blocks(n), kThreads, 0, stream(s)>>>(out, in, n);
}

void launchFromFp16(float* out, const std::uint16_t* in, std::size_t n, void* s)
{
    fromFp16Kernel<<<blocks(n), kThreads, 0, stream(s)>>>(out, in, n);
}

} // namespace loom::device
