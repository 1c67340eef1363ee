#pragma once

#include "engine/trace/DeviceStats.h"
#include "engine/trace/TraceEvent.h"

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace loom::trace {

// One PyTorch profiler trace (torch.profiler's export_chrome_trace), one per rank: the Kineto object of
// current releases ({"schemaVersion", "distributedInfo", "traceEvents", ...}) or the plain event list that
// PyTorch builds without Kineto write (Debian's python3-torch 1.13).
struct TorchTraceFile {
    std::string name; // for messages
    std::string text;
    std::string path; // read from here (streamed; .json or .json.gz) when `text` is empty; "-": standard input
};

struct TorchImportOptions {
    // The pipeline stage of each rank (index: rank), e.g. from a layout's rank grid; empty: not known.
    std::vector<std::int32_t> stageOfRank;
};

// The traces as Loom's events. `lacks` says what the traces do not record (so that nothing is guessed),
// `notes` how what is there was read (clock alignment, which events became compute and communication).
struct TorchImport {
    std::vector<TraceEvent> events;
    std::vector<GroupInfo> groups; // id == index
    std::int32_t ranks = 0;
    std::int32_t steps = 0;
    std::vector<ProfilerStepRange> profilerSteps; // each rank's ProfilerStep#N ranges, on the events' clock
    std::string form; // "kineto" or "event list"
    std::vector<std::string> lacks;
    std::vector<std::string> notes;
};

// A file that is not a PyTorch profiler trace, or traces that do not fit together. The message names the
// file, the field and what was expected.
class TorchTraceError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

constexpr std::size_t kMaxTorchTraceBytes = std::size_t(1) << 30;
constexpr int kMaxTorchTraceDepth = 64;
// What is read of one streamed file (after decompression): memory holds its events, not its text.
constexpr std::uint64_t kMaxTorchTraceStreamBytes = std::uint64_t(4) << 30;

// Ranks come from each file's distributedInfo.rank, else from the order of `files`. Steps from the
// ProfilerStep#N ranges. GPU traces: the device's kernels, copies and sets on their streams, each linked to
// its launch by `correlation` (its step is the launch's; collectives take kind, bytes, dtype and group
// from the record_param_comms / nccl: / c10d:: op around the launch). Host-only traces: compute from
// forward and backward ranges (record_function annotations such as
// "forward mb 0", module forwards such as "DistributedDataParallel.forward", the autograd engine's backward
// functions); communication from the process group's own ops (gloo:all_reduce, nccl:send, ...), NCCL
// kernels on GPU streams, and record_param_comms (kind, bytes and group where recorded). Clocks: Kineto's
// as recorded; the event list's start at each process's profiler start, so its ranks are aligned on the
// ends of the collectives that every rank ran. Throws TorchTraceError.
TorchImport importTorchTraces(const std::vector<TorchTraceFile>& files, const TorchImportOptions& options = {});

} // namespace loom::trace
