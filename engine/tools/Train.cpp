// loom-train: trains a GPT model under a layout; one process per rank (mpirun, srun or Loom's launcher).
//
//   mpirun -np N loom-train --layout FILE [--steps N] [--seed S] [--data FILE] [--lr X] [--warmup N]
//                           [--metrics FILE] [--checkpoint-dir DIR] [--checkpoint-every N] [--resume]
#include "engine/comm/MpiCommunicator.h"
#include "engine/comm/TraceGather.h"
#include "engine/trace/ChromeTrace.h"
#include "engine/trace/TelemetryStream.h"
#include "engine/plan/LayoutParser.h"
#include "engine/train/Checkpoint.h"
#include "engine/train/InputChecks.h"
#include "engine/train/CpuKernels.h"
#include "engine/train/LlmcModel.h"
#include "engine/train/Threads.h"
#include "engine/train/Trainer.h"
#include "profiles/BuiltinProfiles.h"

#include <nlohmann/json.hpp>

#include <cblas.h>
#include <malloc.h>

#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sys/resource.h>
#include <unistd.h>
#include <iostream>
#include <optional>
#include <string>

using namespace loom;

namespace {

// This process's resident-memory high-water mark (getrusage's ru_maxrss, KiB on Linux): the "memory
// high-water per rank" of the telemetry on CPU ranks.
std::int64_t peakResidentBytes()
{
    rusage usage{};
    return getrusage(RUSAGE_SELF, &usage) == 0 ? std::int64_t(usage.ru_maxrss) * 1024 : 0;
}

// Every rank's high-water mark, at rank 0 (collective).
std::vector<std::int64_t> gatherPeakMemory(int size)
{
    std::int64_t mine = peakResidentBytes();
    std::vector<std::int64_t> all(static_cast<std::size_t>(size));
    MPI_Gather(&mine, 1, MPI_INT64_T, all.data(), 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
    return all;
}

const char* kUsage =
    "usage: mpirun -np N loom-train --layout FILE [options]\n"
    "  --layout FILE     the layout to train (tp·pp·dp must equal N)\n"
    "  --steps N         optimizer steps (20)\n"
    "  --seed S          seed of the initial weights and the data order (1234)\n"
    "  --data FILE       a text file (bytes) or an llm.c token file; default: a synthetic corpus from the seed\n"
    "  --lr X            peak learning rate (0.001); warm-up then cosine decay to a tenth\n"
    "  --warmup N        warm-up steps (10, at most steps)\n"
    "  --metrics FILE    one JSON object per step: step, loss, tokens_per_s, step_time_s, grad_norm, lr, flops_per_s\n"
    "  --checkpoint-dir DIR   save checkpoints there: every --checkpoint-every steps, at the end, and on SIGTERM\n"
    "  --checkpoint-every N   steps between checkpoints (0: only at the end and on SIGTERM)\n"
    "  --resume          continue from the newest checkpoint in --checkpoint-dir (any layout of the same model)\n"
    "  --init-llmc FILE  start from the GPT-2 weights of an llm.c model file (magic 20240326, version 3)\n"
    "  --export-llmc FILE  at the end, write the weights as an llm.c model file\n"
    "  --trace-out FILE  write every rank's events as a Chrome trace (Perfetto, chrome://tracing, loom trace stats)\n"
    "  --stream          write the telemetry stream (framed lines: run, groups, events, step, checkpoint, end) to standard output\n";

struct Args {
    std::string layout, data, metrics, checkpointDir, initLlmc, exportLlmc, traceOut;
    std::int64_t steps = 20, warmup = 10, checkpointEvery = 0;
    bool resume = false;
    bool stream = false;
    std::uint64_t seed = 1234;
    double lr = 1e-3;
};

template <typename T>
bool parseNumber(const std::string& s, T& out)
{
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && end == s.data() + s.size();
}

std::optional<Args> parse(int argc, char** argv, std::string& error)
{
    Args a;
    for (int i = 1; i < argc; ++i) {
        const std::string k = argv[i];
        if (k == "--help" || k == "-h") {
            error = "";
            return std::nullopt;
        }
        if (k == "--resume") {
            a.resume = true;
            continue;
        }
        if (k == "--stream") {
            a.stream = true;
            continue;
        }
        if (i + 1 >= argc) {
            error = k + " needs a value (or is not an option)";
            return std::nullopt;
        }
        const std::string v = argv[++i];
        bool ok = true;
        if (k == "--layout")
            a.layout = v;
        else if (k == "--data")
            a.data = v;
        else if (k == "--metrics")
            a.metrics = v;
        else if (k == "--checkpoint-dir")
            a.checkpointDir = v;
        else if (k == "--trace-out")
            a.traceOut = v;
        else if (k == "--init-llmc")
            a.initLlmc = v;
        else if (k == "--export-llmc")
            a.exportLlmc = v;
        else if (k == "--checkpoint-every")
            ok = parseNumber(v, a.checkpointEvery) && a.checkpointEvery >= 0;
        else if (k == "--steps")
            ok = parseNumber(v, a.steps) && a.steps >= 0;
        else if (k == "--warmup")
            ok = parseNumber(v, a.warmup) && a.warmup >= 1;
        else if (k == "--seed")
            ok = parseNumber(v, a.seed);
        else if (k == "--lr")
            ok = parseNumber(v, a.lr) && a.lr > 0;
        else {
            error = "unknown option " + k;
            return std::nullopt;
        }
        if (!ok) {
            error = k + " " + v + " is not valid";
            return std::nullopt;
        }
    }
    if (a.layout.empty()) {
        error = "--layout FILE is required";
        return std::nullopt;
    }
    a.warmup = std::max<std::int64_t>(1, std::min(a.warmup, a.steps));
    if (a.resume && a.checkpointDir.empty()) {
        error = "--resume needs --checkpoint-dir DIR";
        return std::nullopt;
    }
    return a;
}

// A conversion folder that only lives for the run: removed by its owner (rank 0) when done or on the way out.
struct ScratchFolder {
    std::string path;
    bool owner = false;  // temporary and this rank removes it
    ScratchFolder(std::string p, bool removes) : path(std::move(p)), owner(removes) {}
    ScratchFolder(const ScratchFolder&) = delete;
    ScratchFolder& operator=(const ScratchFolder&) = delete;
    ~ScratchFolder() { remove(); }
    void remove()
    {
        std::error_code ec;
        if (owner)
            std::filesystem::remove_all(path, ec);
    }
};

volatile std::sig_atomic_t g_terminate = 0;
void onTerminate(int)
{
    g_terminate = 1;
}

}  // namespace

int main(int argc, char** argv)
{
    // Activations are allocated and freed every micro-batch: keep freed memory in the heap instead of
    // returning it to the system, so the next micro-batch does not pay page faults for fresh pages.
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    std::string error;
    auto args = parse(argc, argv, error);
    if (!args) {
        (error.empty() ? std::cout : std::cerr) << (error.empty() ? "" : "loom-train: " + error + "\n") << kUsage;
        return error.empty() ? 0 : 64;
    }
    std::optional<comm::MpiSession> session;
    try {
        session.emplace(&argc, &argv);
    } catch (const std::exception& e) {
        std::cerr << "loom-train: " << e.what() << "\n";
        return 1;
    }
    const int rank = session->worldRank(), size = session->worldSize();

    // Every rank reads and checks the layout; rank 0 says what is wrong; all stop before any work.
    const auto read = plan::readLayoutFile(args->layout, profiles::BuiltinProfiles::instance());
    if (!read.ok()) {
        if (rank == 0)
            std::cerr << "loom-train: the layout " << args->layout << " is not valid:\n" << read.diagnostics.format();
        return 2;
    }
    const plan::Layout& layout = *read.layout;
    if (layout.parallel.worldSize() != size) {
        if (rank == 0)
            std::cerr << "loom-train: the layout needs tp·pp·dp = " << layout.parallel.worldSize() << " ranks but "
                      << size << " were started; run mpirun -np " << layout.parallel.worldSize() << "\n";
        return 2;
    }
    int ranksOnNode = 1;  // the node's cores are shared by its ranks (train/Threads.h)
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &ranksOnNode);
    MPI_Comm_free(&node);
    std::string bindingNote;
    const int threads = train::configureComputeThreads(ranksOnNode, bindingNote);
    if (rank == 0 && !bindingNote.empty())
        std::cerr << "loom-train: " << bindingNote << "\n";

    try {
        const train::Corpus corpus = args->data.empty() ? train::Corpus::synthetic(args->seed) : train::Corpus::fromFile(args->data);
        if (corpus.maxToken() >= layout.model.vocab)
            throw std::runtime_error("the data has token " + std::to_string(corpus.maxToken()) + " but model " + layout.model.name
                                     + " has a vocabulary of " + std::to_string(layout.model.vocab));
        if (static_cast<std::int64_t>(corpus.tokens().size()) <= layout.model.seqLen)
            throw std::runtime_error("the data has " + std::to_string(corpus.tokens().size()) + " tokens; it needs more than seq_len="
                                     + std::to_string(layout.model.seqLen));
        if (!args->initLlmc.empty() || !args->exportLlmc.empty())
            train::checkLlmcCompatible(layout.model);
        if (!args->checkpointDir.empty())
            train::checkCheckpointDir(args->checkpointDir);  // before step 1, not when the first checkpoint is due
        // llm.c conversion goes through a checkpoint folder: --checkpoint-dir (kept), or a temporary one beside
        // the file (shared by the ranks like the file itself) that rank 0 removes when it is done with it.
        const std::string llmcFile = !args->exportLlmc.empty() ? args->exportLlmc : args->initLlmc;
        long long jobTag = static_cast<long long>(getpid());
        if (!llmcFile.empty())
            MPI_Bcast(&jobTag, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
        ScratchFolder scratchFolder(!args->checkpointDir.empty() ? args->checkpointDir : llmcFile + ".loom-convert-" + std::to_string(jobTag),
                                    args->checkpointDir.empty() && rank == 0);
        const std::string& scratch = scratchFolder.path;
        trace::TraceRecorder recorder(rank);
        const bool tracing = !args->traceOut.empty() || args->stream;
        recorder.setEnabled(tracing);
        // Clocks drift apart by tens of µs a minute: the offset to rank 0 is measured at the start and again
        // every kClockRefreshSteps steps; events are moved to rank 0's clock with the offset of their stretch.
        constexpr std::int64_t kClockRefreshSteps = 25;
        comm::ClockAlignment clock = tracing ? comm::alignClock(MPI_COMM_WORLD) : comm::ClockAlignment{};
        std::int64_t clockError = clock.errorNs;
        std::vector<trace::TraceEvent> aligned;  // this rank's events of earlier stretches, on rank 0's clock
        auto alignRecorded = [&] {               // moves what was recorded since into `aligned`
            for (auto& e : recorder.take()) {
                e.startNs -= clock.offsetNs;
                e.endNs -= clock.offsetNs;
                aligned.push_back(std::move(e));
            }
        };
        std::vector<trace::TraceEvent> streamed;  // rank 0: what the stream carried, for --trace-out
        auto emit = [](std::string_view type, const std::string& payload) {
            const std::string frame = trace::encodeFrame(type, payload);
            std::fwrite(frame.data(), 1, frame.size(), stdout);
            std::fflush(stdout);
        };
        auto comms = comm::makeGridCommunicators(plan::RankGrid::forLayout(layout), &recorder);
        train::CpuKernels kernels;
        train::TrainOptions options;
        options.steps = args->steps;
        options.seed = args->seed;
        options.lr = args->lr;
        options.warmup = args->warmup;
        options.recorder = tracing ? &recorder : nullptr;
        train::Trainer trainer(layout, comms, corpus, options, kernels);
        std::ofstream metrics;
        if (rank == 0) {
            std::printf("loom-train: %s, %s, %d ranks (tp=%lld pp=%lld dp=%lld, %s), %d thread(s) per rank, %lld steps, data: %s\n",
                        layout.name.c_str(), layout.model.name.c_str(), size, static_cast<long long>(layout.parallel.tp),
                        static_cast<long long>(layout.parallel.pp), static_cast<long long>(layout.parallel.dp),
                        std::string(plan::toString(layout.parallel.schedule)).c_str(), threads, static_cast<long long>(args->steps),
                        corpus.description().c_str());
            if (!args->metrics.empty()) {
                metrics.open(args->metrics, std::ios::trunc);
                if (!metrics)
                    throw std::runtime_error("cannot write the metrics file \"" + args->metrics + "\"");
            }
        }
        std::int64_t first = 0;
        if (args->resume) {
            if (auto folder = train::latestCheckpointChecked(args->checkpointDir)) {
                train::checkResumable(*folder, args->steps);
                first = trainer.resume(*folder);
                if (rank == 0)
                    std::printf("loom-train: resumed from %s after step %lld\n", folder->c_str(), static_cast<long long>(first));
            } else if (rank == 0) {
                std::printf("loom-train: no checkpoint in %s yet; starting from step 0\n", args->checkpointDir.c_str());
            }
        }
        if (!args->initLlmc.empty()) {
            if (args->resume)
                throw std::runtime_error("--init-llmc and --resume both say where to start; use one");
            const std::string folder = scratch + "/llmc-import";
            int ok = 1;
            std::string why;
            if (rank == 0) {
                try {
                    train::importLlmc(args->initLlmc, layout.model, plan::writeLayout(layout), folder);
                } catch (const std::exception& e) {
                    ok = 0;
                    why = e.what();
                }
            }
            MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
            if (!ok) {
                if (rank == 0)
                    std::cerr << "loom-train: " << why << "\n";
                return 2;
            }
            trainer.resume(folder);
            MPI_Barrier(MPI_COMM_WORLD);  // every rank has read it
            scratchFolder.remove();
            if (rank == 0)
                std::printf("loom-train: weights from %s\n", args->initLlmc.c_str());
        }
        if (args->stream && rank == 0)
            emit("run", nlohmann::ordered_json({{"loom_stream", 1},
                                                {"layout", nlohmann::ordered_json::parse(plan::writeLayout(layout))},
                                                {"ranks", size},
                                                {"first_step", first + 1},
                                                {"steps", args->steps}})
                            .dump());
        std::signal(SIGTERM, onTerminate);
        bool groupsSent = false;
        for (std::int64_t s = first; s < args->steps; ++s) {
            const train::StepResult r = trainer.step(s);
            train::checkFiniteStep(r.loss, r.gradNorm, s + 1, rank);
            if (args->stream) {
                auto events = comm::gatherEvents(MPI_COMM_WORLD, recorder.take(), clock.offsetNs);
                const auto memory = gatherPeakMemory(size);
                if (rank == 0) {
                    if (!groupsSent) {
                        // Every rank creates its groups in the same order, so rank 0's ids name everyone's.
                        nlohmann::ordered_json groups = nlohmann::ordered_json::array();
                        for (const auto& g : recorder.groups())
                            groups.push_back({{"id", g.id}, {"kind", std::string(trace::toString(g.kind))},
                                {"ranks", g.ranks}, {"name", g.name}});
                        emit("groups", groups.dump());
                        groupsSent = true;
                    }
                    emit("events", trace::encodeEvents(events));
                    emit("step", nlohmann::ordered_json({{"step", s + 1},
                                                         {"loss", r.loss},
                                                         {"tokens_per_s", r.tokensPerSecond},
                                                         {"step_time_s", r.seconds},
                                                         {"grad_norm", r.gradNorm},
                                                         {"lr", r.lr},
                                                         {"flops_per_s", r.flopsPerSecond},
                                                         {"memory_high_water_bytes", memory}})
                                     .dump());
                    if (!args->traceOut.empty())
                        streamed.insert(streamed.end(), events.begin(), events.end());
                }
            }
            if (tracing && (s + 1 - first) % kClockRefreshSteps == 0 && s + 1 < args->steps) {
                if (!args->stream) // the stream has already moved this stretch's events
                    alignRecorded();
                clock = comm::alignClock(MPI_COMM_WORLD);
                clockError = std::max(clockError, clock.errorNs);
            }
            // Every rank learns whether any was asked to stop, so all save and stop at the same step.
            int stop = g_terminate ? 1 : 0;
            MPI_Allreduce(MPI_IN_PLACE, &stop, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
            const bool last = s + 1 == args->steps;
            if (!args->checkpointDir.empty()
                && (stop || last || (args->checkpointEvery > 0 && (s + 1) % args->checkpointEvery == 0))) {
                trainer.save(args->checkpointDir, s + 1);
                if (args->stream && rank == 0) {
                    std::error_code ec;
                    const auto folder = std::filesystem::absolute(
                        std::filesystem::path(args->checkpointDir) / ("step-" + std::to_string(s + 1)), ec);
                    emit("checkpoint", nlohmann::ordered_json({{"step", s + 1}, {"path", folder.string()}}).dump());
                }
            }
            if (stop) {
                if (args->stream && rank == 0)
                    emit("end", "{\"reason\": \"sigterm\"}");
                if (rank == 0)
                    std::printf("loom-train: stopped by SIGTERM after step %lld%s\n", static_cast<long long>(s + 1),
                                args->checkpointDir.empty() ? "" : "; checkpoint saved");
                return 143;
            }
            if (rank != 0)
                continue;
            std::printf("step %4lld/%lld  loss %.6f  grad norm %.4f  lr %.2e  %.1f ms  %.0f tokens/s  %.3f GFLOP/s\n",
                        static_cast<long long>(s + 1), static_cast<long long>(args->steps), r.loss, r.gradNorm, r.lr,
                        r.seconds * 1e3, r.tokensPerSecond, r.flopsPerSecond / 1e9);
            std::fflush(stdout);
            if (metrics.is_open()) {
                nlohmann::ordered_json j = {{"step", s + 1},
                                            {"loss", r.loss},
                                            {"tokens_per_s", r.tokensPerSecond},
                                            {"step_time_s", r.seconds},
                                            {"grad_norm", r.gradNorm},
                                            {"lr", r.lr},
                                            {"flops_per_s", r.flopsPerSecond}};
                metrics << j.dump() << "\n" << std::flush;
            }
        }
        if (!args->traceOut.empty()) {
            std::int64_t worstError = clockError;
            MPI_Allreduce(MPI_IN_PLACE, &worstError, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
            alignRecorded();
            const auto mine = std::move(aligned);
            std::int64_t recorded = static_cast<std::int64_t>(mine.size());
            std::vector<std::int64_t> perRank(static_cast<std::size_t>(size));
            MPI_Gather(&recorded, 1, MPI_INT64_T, perRank.data(), 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
            auto events = comm::gatherEvents(MPI_COMM_WORLD, mine, 0);
            const auto memory = gatherPeakMemory(size);
            if (args->stream) {  // the stream already gathered each step's events
                for (const auto& e : streamed)
                    ++perRank[static_cast<std::size_t>(e.rank)];
                events.insert(events.begin(), streamed.begin(), streamed.end());
            }
            if (rank == 0) {
                std::ofstream out(args->traceOut, std::ios::trunc);
                const nlohmann::ordered_json other = {{"generator", "loom-train"},
                                                      {"loom_trace", 1},
                                                      {"ranks", size},
                                                      {"steps", args->steps - first},
                                                      {"clock_error_ns", worstError},
                                                      {"events_per_rank", perRank},
                                                      {"memory_high_water_bytes", memory},
                                                      {"layout", nlohmann::ordered_json::parse(plan::writeLayout(layout))}};
                trace::writeChromeTrace(out, events, recorder.groups(), other.dump());
                if (!out.flush())
                    throw std::runtime_error("cannot write the trace file \"" + args->traceOut + "\"");
                std::printf("loom-train: wrote %zu events of %d ranks to %s (clocks aligned to rank 0 within %.1f us)\n",
                            events.size(), size, args->traceOut.c_str(), double(worstError) / 1000.0);
            }
        }
        if (!args->exportLlmc.empty()) {
            const bool savedAtEnd = !args->checkpointDir.empty() && args->steps > first;  // by the loop above
            if (!savedAtEnd)
                trainer.save(scratch, args->steps);
            if (rank == 0) {
                train::exportLlmc(*train::latestCheckpoint(scratch), layout.model, args->exportLlmc);
                scratchFolder.remove();
                std::printf("loom-train: wrote %s\n", args->exportLlmc.c_str());
            }
        }
        if (args->stream && rank == 0)
            emit("end", "{\"reason\": \"finished\"}");
    } catch (const std::exception& e) {
        std::cerr << "loom-train: rank " << rank << ": " << e.what() << "\n";
        std::cerr.flush();
        MPI_Abort(MPI_COMM_WORLD, 1);
        return 1;
    }
    return 0;
}
