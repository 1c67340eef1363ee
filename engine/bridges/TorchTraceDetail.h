#pragma once
// Internals of the PyTorch trace importer (TorchTrace*.cpp), shared between its files.

#include "engine/bridges/TorchTrace.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <streambuf>
#include <string>
#include <vector>

namespace loom::trace::torch {

// What record_param_comms (or a c10d / nccl op) says about one collective.
struct CommArgs {
    bool present = false; // record_param_comms' arguments were there (else at most `collective`, from a name)
    std::string collective; // "allreduce", "send", ...
    std::uint64_t bytes = 0; // 0: not recorded
    std::string dtype;
    std::int32_t groupSize = 0;
    std::vector<std::int32_t> groupRanks; // empty: not recorded (or cut short by the profiler)
    std::string groupName;
    std::int32_t peer = -1;
};

// The event categories Loom tells apart; PyTorch 1.8's capitalised names ("Kernel", "Runtime", "Operator",
// "Memcpy", "Memset") read as today's.
enum class Category : std::uint8_t {
    Other,
    CpuOp,
    UserAnnotation,
    Runtime,
    Kernel,
    Memcpy,
    Memset,
    GpuAnnotation,
    Sync
};

// One complete ("ph": "X") event of one rank's trace, times in integer nanoseconds on that file's clock
// (baseTimeNanoseconds + ts, exactly as written).
struct RawEvent {
    std::uint32_t name = 0; // index in RankTrace::names
    std::uint32_t thread = 0; // index in RankTrace::threads ("pid/tid")
    std::int64_t startNs = 0, endNs = 0;
    std::int64_t correlation = -1;
    std::int32_t stream = -1; // args.stream: a device stream, -1 on the host
    std::int32_t comm = -1; // index in RankTrace::comms, or -1
    Category cat = Category::Other;
    bool gpu = false; // a device lane (kernels, copies, device-side annotations)
    bool kernel = false;
};

// One process group of distributedInfo.pg_config.
struct ProcessGroup {
    std::string name, desc;
    std::int32_t size = 0;
    std::vector<std::int32_t> ranks;
};

struct RankTrace {
    std::string file;
    std::int32_t rank = -1;
    std::int32_t worldSize = 0; // distributedInfo.world_size, 0: not recorded
    bool kineto = false;
    std::vector<ProcessGroup> groups;
    std::vector<std::string> names, threads;
    std::vector<CommArgs> comms;
    std::vector<RawEvent> events;
    std::vector<std::string> badSteps; // ProfilerStep names whose number is not one ("ProfilerStep#-5")

    const std::string& nameOf(const RawEvent& e) const { return names[e.name]; }
};

// Reads one file (validating it): its text, or when the text is empty its path, streamed (gzip or not) with
// at most kMaxTorchTraceStreamBytes read; throws TorchTraceError naming the file, the field and what was
// expected.
RankTrace readRankTrace(const TorchTraceFile& file, std::uint64_t maxBytes = kMaxTorchTraceStreamBytes);

// The bytes of `path` ("-": standard input), gzip or plain, refused unless a regular file (a FIFO is never
// waited on), at most `limit` of them after decompression; errors name `name`.
std::unique_ptr<std::streambuf> openTraceStream(const std::string& path, const std::string& name, std::uint64_t limit);

// Loom's kind for a collective's name as PyTorch or NCCL write it ("all_reduce", "allreduce",
// "_allgather_base", "AllReduce", "recv_anysource", ...); nullopt for kinds Loom has none of.
std::optional<EventKind> collectiveKind(const std::string& name);

// The collective an NCCL kernel's name says: "ncclDevKernel_AllReduce_Sum_f32_RING_LL(...)",
// "ncclKernel_AllGather_RING_LL_Sum_int8_t" and NCCL < 2.8's "ncclAllReduceRingLLKernel_sum_f32" give
// "AllReduce" / "AllGather"; "SendRecv" and "Generic" (every collective, in Meta's NCCL and RCCL) say nothing.
std::string ncclKernelCollective(const std::string& name);

// HTA's kernel types (hta/common/types.py), by the kernel's name.
enum class KernelType : std::uint8_t { Computation, Communication, Memory, Other };
KernelType kernelType(const std::string& name);

// Communication events of a host-only trace: the process group's ops (gloo:..., nccl:...), else
// record_param_comms; with sizes and groups from a record_param_comms that runs around or inside the op on
// the same thread. `skipped` counts operations of kinds Loom has no name for, by name.
struct CommEvent {
    EventKind kind;
    std::int64_t startNs, endNs;
    CommArgs args;
    std::string source; // "gloo ops", ...
};
std::vector<CommEvent> communication(const RankTrace& trace, std::vector<std::string>& skipped);

// A ProfilerStep#N range on the host (N digits only, as HTA reads them), and a forward / backward / optimizer
// range of the host's annotations.
struct StepRange {
    std::int32_t step;
    std::int64_t startNs, endNs;
};
struct Span {
    EventKind kind;
    std::int64_t startNs, endNs;
    std::int32_t microBatch = -1;
};

// Device events of one rank (kernels, copies, sets on a stream), each linked to its launch by `correlation`
// (kept in TraceEvent::correlation, and the launch itself as a Launch event on the host, before its first work):
// its step is the launch's (HTA's rule), compute kernels take the kind of the host range that launched them,
// collectives the kind, bytes, dtype and group of the record_param_comms / nccl: / c10d:: op around the launch.
// Times on the file's clock.
struct DeviceImport {
    std::vector<TraceEvent> events;
    std::vector<CommArgs> comm; // per event
    std::int64_t unlinked = 0; // device events whose correlation leads to no launch
    std::int64_t launches = 0; // host calls kept as Launch events (one per correlation that launched work)
    std::int64_t groupOfOne = 0; // collectives on a group of one rank: no transfer, bytes 0
    std::map<std::string, std::int64_t> unknownKinds; // communication kernels of no known kind, by name
};
DeviceImport deviceEvents(const RankTrace& trace, const std::vector<StepRange>& steps, const std::vector<Span>& spans);

// The step of a launch at `ns`: the range holding it, else the last one starting before it, else the first.
std::int32_t stepAt(const std::vector<StepRange>& steps, std::int64_t ns);

} // namespace loom::trace::torch
