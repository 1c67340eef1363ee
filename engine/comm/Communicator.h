#pragma once

#include "engine/comm/DType.h"
#include "engine/comm/Work.h"
#include "engine/plan/Layout.h"
#include "engine/trace/TraceEvent.h"

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace loom::comm {

// Which all-reduce (reduce-scatter, all-gather) to run: one enum with the plan and the trace (what a
// layout asks for, what a collective is asked to run and what it ran are the same vocabulary). Library is
// the backend's own (MPI's, Gloo's, NCCL's); Ring, ChunkedRing and Hierarchical are Loom's, written on
// point-to-point (Transport) so their steps can be seen and taught. trace::toString names them.
using CollectiveAlgorithm = trace::Algorithm;
// Parses "library", "ring", "chunked", "hierarchical" (the algorithms a caller may ask for).
std::optional<CollectiveAlgorithm> collectiveAlgorithmFromString(std::string_view text);

// Error-feedback state of one gradient tensor for lossy codecs (Karimireddy et al. 2019): what
// compression lost this step is added to the next step's input. One per tensor (or bucket); the caller
// keeps it across steps. `worker` is this rank's input residual; `server` the residual of the chunk this
// rank reduces in the two-phase scheme.
struct ErrorFeedback {
    std::vector<float> worker;
    std::vector<float> server;
};

struct CollectiveOptions {
    CollectiveAlgorithm algorithm = CollectiveAlgorithm::Library;
    std::size_t chunkBytes = 1 << 20; // Chunked: the pipelining unit
    plan::Codec codec; // all-reduce of fp32 sums only; none = uncompressed
    std::size_t codecBlock = 256; // int8/int4: elements per scale
    ErrorFeedback* feedback = nullptr; // lossy codecs: residual carried across calls (null = no feedback)
};

// Communicator::sharedMemory's reason when the group spans nodes (no memory to share, and nothing wrong).
inline constexpr const char* kMembersOnSeveralNodes = "the members are on more than one node";

// A group of ranks that talk to each other: each TP, CP, PP and DP group of the rank grid is one.
//
// Every call returns at once with a Work; operations of one communicator run in the order they were called
// (collectives must be called in the same order on every member, as with MPI and NCCL). Point-to-point
// calls may overlap each other and collectives. Ranks and peers are ranks within the group. Buffers are host
// memory for the MPI and Gloo backends and device memory for the NCCL backend (see onDevice()). Each operation records
// a trace event (kind, bytes, wire bytes, group, peer, algorithm, codec, start, end) when a recorder is set.
//
// Failures are reported by Work::wait() as CommError naming the operation, the group and the ranks: a
// mismatch of counts or types across ranks, a peer that does not answer within the timeout. After a
// failure the communicator refuses further operations with the first error.
class Communicator {
public:
    virtual ~Communicator() = default;

    virtual int rank() const = 0;
    virtual int size() const = 0;
    // The group: its kind, its members as global ranks, and its name for messages.
    virtual const trace::GroupInfo& group() const = 0;
    virtual bool onDevice() const = 0;

    // `tag` (0 to 32767) lets messages between the same pair be matched out of order (MPI); NCCL matches
    // in posting order and ignores it.
    virtual WorkPtr send(const void* data, std::size_t count, DType type, int peer, int tag = 0) = 0;
    virtual WorkPtr recv(void* data, std::size_t count, DType type, int peer, int tag = 0) = 0;
    // Sends to one peer and receives from another at once (a ring shift, a pipeline exchange); on NCCL the
    // two are grouped, so neither waits for the other. Completes when both have.
    virtual WorkPtr sendRecv(
        const void* sendData, int sendPeer, void* recvData, int recvPeer, std::size_t count, DType type, int tag = 0)
        = 0;
    virtual WorkPtr broadcast(void* data, std::size_t count, DType type, int root) = 0;
    // In place: every rank ends with the reduction of every rank's `data`.
    virtual WorkPtr allReduce(
        void* data, std::size_t count, DType type, ReduceOp op, const CollectiveOptions& options = {})
        = 0;
    // `send` holds size()·recvCount elements; rank r receives the reduction of block r.
    virtual WorkPtr reduceScatter(const void* send, void* recv, std::size_t recvCount, DType type, ReduceOp op,
        const CollectiveOptions& options = {})
        = 0;
    // `recv` holds size()·sendCount elements; block r comes from rank r.
    virtual WorkPtr allGather(
        const void* send, void* recv, std::size_t sendCount, DType type, const CollectiveOptions& options = {})
        = 0;
    virtual WorkPtr barrier() = 0;
    // All-to-all with equal splits (MPI_Alltoall): `send` holds size()·count elements, block j going to
    // rank j; `recv` holds size()·count elements, block i from rank i.
    // options.algorithm: Library (the backend's own) or Ring (Loom's pairwise exchange on point-to-point:
    // n-1 steps, step s sending to rank+s and receiving from rank-s).
    virtual WorkPtr allToAll(
        const void* send, void* recv, std::size_t count, DType type, const CollectiveOptions& options = {})
        = 0;
    // All-to-all with variable splits (MPI_Alltoallv): rank j gets sendCounts[j] elements, the blocks packed
    // in rank order in `send`; recvCounts[i] elements come from rank i, packed in rank order in `recv`.
    // Both vectors hold size() entries, and each rank's sendCounts[j] must equal rank j's recvCounts[i].
    // They are copied at the call.
    virtual WorkPtr allToAllV(const void* send, const std::vector<std::size_t>& sendCounts, void* recv,
        const std::vector<std::size_t>& recvCounts, DType type, const CollectiveOptions& options = {})
        = 0;
    // Host memory of `bytes` that every member maps, where the members are processes of one machine (what
    // MPI_Win_allocate_shared gives): what one member writes there the others read after a barrier().
    // Collective; call it with none of this communicator's operations in flight. Null on every member, with
    // the reason in `why`, where the members cannot share memory (several machines: kMembersOnSeveralNodes;
    // device memory; no room in /dev/shm); the memory stays mapped while any copy of the pointer lives.
    virtual std::shared_ptr<void> sharedMemory(std::size_t bytes, std::string& why)
    {
        (void)bytes;
        why = "this backend has no shared host memory";
        return nullptr;
    }
};

// The TP, PP and DP communicators of this rank, and the world. The world is the control plane (clock
// alignment, trace gathering, checkpoint agreement, the loss, stop flags): it works on host memory with
// every backend. Made by makeGridCommunicators() (engine/comm/Backends.h) for the layout's backend.
// `data` sums gradients: the DP group, or with context parallelism the dp·cp ranks of
// RankGrid::gradientGroupOf (Megatron's dp-cp group; index = dp·cp + cp coordinate). `context` is the CP
// group (ring attention's K/V exchange; one rank when cp = 1).
struct GridCommunicators {
    std::unique_ptr<Communicator> world;
    std::unique_ptr<Communicator> tensor;
    std::unique_ptr<Communicator> pipeline;
    std::unique_ptr<Communicator> data;
    std::unique_ptr<Communicator> context;
    // Mixture of experts (parallel.ep > 1; null otherwise): the expert-parallel group (ep consecutive
    // members of the DP group: the all-to-all of dispatch and combine) and the expert-data-parallel group
    // (the DP members at this rank's position in every expert group: experts' gradients). See
    // plan::expertGroupOf (engine/plan/ExpertGroups.h).
    std::unique_ptr<Communicator> expert;
    std::unique_ptr<Communicator> expertData;
};

} // namespace loom::comm
