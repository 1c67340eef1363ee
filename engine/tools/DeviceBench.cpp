// loom-device-check --bench: the memory-bound kernels' achieved bandwidth beside cudaMemcpy device to
// device in the same run (the GPU's practical ceiling), each the median of five timed runs after a warm-up,
// timed with CUDA events. Bytes count every read and every write once.
#include "engine/tools/DeviceCheckCases.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <vector>

namespace loom::tools {

namespace {

double medianMs(device::Device& gpu, device::Stream stream, const std::function<void()>& run)
{
    device::Event a = gpu.createEvent(), b = gpu.createEvent();
    run(); // warm-up: first-launch costs, cuBLAS/driver lazy loading
    std::vector<double> ms;
    for (int i = 0; i < 5; ++i) {
        gpu.recordEvent(a, stream);
        run();
        gpu.recordEvent(b, stream);
        ms.push_back(gpu.elapsedMs(a, b));
    }
    gpu.destroyEvent(a);
    gpu.destroyEvent(b);
    std::sort(ms.begin(), ms.end());
    return ms[2];
}

void line(const char* name, double bytes, double ms, double copyGBs)
{
    const double gbs = bytes / (ms * 1e-3) / 1e9;
    std::printf("  %-34s %8.3f ms  %7.1f GB/s  %.2f of the copy\n", name, ms, gbs, copyGBs > 0 ? gbs / copyGBs : 1.0);
}

} // namespace

void benchBandwidth(device::Device& gpu)
{
    std::printf("item 4 (memory-bound kernels): bandwidth beside a device-to-device copy\n");
    device::CudaKernels k(gpu, device::GemmPrecision::Fp32);
    const device::Stream st = k.stream();
    const std::size_t n = std::size_t(1) << 28; // 1 GiB of floats
    device::Buffer<float> x(gpu, n), y(gpu, n);
    gpu.fillFloats(x.data(), 0.5f, n);
    const double copyMs = medianMs(
        gpu, st, [&] { gpu.copyBytes(y.data(), x.data(), x.bytes(), device::CopyKind::DeviceToDevice, st); });
    const double copyGBs = 2.0 * double(x.bytes()) / (copyMs * 1e-3) / 1e9;
    line("cudaMemcpy device to device, 1 GiB", 2.0 * double(x.bytes()), copyMs, 0);
    line("GELU forward, 2^28 floats", 2.0 * double(x.bytes()),
        medianMs(gpu, st, [&] { k.geluForward(y.data(), x.data(), n); }), copyGBs);

    const int rows = 8 * 1024, cols = 768; // GPT-2 124M's activations at micro-batch 8
    device::Buffer<float> g(gpu, cols), b(gpu, cols), mean(gpu, rows), rstd(gpu, rows);
    gpu.fillFloats(g.data(), 1.0f, cols);
    gpu.fillFloats(b.data(), 0.0f, cols);
    const double lnBytes = 2.0 * 4.0 * rows * cols;
    line("LayerNorm forward, 8192 x 768", lnBytes,
        medianMs(gpu, st,
            [&] {
                k.layerNormForward(y.data(), mean.data(), rstd.data(), x.data(), g.data(), b.data(), rows, cols, 1e-5f);
            }),
        copyGBs);

    const std::size_t params = 124'439'808; // GPT-2 124M (tied embedding)
    device::Buffer<float> m(gpu, params), v(gpu, params);
    device::Buffer<std::uint8_t> mask(gpu, params);
    gpu.fillBytes(m.data(), 0, m.bytes());
    gpu.fillBytes(v.data(), 0, v.bytes());
    gpu.fillBytes(mask.data(), 1, mask.bytes());
    const device::math::AdamStep step { 0.9f, 0.95f, 0.1f, 0.05f, 10.0f, 20.0f, 1e-4f, 1e-5f, 1e-8f, 1.0f };
    line("AdamW, 124 M parameters", 29.0 * double(params),
        medianMs(gpu, st, [&] { k.adamw(x.data(), y.data(), m.data(), v.data(), mask.data(), params, step); }),
        copyGBs);
}

} // namespace loom::tools
