// Tracing overhead: gpt-mini on 4 ranks (tp 1, pp 2, dp 2), the same trainer stepping with tracing and
// streaming off and on in alternating blocks, in one run. Prints the median step times and their ratio
// (goal: traced / untraced <= 1.03).  Run: mpirun -np 4 build/dev/bin/bench_tracing [--steps 12] [--json]
#include "engine/comm/MpiCommunicator.h"
#include "engine/comm/TraceGather.h"
#include "engine/plan/LayoutParser.h"
#include "engine/profiles/BuiltinProfiles.h"
#include "engine/trace/TelemetryStream.h"
#include "engine/train/CpuKernels.h"
#include "engine/train/Trainer.h"

#include <cblas.h>
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

using namespace loom;

int main(int argc, char** argv)
{
    int blocks = 6;
    bool json = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--steps" && i + 1 < argc)
            blocks = std::max(2, std::atoi(argv[++i]) / 2);
        else if (a == "--json")
            json = true;
    }
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    openblas_set_num_threads(1);
    comm::MpiSession session(&argc, &argv);
    const char* text = R"({"loom_layout": 1, "name": "bench", "model": "gpt-mini", "cluster": "local",
                           "parallel": {"tp": 1, "pp": 2, "dp": 2, "micro_batch": 2, "global_batch": 8}})";
    const auto read = plan::readLayout(text, profiles::BuiltinProfiles::instance());
    if (session.worldSize() != read.layout->parallel.worldSize()) {
        if (session.worldRank() == 0)
            std::fprintf(stderr, "bench_tracing: run it with mpirun -np %lld\n",
                static_cast<long long>(read.layout->parallel.worldSize()));
        return 2;
    }
    const train::Corpus corpus = train::Corpus::synthetic(1);
    trace::TraceRecorder recorder(session.worldRank());
    auto comms = comm::makeMpiGridCommunicators(plan::RankGrid::forLayout(*read.layout), &recorder);
    const comm::ClockAlignment clock = comm::alignClock(*comms.world);
    train::CpuKernels kernels;
    train::TrainOptions options;
    options.steps = 4 * blocks + 2;
    options.recorder = &recorder;
    train::Trainer trainer(*read.layout, comms, corpus, options, kernels);
    std::vector<double> off, on;
    std::int64_t step = 0;
    std::size_t streamedBytes = 0;
    for (int b = 0; b < 2 * blocks + 1; ++b) {
        const bool tracing = b % 2 == 1;
        recorder.setEnabled(tracing);
        for (int k = 0; k < 2; ++k) {
            MPI_Barrier(MPI_COMM_WORLD);
            const auto t0 = std::chrono::steady_clock::now();
            trainer.step(step++);
            if (tracing) { // what --stream adds: gather the step's events and encode a frame on rank 0
                const auto events = comm::gatherEvents(*comms.world, recorder.take(), clock.offsetNs);
                if (session.worldRank() == 0)
                    streamedBytes += trace::encodeFrame("events", trace::encodeEvents(events)).size();
            }
            double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (b > 0) // the first block warms up
                (tracing ? on : off).push_back(t);
        }
    }
    std::sort(off.begin(), off.end());
    std::sort(on.begin(), on.end());
    const double a = off[off.size() / 2], b = on[on.size() / 2];
    if (session.worldRank() == 0) {
        if (json)
            std::printf("{\"bench\":\"tracing\",\"untraced_ms\":%.3f,\"traced_ms\":%.3f,\"ratio\":%.4f,\"stream_bytes_"
                        "per_step\":%.0f}\n",
                a * 1e3, b * 1e3, b / a, double(streamedBytes) / double(on.size()));
        else
            std::printf("gpt-mini, 4 ranks (tp 1, pp 2, dp 2), median step time of %zu steps each:\n"
                        "  tracing off          %8.2f ms  (reference)\n"
                        "  tracing + stream     %8.2f ms  ratio=%.4f  (%.0f bytes of stream per step)\n",
                on.size(), a * 1e3, b * 1e3, b / a, double(streamedBytes) / double(on.size()));
    }
    return 0;
}
