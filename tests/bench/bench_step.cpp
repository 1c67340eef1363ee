// Loom's training step against a plain GPT-2 step written for this benchmark (ReferenceGpt2: straightforward
// loops, -O3 -ffast-math), both measured in this run on the same shape: GPT-2 124M, batch 4 × 64, fp32.
// Prints each median step time, the share of the optimizer in it, and the ratio reference / Loom.
//   bench_step [--threads T] [--steps N] [--ref-steps N] [--zero Z] [--rows all|embedding|none] [--share yes|no]
//              [--no-reference] [--json]
//   mpirun -np 2 bench_step --threads 1      Loom at dp 2 (one thread per rank); rank 0 then runs the reference
// Goals (issue 20): at one thread Loom ≥ 3× llm.c (the reference stands in for it here; llm.c's own figures are
// in docs/training.md) and the optimizer under 8 % of the step.
#include "engine/comm/MpiCommunicator.h"
#include "engine/plan/LayoutParser.h"
#include "engine/profiles/BuiltinProfiles.h"
#include "engine/train/CpuKernels.h"
#include "engine/train/Threads.h"
#include "engine/train/Trainer.h"
#include "tests/bench/MemoryFloor.h"
#include "tests/bench/ReferenceGpt2.h"

#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace loom;

namespace {

double median(std::vector<double> v)
{
    if (v.empty())
        return 0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// A barrier that sleeps instead of spinning, so that a waiting rank leaves its core to the one that works.
void politeBarrier()
{
    MPI_Request request;
    MPI_Ibarrier(MPI_COMM_WORLD, &request);
    for (int done = 0; !done;) {
        MPI_Test(&request, &done, MPI_STATUS_IGNORE);
        if (!done)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

// CPU seconds (user and system, all threads) this process has used so far.
double cpuSeconds()
{
    rusage u {};
    getrusage(RUSAGE_SELF, &u);
    return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

} // namespace

int main(int argc, char** argv)
{
    train::restartWithBetterBlasKernels(argv); // the kernels loom-train runs on (train/Threads.h)
    int threads = 1, steps = 5, refSteps = 3, zero = 0;
    bool json = false, reference = true;
    std::string rows = "all", share = "yes";
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--threads" && i + 1 < argc)
            threads = std::max(1, std::atoi(argv[++i]));
        else if (a == "--steps" && i + 1 < argc)
            steps = std::max(3, std::atoi(argv[++i]));
        else if (a == "--ref-steps" && i + 1 < argc)
            refSteps = std::max(2, std::atoi(argv[++i]));
        else if (a == "--zero" && i + 1 < argc)
            zero = std::clamp(std::atoi(argv[++i]), 0, 3);
        else if (a == "--rows" && i + 1 < argc) { // ZeRO-1: gradients completed row by row (Trainer.h, SharedRows)
            rows = argv[++i];
            if (rows != "all" && rows != "embedding" && rows != "none") {
                std::fprintf(stderr, "bench_step: --rows takes all, embedding or none, not '%s'\n", rows.c_str());
                return 2;
            }
        } else if (a == "--share" && i + 1 < argc) { // ZeRO-1: one copy of the parameters per machine
            share = argv[++i];
            if (share != "yes" && share != "no") {
                std::fprintf(stderr, "bench_step: --share takes yes or no, not '%s'\n", share.c_str());
                return 2;
            }
        } else if (a == "--no-reference")
            reference = false;
        else if (a == "--json")
            json = true;
    }
    std::setvbuf(stdout, nullptr, _IOLBF, 0); // lines as they come, also into a file
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    comm::MpiSession session(&argc, &argv);
    const int rank = session.worldRank(), dp = session.worldSize();
    train::setComputeThreads(threads);

    const std::string text = R"({"loom_layout": 1, "name": "bench-step", "model": "gpt2-124m", "cluster": "local",
        "parallel": {"tp": 1, "pp": 1, "dp": )"
        + std::to_string(dp) + R"(, "micro_batch": )" + std::to_string(4 / std::min(dp, 4))
        + R"(, "global_batch": 4}, "memory": {"zero": )" + std::to_string(zero) + "}}";
    auto read = plan::readLayout(text, profiles::BuiltinProfiles::instance());
    if (!read.ok()) {
        std::fprintf(stderr, "bench_step: %s", read.diagnostics.format().c_str());
        return 2;
    }
    plan::Layout layout = *read.layout;
    layout.model.seqLen = 64;
    const train::Corpus corpus = train::Corpus::synthetic(1);
    auto comms = comm::makeMpiGridCommunicators(plan::RankGrid::forLayout(layout), nullptr);
    train::CpuKernels kernels;
    trace::TraceRecorder recorder(rank);
    recorder.setEnabled(true);
    train::TrainOptions options;
    options.steps = steps;
    options.recorder = &recorder;
    options.sharedRows = rows == "none" ? train::TrainOptions::SharedRows::None
        : rows == "embedding"           ? train::TrainOptions::SharedRows::Embedding
                                        : train::TrainOptions::SharedRows::All;
    options.shareParameters = share == "yes";
    train::Trainer trainer(layout, comms, corpus, options, kernels);
    std::vector<double> stepTimes, optimizerTimes, cpuTimes, normTimes, updateTimes;
    std::vector<std::vector<double>> kindTimes(16); // seconds per event kind and step, rank 0
    double firstLoss = 0, lastLoss = 0;
    for (int s = 0; s < steps; ++s) {
        const double cpu0 = cpuSeconds();
        const auto r = trainer.step(s);
        double cpu = cpuSeconds() - cpu0; // this rank's; the ranks' sum below
        MPI_Allreduce(MPI_IN_PLACE, &cpu, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        std::vector<double> kinds(kindTimes.size(), 0.0);
        for (const auto& e : recorder.take())
            if (std::size_t(e.kind) < kinds.size())
                kinds[std::size_t(e.kind)] += double(e.endNs - e.startNs) * 1e-9;
        (s == 0 ? firstLoss : lastLoss) = r.loss;
        if (s >= 1) { // the first step pays page faults
            stepTimes.push_back(r.seconds);
            cpuTimes.push_back(cpu);
            // The norm's squares taken in the backward (one replica) are the optimizer's work too.
            optimizerTimes.push_back(kinds[std::size_t(trace::EventKind::Optimizer)] + r.normInBackward);
            normTimes.push_back(r.normInBackward);
            updateTimes.push_back(r.update);
            for (std::size_t k = 0; k < kinds.size(); ++k)
                kindTimes[k].push_back(kinds[k]);
        }
    }
    const double loomStep = median(stepTimes), loomOptimizer = median(optimizerTimes), loomCpu = median(cpuTimes);

    // The update against the least time one core takes to move its bytes (one rank, one thread only: other
    // threads or ranks would share the memory's bandwidth with it).
    const double loomUpdate = median(updateTimes);
    const double floor = dp == 1 && threads == 1
        ? bench::adamTrafficSeconds(trainer.modelStateBytes().optimizer / (2 * sizeof(float)), 3)
        : 0.0;

    double refStep = 0, refOptimizer = 0, refFirst = 0, refLast = 0;
    const int refThreads = threads * dp; // the reference gets the cores the Loom ranks had together
    if (reference) {
        politeBarrier();
        if (rank == 0) {
            bench::ReferenceShape shape;
            shape.vocab = int(layout.model.vocab);
            bench::ReferenceGpt2 ref(shape, 4, 1, refThreads);
            std::vector<std::int32_t> tokens(4 * 64), targets(tokens.size());
            std::vector<double> times, opt;
            for (int s = 0; s < refSteps; ++s) {
                for (int b = 0; b < 4; ++b)
                    corpus.sequence(1, s, b, 64, tokens.data() + b * 64, targets.data() + b * 64);
                const auto t0 = std::chrono::steady_clock::now();
                const float loss = ref.step(tokens.data(), targets.data(), 1e-4f);
                const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                (s == 0 ? refFirst : refLast) = loss;
                if (s >= 1) {
                    times.push_back(t);
                    opt.push_back(ref.optimizerSeconds());
                }
            }
            refStep = median(times);
            refOptimizer = median(opt);
        }
        politeBarrier();
    }
    if (rank != 0)
        return 0;
    char load[64] = "?";
    if (FILE* f = std::fopen("/proc/loadavg", "r")) {
        if (!std::fgets(load, sizeof load, f))
            load[0] = '\0';
        std::fclose(f);
        load[std::strcspn(load, "\n")] = '\0';
    }
    const double ratio = reference && loomStep > 0 ? refStep / loomStep : 0;
    const bool embeddingRows = trainer.sharesEmbeddingRows();
    const int weightRows = trainer.sharedWeightRows();
    if (json) {
        std::printf(
            "{\"bench\":\"step\",\"model\":\"gpt2-124m\",\"batch\":4,\"seq\":64,\"dp\":%d,\"threads_per_rank\":%d,"
            "\"loom_step_ms\":%.1f,\"loom_cpu_ms\":%.1f,\"loom_optimizer_ms\":%.1f,\"loom_optimizer_fraction\":%.4f,"
            "\"reference_threads\":%d,\"reference_step_ms\":%.1f,\"reference_optimizer_ms\":%.1f,"
            "\"reference_vs_loom\":%.3f,\"embedding_rows\":%s,\"weight_rows\":%d,\"shared_params\":%s,"
            "\"update_ms\":%.1f,\"memory_floor_ms\":%.1f,\"blas_core\":\"%s\",\"loadavg\":\"%s\"}\n",
            dp, threads, loomStep * 1e3, loomCpu * 1e3, loomOptimizer * 1e3, loomOptimizer / loomStep, refThreads,
            refStep * 1e3, refOptimizer * 1e3, ratio, embeddingRows ? "true" : "false", weightRows,
            trainer.sharesParameters() ? "true" : "false", loomUpdate * 1e3, floor * 1e3, train::blasCoreName().c_str(),
            load);
        return 0;
    }
    std::printf("GPT-2 124M shape, batch 4 x 64, fp32; Loom dp %d with %d thread(s) per rank, OpenBLAS kernels %s "
                "(load average %s)%s\n",
        dp, threads, train::blasCoreName().c_str(), load,
        embeddingRows ? "; each rank completes its own rows of the embedding's gradient" : "");
    if (weightRows > 0)
        std::printf("  each rank completes its own rows of %d of the blocks' weight gradients\n", weightRows);
    if (trainer.sharesParameters())
        std::printf("  the ranks keep one copy of the parameters in shared memory (no all-gather after the update)\n");
    std::printf("  Loom step          %9.1f ms  (median of %zu; loss %.4f -> %.4f)\n", loomStep * 1e3, stepTimes.size(),
        firstLoss, lastLoss);
    std::printf("  Loom optimizer     %9.1f ms  = %.1f %% of the step (norm, clipping, AdamW; goal < 8 %%)\n",
        loomOptimizer * 1e3, 100 * loomOptimizer / loomStep);
    if (floor > 0)
        std::printf(
            "  of which AdamW     %9.1f ms  against %.1f ms for a plain loop moving the same 28 bytes per parameter "
            "(one thread): update_vs_floor=%.3f\n",
            loomUpdate * 1e3, floor * 1e3, loomUpdate / floor);
    std::printf("  Loom CPU time      %9.1f ms  per step, all ranks' threads together (median)\n", loomCpu * 1e3);
    std::printf("  parts (rank 0, medians):");
    for (auto kind : { trace::EventKind::Forward, trace::EventKind::Backward, trace::EventKind::Optimizer,
             trace::EventKind::AllReduce, trace::EventKind::ReduceScatter, trace::EventKind::AllGather,
             trace::EventKind::Wait })
        if (const double t = median(kindTimes[std::size_t(kind)]); t > 0)
            std::printf(" %s %.1f ms", std::string(trace::toString(kind)).c_str(), t * 1e3);
    if (const double t = median(normTimes); t > 0)
        std::printf(" (norm's squares in the backward %.1f ms)", t * 1e3);
    std::printf("\n");
    if (reference) {
        std::printf("  reference step     %9.1f ms  (plain loops, %d thread(s); median of %d; loss %.4f -> %.4f)\n",
            refStep * 1e3, refThreads, refSteps - 1, refFirst, refLast);
        std::printf(
            "  reference optimizer %8.1f ms  (norm, clipping, AdamW: plain loops, one thread)\n", refOptimizer * 1e3);
        std::printf("  reference_vs_loom=%.3f  (reference step / Loom step; above 1: Loom is faster)\n", ratio);
    }
    return 0;
}
