// The GEMM efficiency curve of one CPU core (the "local" cluster profile's gemm_efficiency): single-threaded
// OpenBLAS sgemm on the four GEMMs of a gpt-mini layer's forward (h 192, ffn 4h) at tensor-parallel widths
// h/t = 192, 96, 48, 24 and 64 to 1024 rows, best of 7 passes of 30 ms each, interleaved so that other load
// on the machine touches every shape alike. Prints GFLOP/s per shape and each shape's rate relative to the
// widest, largest one (the reference, measured in the same run).
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

namespace {

double now()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One layer's forward GEMMs at width w = h/t: QKV (T×h · h×3w), projection (T×w · w×h), MLP up (T×h · h×4w)
// and down (T×4w · 4w×h). Returns their FLOPs.
double layer(int T, int h, int t, const float* a, const float* b, float* c)
{
    const int w = h / t, f = 4 * h / t;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, 3 * w, h, 1.0f, a, h, b, 3 * w, 0.0f, c, 3 * w);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, h, w, 1.0f, a, w, b, h, 0.0f, c, h);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, f, h, 1.0f, a, h, b, f, 0.0f, c, f);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, h, f, 1.0f, a, f, b, h, 0.0f, c, h);
    return 2.0 * T * h * (3.0 * w + w + 2.0 * f);
}

} // namespace

int main()
{
    openblas_set_num_threads(1);
    const int h = 192;
    const std::vector<int> rows = { 64, 128, 256, 512, 1024 }, tps = { 1, 2, 4, 8 };
    std::vector<float> a(1 << 20, 0.001f), b(1 << 20, 0.002f), c(1 << 20);
    std::vector<double> best(rows.size() * tps.size(), 0.0);
    for (int pass = 0; pass < 7; ++pass)
        for (std::size_t r = 0; r < rows.size(); ++r)
            for (std::size_t t = 0; t < tps.size(); ++t) {
                double flops = 0;
                const double t0 = now();
                while (now() - t0 < 0.03)
                    flops += layer(rows[r], h, tps[t], a.data(), b.data(), c.data());
                double& x = best[r * tps.size() + t];
                x = std::max(x, flops / (now() - t0) / 1e9);
            }
    const double reference = best[(rows.size() - 1) * tps.size()];
    std::printf("sgemm GFLOP/s, one core, gpt-mini layer GEMMs (h %d), best of 7 (relative to %d rows at width %d)\n",
        h, rows.back(), h);
    std::printf("rows");
    for (int t : tps)
        std::printf("\t\twidth %d", h / t);
    std::printf("\n");
    double lo = 1e30, hi = 0;
    for (std::size_t r = 0; r < rows.size(); ++r) {
        std::printf("%d", rows[r]);
        for (std::size_t t = 0; t < tps.size(); ++t) {
            const double x = best[r * tps.size() + t];
            lo = std::min(lo, x);
            hi = std::max(hi, x);
            std::printf("\t%6.1f (%.2f)", x, x / reference);
        }
        std::printf("\n");
    }
    std::printf("range %.1f to %.1f GFLOP/s: %.2f of the best at the worst shape\n", lo, hi, lo / hi);
    return 0;
}
