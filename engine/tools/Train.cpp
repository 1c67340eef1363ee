// loom-train: trains a GPT model under a layout; one process per rank (mpirun, srun, Loom's launcher or any
// process starter that sets LOOM_RANK, LOOM_WORLD_SIZE and LOOM_RENDEZVOUS; see comm::ProcessStart).
//
//   mpirun -np N loom-train --layout FILE [--steps N] [--seed S] [--data FILE] [--lr X] [--warmup N]
//                           [--metrics FILE] [--checkpoint-dir DIR] [--checkpoint-every N] [--resume]
//                           [--device cpu|cuda]
#include "engine/comm/Backends.h"
#include "engine/comm/CommError.h"
#include "engine/plan/LayoutParser.h"
#include "engine/plan/MachineMemory.h"
#include "engine/profiles/BuiltinProfiles.h"
#include "engine/tools/TrainDevice.h"
#include "engine/tools/TrainReporter.h"
#include "engine/train/Checkpoint.h"
#include "engine/train/CpuKernels.h"
#include "engine/train/HfWeights.h"
#include "engine/train/InputChecks.h"
#include "engine/train/LlmcModel.h"
#include "engine/train/Threads.h"
#include "engine/train/Trainer.h"

#include <nlohmann/json.hpp>

#include <cblas.h>
#include <malloc.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <new>
#include <optional>
#include <string>
#include <unistd.h>

using namespace loom;

namespace {

// The error frame's kind for what a rank threw (trace::kErrorKinds).
const char* failureKind(const std::exception& e)
{
    if (dynamic_cast<const comm::CommError*>(&e))
        return "communication";
    if (dynamic_cast<const train::DivergedError*>(&e))
        return "diverged";
    if (dynamic_cast<const std::invalid_argument*>(&e))
        return "layout"; // what the trainer refuses to build
    return "internal";
}

const char* kUsage
    = "usage: mpirun -np N loom-train --layout FILE [options]\n"
      "   or: LOOM_RANK=r LOOM_WORLD_SIZE=N LOOM_RENDEZVOUS=host:port loom-train --layout FILE [options]  "
      "(comm.backend gloo)\n"
      "  --layout FILE     the layout to train (tp·cp·pp·dp must equal N); its comm.backend picks MPI, Gloo or NCCL\n"
      "  --steps N         optimizer steps (20)\n"
      "  --seed S          seed of the initial weights and the data order (1234)\n"
      "  --data FILE       a text file (bytes) or an llm.c token file; default: a synthetic corpus from the seed\n"
      "  --lr X            peak learning rate (0.001); warm-up then cosine decay to a tenth\n"
      "  --warmup N        warm-up steps (10, at most steps)\n"
      "  --metrics FILE    one JSON object per step: step, loss, tokens_per_s, step_time_s, grad_norm, lr, "
      "flops_per_s\n"
      "  --checkpoint-dir DIR   save checkpoints there: every --checkpoint-every steps, at the end, and on SIGTERM\n"
      "  --checkpoint-every N   steps between checkpoints (0: only at the end and on SIGTERM)\n"
      "  --resume          continue from the newest checkpoint in --checkpoint-dir (any layout of the same model)\n"
      "  --init-llmc FILE  start from the GPT-2 weights of an llm.c model file (magic 20240326, version 3)\n"
      "  --export-llmc FILE  at the end, write the weights as an llm.c model file\n"
      "  --init-safetensors DIR  start from Hugging Face weights: DIR/model.safetensors (or its index.json)\n"
      "  --export-safetensors DIR  at the end, write DIR/model.safetensors and DIR/config.json (transformers)\n"
      "  --device cpu|cuda  where to compute (default: cuda for a GPU cluster's layout on NCCL, else cpu; the\n"
      "                    trainer runs on the CPU only so far, so cuda stops every rank before step 1 with the "
      "reason)\n"
      "  --export-dtype fp32|bf16  the exported safetensors' dtype (fp32)\n"
      "  --trace-out FILE  write every rank's events as a Chrome trace (Perfetto, chrome://tracing, loom trace stats)\n"
      "  --ignore-memory   start even when the planner's memory estimate exceeds this machine's memory\n"
      "  --stream          write the telemetry stream (framed lines: run, groups, events, step, checkpoint, end) to "
      "standard output\n";

struct Args {
    std::string layout, data, metrics, checkpointDir, initLlmc, exportLlmc, traceOut;
    std::string initSafetensors, exportSafetensors; // folders of Hugging Face safetensors (HfWeights.h)
    bool exportBf16 = false;
    std::int64_t steps = 20, warmup = 10, checkpointEvery = 0;
    bool resume = false;
    bool stream = false;
    bool ignoreMemory = false; // also LOOM_IGNORE_MEMORY=1 (set by loom run --ignore-memory)
    std::optional<device::DeviceKind> device; // --device; the layout's default when absent (TrainDevice.h)
    std::uint64_t seed = 1234;
    double lr = 1e-3;
};

template <typename T> bool parseNumber(const std::string& s, T& out)
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
        if (k == "--ignore-memory") {
            a.ignoreMemory = true;
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
        else if (k == "--init-safetensors")
            a.initSafetensors = v;
        else if (k == "--export-safetensors")
            a.exportSafetensors = v;
        else if (k == "--device")
            ok = (a.device = tools::parseDeviceKind(v)).has_value();
        else if (k == "--export-dtype")
            ok = (a.exportBf16 = v == "bf16") || v == "fp32";
        else if (k == "--checkpoint-every")
            ok = parseNumber(v, a.checkpointEvery) && a.checkpointEvery >= 0;
        else if (k == "--steps")
            ok = parseNumber(v, a.steps) && a.steps >= 0;
        else if (k == "--warmup")
            ok = parseNumber(v, a.warmup) && a.warmup >= 1;
        else if (k == "--seed")
            ok = parseNumber(v, a.seed);
        else if (k == "--lr")
            ok = parseNumber(v, a.lr) && a.lr > 0 && std::isfinite(a.lr); // from_chars takes "inf" too
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
    bool owner = false; // temporary and this rank removes it
    ScratchFolder(std::string p, bool removes)
        : path(std::move(p))
        , owner(removes)
    {
    }
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

// Ranks of this job on this machine, from the starter's environment (mpirun's OMPI_COMM_WORLD_LOCAL_SIZE,
// Slurm's SLURM_NTASKS_PER_NODE, Loom's LOOM_LOCAL_WORLD_SIZE); without one, every rank is taken to be here,
// which errs towards fewer threads rather than more ranks' threads than cores.
int ranksOnThisNode(int worldSize)
{
    for (const char* name : { "LOOM_LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE" }) {
        const char* v = std::getenv(name);
        int n = 0;
        if (v && std::from_chars(v, v + std::strlen(v), n).ec == std::errc() && n >= 1)
            return std::min(n, worldSize);
    }
    return worldSize;
}

// One line to standard error in one write(2): the ranks share the terminal (or mpirun's pipe), and
// pieces written one by one interleave ("loom-train: rank \n0\n: ...").
void sayLine(std::string line)
{
    line += '\n';
    for (std::size_t at = 0; at < line.size();) {
        const ssize_t n = ::write(2, line.data() + at, line.size() - at);
        if (n <= 0 && errno != EINTR)
            return;
        at += n > 0 ? static_cast<std::size_t>(n) : 0;
    }
}

// The exception's message in Loom's words where the library's would be raw ("std::bad_alloc",
// "filesystem error: ...").
std::string plainWhat(const std::exception& e)
{
    if (dynamic_cast<const std::bad_alloc*>(&e))
        return "out of memory: this rank could not allocate what the layout needs; lower the model's size or raise "
               "tp, pp or memory.zero (loom validate shows the estimate per device)";
    if (const auto* f = dynamic_cast<const std::filesystem::filesystem_error*>(&e))
        return "cannot use " + f->path1().string() + (f->path2().empty() ? "" : " and " + f->path2().string()) + ": "
            + f->code().message();
    return e.what();
}

volatile std::sig_atomic_t g_terminate = 0;
void onTerminate(int)
{
    g_terminate = 1;
}

// The run after the communicators exist: resume or import, the step loop, checkpoints, the end.
int runTraining(const Args& args, const plan::Layout& layout, comm::CommRuntime& runtime)
{
    const int rank = runtime.rank(), size = runtime.size();
    const train::Corpus corpus
        = args.data.empty() ? train::Corpus::synthetic(args.seed) : train::Corpus::fromFile(args.data);
    if (corpus.maxToken() >= layout.model.vocab)
        throw std::runtime_error("the data has token " + std::to_string(corpus.maxToken()) + " but model "
            + layout.model.name + " has a vocabulary of " + std::to_string(layout.model.vocab));
    if (static_cast<std::int64_t>(corpus.tokens().size()) <= layout.model.seqLen)
        throw std::runtime_error("the data has " + std::to_string(corpus.tokens().size())
            + " tokens; it needs more than seq_len=" + std::to_string(layout.model.seqLen));
    if (!args.initLlmc.empty() || !args.exportLlmc.empty())
        train::checkLlmcCompatible(layout.model);
    if (!args.initSafetensors.empty() || !args.exportSafetensors.empty())
        train::checkHfCompatible(layout.model);
    if (!args.initLlmc.empty() && !args.initSafetensors.empty())
        throw std::runtime_error("--init-llmc and --init-safetensors both give the initial weights; use one");
    if (!args.checkpointDir.empty())
        train::checkCheckpointDir(args.checkpointDir); // before step 1, not when the first checkpoint is due
    trace::TraceRecorder recorder(rank);
    auto comms = runtime.makeGrid(plan::RankGrid::forLayout(layout), &recorder);
    runtime.addExpertGroups(comms, plan::RankGrid::forLayout(layout), layout.parallel.ep, &recorder);
    comm::Communicator& world = *comms.world;
    // llm.c conversion goes through a checkpoint folder: --checkpoint-dir (kept), or a temporary one beside
    // the file (shared by the ranks like the file itself) that rank 0 removes when it is done with it.
    std::string llmcFile; // the first file or folder converted, beside which the scratch folder goes
    for (const auto* f : { &args.exportLlmc, &args.initLlmc, &args.exportSafetensors, &args.initSafetensors })
        if (llmcFile.empty())
            llmcFile = *f;
    if (!llmcFile.empty() && llmcFile.back() == '/')
        llmcFile.pop_back();
    std::int64_t jobTag = static_cast<std::int64_t>(getpid());
    if (!llmcFile.empty())
        world.broadcast(&jobTag, 1, comm::DType::I64, 0)->wait();
    ScratchFolder scratchFolder(
        !args.checkpointDir.empty() ? args.checkpointDir : llmcFile + ".loom-convert-" + std::to_string(jobTag),
        args.checkpointDir.empty() && rank == 0);
    const std::string& scratch = scratchFolder.path;
    tools::TrainReporter report(world, recorder, layout, { args.stream, args.metrics, args.traceOut, args.steps });
    train::CpuKernels kernels;
    train::TrainOptions options;
    options.steps = args.steps;
    options.seed = args.seed;
    options.lr = args.lr;
    options.warmup = args.warmup;
    options.recorder = report.tracing() ? &recorder : nullptr;
    train::Trainer trainer(layout, comms, corpus, options, kernels);
    if (rank == 0)
        std::printf("loom-train: %s, %s, %d ranks (tp=%lld cp=%lld pp=%lld dp=%lld, %s, %s), %lld steps, data: %s\n",
            layout.name.c_str(), layout.model.name.c_str(), size, static_cast<long long>(layout.parallel.tp),
            static_cast<long long>(layout.parallel.cp), static_cast<long long>(layout.parallel.pp),
            static_cast<long long>(layout.parallel.dp), std::string(plan::toString(layout.parallel.schedule)).c_str(),
            std::string(plan::toString(runtime.backend())).c_str(), static_cast<long long>(args.steps),
            corpus.description().c_str());
    if (rank == 0 && trainer.sharesEmbeddingRows())
        std::printf("loom-train: ZeRO-1: each data-parallel rank completes its own rows of the token embedding's "
                    "gradient from every rank's tokens; that gradient is not reduced\n");
    if (rank == 0 && trainer.sharedWeightRows() > 0)
        std::printf("loom-train: ZeRO-1: each data-parallel rank completes its own rows of %d of the blocks' weight "
                    "gradients from every rank's activations; those gradients are not reduced\n",
            trainer.sharedWeightRows());
    if (rank == 0 && trainer.sharesParameters())
        std::printf("loom-train: ZeRO-1: the data-parallel ranks of this machine keep one copy of the parameters in "
                    "shared memory; each updates its pieces in place, so nothing is all-gathered after the update\n");
    std::int64_t first = 0;
    if (args.resume) {
        if (auto folder = train::latestCheckpointChecked(args.checkpointDir)) {
            train::checkResumable(*folder, args.steps);
            first = trainer.resume(*folder);
            if (rank == 0)
                std::printf(
                    "loom-train: resumed from %s after step %lld\n", folder->c_str(), static_cast<long long>(first));
        } else if (rank == 0) {
            std::printf("loom-train: no checkpoint in %s yet; starting from step 0\n", args.checkpointDir.c_str());
        }
    }
    const std::string& initFrom = !args.initLlmc.empty() ? args.initLlmc : args.initSafetensors;
    if (!initFrom.empty()) {
        if (args.resume)
            throw std::runtime_error("--init-llmc or --init-safetensors and --resume both say where to start; use one");
        const std::string folder = scratch + "/llmc-import";
        std::int64_t ok = 1;
        std::string why;
        if (rank == 0) {
            try {
                if (!args.initLlmc.empty())
                    train::importLlmc(args.initLlmc, layout.model, plan::writeLayout(layout), folder);
                else
                    train::importSafetensors(args.initSafetensors, layout.model, plan::writeLayout(layout), folder);
            } catch (const std::exception& e) {
                ok = 0;
                why = e.what();
            }
        }
        world.broadcast(&ok, 1, comm::DType::I64, 0)->wait();
        if (!ok) {
            if (rank == 0)
                std::cerr << "loom-train: " << why << "\n";
            return 2;
        }
        trainer.resume(folder);
        world.barrier()->wait(); // every rank has read it
        scratchFolder.remove();
        if (rank == 0)
            std::printf("loom-train: weights from %s\n", initFrom.c_str());
    }
    report.begin(first);
    std::signal(SIGTERM, onTerminate);
    for (std::int64_t s = first; s < args.steps; ++s) {
        const train::StepResult r = trainer.step(s);
        train::checkFiniteStep(r.loss, r.gradNorm, s + 1, rank);
        report.stepDone(s, r);
        // Every rank learns whether any was asked to stop, so all save and stop at the same step.
        std::int64_t stop = g_terminate ? 1 : 0;
        world.allReduce(&stop, 1, comm::DType::I64, comm::ReduceOp::Max)->wait();
        const bool last = s + 1 == args.steps;
        if (!args.checkpointDir.empty()
            && (stop || last || (args.checkpointEvery > 0 && (s + 1) % args.checkpointEvery == 0))) {
            trainer.save(args.checkpointDir, s + 1);
            report.checkpoint(s + 1, args.checkpointDir);
        }
        if (stop) {
            report.end(trace::EndReason::Sigterm);
            if (rank == 0)
                std::printf("loom-train: stopped by SIGTERM after step %lld%s\n", static_cast<long long>(s + 1),
                    args.checkpointDir.empty() ? "" : "; checkpoint saved");
            return 143;
        }
        report.print(s, r);
    }
    report.writeTrace();
    if (!args.exportLlmc.empty() || !args.exportSafetensors.empty()) {
        const bool savedAtEnd = !args.checkpointDir.empty() && args.steps > first; // by the loop above
        if (!savedAtEnd)
            trainer.save(scratch, args.steps);
        if (rank == 0) {
            const std::string latest = *train::latestCheckpoint(scratch);
            if (!args.exportLlmc.empty()) {
                train::exportLlmc(latest, layout.model, args.exportLlmc);
                std::printf("loom-train: wrote %s\n", args.exportLlmc.c_str());
            }
            if (!args.exportSafetensors.empty()) {
                train::exportSafetensors(latest, layout.model, args.exportSafetensors, args.exportBf16);
                std::printf("loom-train: wrote %s/model.safetensors and config.json\n", args.exportSafetensors.c_str());
            }
            scratchFolder.remove();
        }
    }
    if (rank == 0) { // what ZeRO keeps (memory.zero): measured on this rank, not predicted
        const auto b = trainer.modelStateBytes();
        const auto mib = [](std::size_t bytes) { return static_cast<double>(bytes) / (1 << 20); };
        std::printf("loom-train: model state of rank 0 between steps: parameters %.2f MiB, gradients %.2f MiB, "
                    "optimizer %.2f MiB; during a step at most parameters %.2f MiB, gradients %.2f MiB\n",
            mib(b.params), mib(b.grads), mib(b.optimizer), mib(b.peakParams), mib(b.peakGrads));
    }
    report.end(trace::EndReason::Finished);
    world.barrier()->wait(); // no rank tears its communicators down while another still uses them
    return 0;
}

} // namespace

int main(int argc, char** argv)
{
    train::restartWithBetterBlasKernels(argv); // before MPI starts (train/Threads.h)
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
    comm::ProcessStart start;
    try {
        start = comm::processStartFromEnvironment();
    } catch (const std::exception& e) {
        std::cerr << "loom-train: " << e.what() << "\n";
        return 2;
    }
    // Every rank reads and checks the layout; rank 0 says what is wrong; all stop before any work.
    const auto read = plan::readLayoutFile(args->layout, profiles::BuiltinProfiles::instance());
    if (!read.ok()) {
        if (start.rank == 0)
            std::cerr << "loom-train: the layout " << args->layout << " is not valid:\n" << read.diagnostics.format();
        return 2;
    }
    const plan::Layout& layout = *read.layout;
    // Before the communicators: a GPU layout on a machine without a usable GPU stops every rank here, each
    // with its own line (ranks on different nodes may find different things).
    const tools::DeviceChoice deviceChoice = tools::chooseDevice(args->device, layout);
    if (deviceChoice.kind == device::DeviceKind::Cuda) {
        if (const std::string problem = tools::deviceProblem(start.rank, deviceChoice, device::probeGpus());
            !problem.empty()) {
            sayLine(problem);
            return 2;
        }
    }
    std::optional<comm::CommRuntime> runtime;
    try {
        const std::string parent = std::filesystem::absolute(args->layout).parent_path().string();
        runtime.emplace(layout.commBackend(), start, &argc, &argv, parent);
    } catch (const std::exception& e) {
        std::cerr << "loom-train: rank " << start.rank << ": " << e.what() << "\n";
        return 1;
    }
    const int rank = runtime->rank(), size = runtime->size();
    if (layout.parallel.worldSize() != size) {
        if (rank == 0)
            std::cerr << "loom-train: the layout needs tp·cp·pp·dp = " << layout.parallel.worldSize() << " ranks but "
                      << size << " were started; run mpirun -np " << layout.parallel.worldSize()
                      << " (or start that many processes)\n";
        return 2;
    }
    // Before any tensor is allocated: a layout far beyond this machine's memory fails here in one sentence,
    // not in every rank's allocator.
    const char* ignore = std::getenv("LOOM_IGNORE_MEMORY");
    if (!args->ignoreMemory && !(ignore && std::string(ignore) == "1")) {
        const std::string tooBig = plan::machineMemoryProblem(layout, ranksOnThisNode(size), plan::machineMemoryGB());
        if (!tooBig.empty()) {
            if (rank == 0)
                sayLine("loom-train: " + tooBig + " (or set LOOM_IGNORE_MEMORY=1)");
            return 2;
        }
    }
    std::string bindingNote; // the node's cores are shared by its ranks (train/Threads.h)
    const int threads = train::configureComputeThreads(ranksOnThisNode(size), bindingNote);
    if (rank == 0) {
        std::printf("loom-train: %d thread(s) per rank, OpenBLAS kernels %s%s\n", threads,
            train::blasCoreName().c_str(),
            train::blasCoreChosenByLoom()
                ? " (chosen by loom-train: this OpenBLAS does not know the processor and took its generic kernels)"
                : "");
        if (!bindingNote.empty())
            std::cerr << "loom-train: " << bindingNote << "\n";
        if (const std::string note = tools::precisionNote(deviceChoice, layout); !note.empty())
            std::cerr << note << "\n";
    }
    try {
        return runTraining(*args, layout, *runtime);
    } catch (const std::exception& e) {
        sayLine("loom-train: rank " + std::to_string(rank) + ": " + plainWhat(e));
        if (args->stream) // the launcher reads the failure from the stream, not from the log
            tools::reportFailure(stdout, rank, failureKind(e), plainWhat(e));
        runtime->abortJob(1);
    }
}
