#pragma once
// Internals of the PyTorch trace importer (TorchTrace*.cpp), shared between its files.

#include "engine/trace/TorchTrace.h"

#include <optional>
#include <string>
#include <vector>

namespace loom::trace::torch {

// What record_param_comms (or an NCCL kernel's args) says about one collective.
struct CommArgs {
    bool present = false; // record_param_comms' arguments were there (else at most `collective`, from a kernel's name)
    std::string collective; // "allreduce", "send", ...
    std::uint64_t bytes = 0; // 0: not recorded
    std::int32_t groupSize = 0;
    std::vector<std::int32_t> groupRanks; // empty: not recorded (or cut short by the profiler)
    std::string groupName;
    std::int32_t peer = -1;
};

// One complete ("ph": "X") event of one rank's trace, times in microseconds on that trace's clock.
struct RawEvent {
    std::string name;
    std::string thread; // "pid/tid"
    double startUs = 0, endUs = 0;
    bool gpu = false; // a device lane (kernels, copies)
    bool kernel = false;
    CommArgs comm;
};

struct RankTrace {
    std::string file;
    std::int32_t rank = -1;
    bool kineto = false;
    std::vector<RawEvent> events;
};

// Reads one file (validating it); throws TorchTraceError naming the file, the field and what was expected.
RankTrace readRankTrace(const TorchTraceFile& file);

// Loom's kind for a collective's name as PyTorch or NCCL write it ("all_reduce", "allreduce",
// "_allgather_base", "AllReduce", "recv_anysource", ...); nullopt for kinds Loom has none of.
std::optional<EventKind> collectiveKind(const std::string& name);

// Communication events of one rank: from NCCL kernels, else the process group's ops (gloo:..., nccl:...),
// else record_param_comms; with sizes and groups from record_param_comms where the events carry none.
// `skipped` counts operations of kinds Loom has no name for, by name.
struct CommEvent {
    EventKind kind;
    double startUs, endUs;
    CommArgs args;
    std::string source; // "NCCL kernels", "gloo ops", ...
};
std::vector<CommEvent> communication(const RankTrace& trace, std::vector<std::string>& skipped);

} // namespace loom::trace::torch
