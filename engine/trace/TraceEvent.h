#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::trace {

// What an event records. Compute kinds run on the compute lane, communication kinds on the comm lane.
enum class EventKind : std::uint8_t {
    Forward,
    Backward,
    Recompute,
    Optimizer,
    DataLoad,
    Checkpoint,
    Wait, // time blocked in a receive or a wait
    AllReduce,
    ReduceScatter,
    AllGather,
    Broadcast,
    Send,
    Recv,
    Barrier,
    AllToAll, // block j of every member's buffer goes to member j (MoE dispatch and combine)
    // Device work of imported GPU traces (appended so stored kinds keep their values):
    Kernel, // a compute kernel launched outside any forward / backward / optimizer range
    Memcpy,
    Memset,
    Collective, // a communication kernel whose collective no trace field names (still communication)
    // Zero-bubble schedules (appended likewise): the weight-gradient part W of a split backward, whose
    // Backward event is then B, the input gradients only.
    Weight,
    // Imported GPU traces (appended likewise): the host call that launched device work (cudaLaunchKernel,
    // cudaMemcpyAsync, hipLaunchKernel...), on the host row of its rank, linked to that work by `correlation`.
    // It is the host's time spent launching, never a pass or communication: statistics leave it out.
    Launch,
};
// Forward, backward (B), weight gradients (W) and recompute: a pipeline stage's passes.
bool isPass(EventKind kind);

enum class Lane : std::uint8_t { Compute, Comm };
enum class EventSource : std::uint8_t { Measured, Simulated };

// The group a communication event ran in.
// Context, Expert, ExpertData appended so stored kinds keep their values.
enum class GroupKind : std::uint8_t {
    World,
    Tensor,
    Pipeline,
    Data,
    Node,
    CrossNode,
    Other,
    Context, // context-parallel group (ring attention's K/V exchange)
    Expert, // expert-parallel group: ep consecutive members of a DP group (MoE all-to-all)
    ExpertData, // expert-data-parallel group: the members at one position of every expert group
};

// The algorithm a collective actually ran with (after any fallback).
enum class Algorithm : std::uint8_t {
    None, // compute events, point-to-point
    Library, // MPI's or NCCL's own collective
    Ring, // Loom's ring on point-to-point
    ChunkedRing, // Loom's ring with chunks pipelined within each step
    Hierarchical, // Loom's two-level all-reduce
    TwoPhaseCompressed, // compressed reduce-scatter (all-to-all) + compressed all-gather
    SparseAllGather, // top-k: all-gather of (index, value) pairs
    Auto, // a layout's "auto": resolved to one of the above before anything runs
    SharedMemory, // Loom's all-reduce through a shared-memory segment (host backends, one machine)
};

// One thing one rank did, measured or simulated. Times are nanoseconds on the rank's clock (aligned to
// rank 0's by the telemetry layer). Fields that do not apply are -1 (ints) or 0 (bytes).
struct TraceEvent {
    std::int32_t rank = -1;
    Lane lane = Lane::Compute;
    EventKind kind = EventKind::Forward;
    EventSource source = EventSource::Measured;
    std::int32_t step = -1;
    std::int32_t microBatch = -1;
    std::int32_t stage = -1;
    std::int32_t chunk = -1; // virtual pipeline chunk
    std::int64_t startNs = 0;
    std::int64_t endNs = 0;
    std::uint64_t bytes = 0; // logical payload (uncompressed)
    std::uint64_t wireBytes = 0; // what this rank actually sent
    std::int32_t group = -1; // id of a GroupInfo (collectives) or -1
    std::int32_t groupSize = 0; // members of that group (for bus bandwidth), 0 when none
    std::int32_t peer = -1; // global rank of the other side (point-to-point) or -1
    Algorithm algorithm = Algorithm::None;
    std::string codec; // "" or the codec's text form ("int8", "topk:0.01")
    std::int32_t stream = -1; // the device stream of imported GPU work; -1 on the host
    // An imported GPU trace's correlation id: a Launch and the device work it launched share it; -1: none.
    std::int64_t correlation = -1;

    std::int64_t durationNs() const { return endNs - startNs; }
    bool operator==(const TraceEvent&) const = default;
};

// A communication group, referenced by TraceEvent::group.
struct GroupInfo {
    std::int32_t id = -1;
    GroupKind kind = GroupKind::Other;
    std::vector<std::int32_t> ranks; // global ranks, in group order
    std::string name; // "DP group of tp=0 pp=1"

    bool operator==(const GroupInfo&) const = default;
};

std::string_view toString(EventKind kind);
std::string_view toString(Lane lane);
std::string_view toString(GroupKind kind);
std::string_view toString(Algorithm algorithm);
Lane laneOf(EventKind kind);
// The kind a group's name or kind text begins with (its first word: "TP", "PP", "DP", "CP", "world", "node",
// "cross-node", as toString writes them and loom-train names its groups: "TP group of pp=0 dp=1"); Other
// when it begins with none of them.
GroupKind groupKindFromName(std::string_view name);
// nccl-tests' bus-bandwidth factor of a collective over `members` ranks: 2(n-1)/n for all-reduce, (n-1)/n
// for all-gather, reduce-scatter and all-to-all, 1 otherwise (and for groups of one).
double busBandwidthFactor(EventKind kind, std::int32_t members);

// Nanoseconds on this process's monotonic clock.
std::int64_t nowNs();

} // namespace loom::trace
