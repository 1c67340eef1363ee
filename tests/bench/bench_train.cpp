// One-process step time of gpt-mini and the model FLOP/s it achieves, as a fraction of cblas_sgemm's
// FLOP/s (1024³) measured in the same run with the same number of threads. Goal: fraction >= 0.5.
// Run: build/dev/bin/bench_train [--threads 1] [--steps 6] [--json]
#include "engine/comm/MpiCommunicator.h"
#include "engine/plan/CostModel.h"
#include "engine/plan/LayoutParser.h"
#include "engine/profiles/BuiltinProfiles.h"
#include "engine/train/CpuKernels.h"
#include "engine/train/Trainer.h"

#include <cblas.h>
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

using namespace loom;

int main(int argc, char** argv)
{
    int threads = 1, steps = 6;
    bool json = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--threads" && i + 1 < argc)
            threads = std::max(1, std::atoi(argv[++i]));
        else if (a == "--steps" && i + 1 < argc)
            steps = std::max(3, std::atoi(argv[++i]));
        else if (a == "--json")
            json = true;
    }
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    openblas_set_num_threads(threads);
    comm::MpiSession session(&argc, &argv);

    // The reference: sgemm of 1024 x 1024 x 1024, median of 5.
    const int n = 1024;
    std::vector<float> a(std::size_t(n) * n, 1.0f), b(a.size(), 0.5f), c(a.size());
    std::vector<double> gemmTimes;
    for (int r = 0; r < 6; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        cblas_sgemm(
            CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
        if (r > 0)
            gemmTimes.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(gemmTimes.begin(), gemmTimes.end());
    const double sgemm = 2.0 * n * n * n / gemmTimes[gemmTimes.size() / 2];

    const char* text = R"({"loom_layout": 1, "name": "bench", "model": "gpt-mini", "cluster": "local",
                           "parallel": {"tp": 1, "pp": 1, "dp": 1, "micro_batch": 8, "global_batch": 8}})";
    auto read = plan::readLayout(text, profiles::BuiltinProfiles::instance());
    const train::Corpus corpus = train::Corpus::synthetic(1);
    auto comms = comm::makeMpiGridCommunicators(plan::RankGrid::forLayout(*read.layout), nullptr);
    train::CpuKernels kernels;
    train::TrainOptions options;
    options.steps = steps;
    train::Trainer trainer(*read.layout, comms, corpus, options, kernels);
    std::vector<double> stepTimes;
    for (int s = 0; s < steps; ++s) {
        const auto r = trainer.step(s);
        if (s >= 2)
            stepTimes.push_back(r.seconds);
    }
    std::sort(stepTimes.begin(), stepTimes.end());
    const double step = stepTimes[stepTimes.size() / 2];
    const double model = plan::megatronModelFlops(read.layout->model, read.layout->parallel.globalBatch, false) / step;
    if (json)
        std::printf("{\"bench\":\"train\",\"model\":\"gpt-mini\",\"tokens\":%lld,\"threads\":%d,\"step_ms\":%.2f,"
                    "\"model_gflops\":%.2f,\"sgemm_gflops\":%.2f,\"fraction_of_sgemm\":%.3f}\n",
            static_cast<long long>(8 * read.layout->model.seqLen), threads, step * 1e3, model / 1e9, sgemm / 1e9,
            model / sgemm);
    else
        std::printf("gpt-mini, one process, %d BLAS thread(s), %lld tokens per step (median of %zu steps):\n"
                    "  step time            %8.1f ms\n"
                    "  model FLOP/s         %8.2f GFLOP/s  (Narayanan et al. eq. 3, no recomputation)\n"
                    "  cblas_sgemm 1024^3   %8.2f GFLOP/s  (reference, same run)\n"
                    "  fraction_of_sgemm=%.3f\n",
            threads, static_cast<long long>(8 * read.layout->model.seqLen), stepTimes.size(), step * 1e3, model / 1e9,
            sgemm / 1e9, model / sgemm);
    return 0;
}
