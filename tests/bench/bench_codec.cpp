// int8 block quantise + dequantise throughput on one core against memcpy bandwidth, measured in one run.
// Run: build/dev/bin/bench_codec [--mb 64] [--json]. Goal: int8_vs_memcpy >= 0.3.
#include "engine/comm/GradientCodec.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace loom::comm;

namespace {
template <typename F> double medianSeconds(F&& f, int reps)
{
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
        const auto a = std::chrono::steady_clock::now();
        f();
        t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}
} // namespace

int main(int argc, char** argv)
{
    std::size_t mb = 64;
    bool json = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--mb" && i + 1 < argc)
            mb = std::max(1, std::atoi(argv[++i]));
        else if (a == "--json")
            json = true;
    }
    const std::size_t count = mb * (1 << 20) / 4, block = 256;
    std::vector<float> x(count), y(count), copy(count);
    std::vector<float> scales(count / block + 1);
    std::vector<std::int8_t> q(count);
    for (std::size_t i = 0; i < count; ++i)
        x[i] = std::sin(0.001f * float(i)) * 3.0f;
    const int reps = 7;
    // memcpy of the fp32 tensor: what moving the data once costs (read + write).
    const double tCopy = medianSeconds([&] { std::memcpy(copy.data(), x.data(), 4 * count); }, reps);
    const double tInt8 = medianSeconds(
        [&] {
            quantizeInt8(x.data(), count, block, scales.data(), q.data());
            dequantizeInt8(scales.data(), q.data(), count, block, y.data());
        },
        reps);
    const double gbCopy = double(4 * count) / tCopy / 1e9, gbInt8 = double(4 * count) / tInt8 / 1e9;
    if (json)
        std::printf(
            "{\"bench\":\"codec\",\"bytes\":%zu,\"memcpy_gbps\":%.3f,\"int8_qdq_gbps\":%.3f,\"int8_vs_memcpy\":%.3f}\n",
            4 * count, gbCopy, gbInt8, gbInt8 / gbCopy);
    else
        std::printf("int8 quantise+dequantise of %zu MiB of fp32 on one core (median of %d):\n"
                    "  memcpy             %7.2f GB/s  (reference)\n"
                    "  int8 q + dq        %7.2f GB/s  int8_vs_memcpy=%.3f\n",
            mb, reps, gbCopy, gbInt8, gbInt8 / gbCopy);
    return 0;
}
