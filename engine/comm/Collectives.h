#pragma once

#include "engine/comm/CommConfig.h"
#include "engine/comm/Communicator.h"
#include "engine/comm/Transport.h"
#include "engine/trace/TraceEvent.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace loom::comm {

class SharedArena;

// One collective call as every backend sees it.
struct CollectiveCall {
    trace::EventKind kind = trace::EventKind::AllReduce;
    void* data = nullptr; // all-reduce, broadcast (in place)
    const void* send = nullptr; // reduce-scatter, all-gather
    void* recv = nullptr;
    std::size_t count
        = 0; // all-reduce, broadcast: elements; reduce-scatter: per-rank result; all-gather: per-rank input
    DType type = DType::F32;
    ReduceOp op = ReduceOp::Sum;
    int root = 0;
    CollectiveOptions options;
    std::uint64_t sequence = 0; // 1, 2, ... per communicator, for messages
    // All-to-all: elements to and from each member (variable splits); empty: `count` to and from each.
    std::vector<std::size_t> sendCounts, recvCounts;
};

// What a backend supplies to the collective layer: its library's collectives, point-to-point in its memory
// space, and copies between that memory and the host. Everything else (the agreement check, algorithm
// choice and fallback, ring staging, codecs, wire bytes, trace events) is written once, in runCollective()
// and collectiveEvent(), for every backend.
class CollectiveBackend {
public:
    virtual ~CollectiveBackend() = default;
    // Runs `call` with the library's own algorithm. Host backends return when it is done; NCCL returns once
    // it is enqueued on the communicator's stream. Throws CommError naming the call.
    virtual void runLibrary(const CollectiveCall& call, const std::string& context) = 0;
    // Point-to-point among the members, in the backend's memory space (Loom's ring and chunked ring).
    virtual Transport& transport() = 0;
    // Point-to-point among the members on host memory (the agreement check and the codecs); transport()
    // for host backends.
    virtual Transport& hostTransport() = 0;
    // Transports among the members on this rank's node and among the members with this rank's local index
    // on every node (hierarchical all-reduce); created on first use, collectively. Only called when every
    // node holds the same number of members.
    virtual std::pair<Transport*, Transport*> hierarchy() = 0;
    // The members' shared-memory segment (the "shm" all-reduce), created collectively on first use; null
    // where the backend has none (NCCL) or the members are not on one machine (they then run the ring).
    virtual SharedArena* sharedArena() { return nullptr; }
    // Host backends: plain copies. NCCL: copies between device and host (codecs run on the host).
    virtual void toHost(void* host, const void* data, std::size_t bytes);
    virtual void fromHost(void* data, const void* host, std::size_t bytes);
};

// "all-reduce #3 (1024 fp32, ring) on DP group of tp=0 pp=0 [0, 2]".
std::string describe(const CollectiveCall& call, const trace::GroupInfo& group);
// The call's logical payload: the buffer, or the whole gathered/scattered array.
std::uint64_t logicalBytes(const CollectiveCall& call, int size);
// What a library collective is counted as sending: nccl-tests' standard traffic (the logical bytes times
// trace::busBandwidthFactor); a broadcast's root sends the buffer and the others nothing; a barrier nothing.
std::uint64_t libraryWireBytes(const CollectiveCall& call, int rank, int size);
// Whether every node holds the same number of members (else the hierarchical all-reduce's cross-node
// groups would not line up, and it falls back to the ring).
bool evenNodes(const std::vector<int>& nodeOfMember);

struct CollectiveOutcome {
    trace::Algorithm algorithm = trace::Algorithm::None; // what ran, after any fallback
    std::uint64_t wireBytes = 0; // bytes this rank sent
};

// Runs `call` on `backend` for member `rank` of `size`: the agreement check (config.checkAgreement), the
// codec path for compressed fp32 sums, the library path, Loom's ring and chunked ring (reduce-scatter and
// all-gather staged through scratch memory), and the hierarchical all-reduce with its fallback to the
// ring. Throws CommError naming the call.
CollectiveOutcome runCollective(CollectiveBackend& backend, const CollectiveCall& call, const trace::GroupInfo& group,
    int rank, int size, const std::vector<int>& nodeOfMember, const CommConfig& config);

// The trace event of a finished collective (or point-to-point call, with `peer` its global rank).
trace::TraceEvent collectiveEvent(
    const CollectiveCall& call, const trace::GroupInfo& group, const WorkStats& stats, int peer = -1);

} // namespace loom::comm
