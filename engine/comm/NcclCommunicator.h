#pragma once

#include "engine/comm/Collectives.h"
#include "engine/comm/CommConfig.h"
#include "engine/comm/Communicator.h"
#include "engine/comm/CommunicatorTransport.h"
#include "engine/trace/TraceRecorder.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <memory>

namespace loom::comm {

class NcclTransport;

// The NCCL backend: device buffers, one CUDA stream per communicator. Every call is enqueued on the stream
// at once and returns a Work that completes when the stream reaches it (a CUDA event), so the host and
// other streams run on. A host communicator of the same members (MPI or Gloo) carries the NCCL unique id,
// the agreement check and the gradient codecs (staged through host memory). The collective layer
// (runCollective) chooses the algorithm; Loom's own algorithms run on ncclSend/ncclRecv with a reduction
// kernel.
//
// Use one communicator from the thread that created it (the CUDA device is per thread). On a machine
// without a GPU the constructor throws CommError saying so; deviceProblem() tells beforehand.
class NcclCommunicator final : public Communicator, private CollectiveBackend {
public:
    // Collective over `host` (whose members this communicator takes). The device is `localRank` (the
    // process's rank among the processes of its node) modulo the node's device count. `nodeOfMember` as
    // for the host backends (empty: one node).
    NcclCommunicator(std::unique_ptr<Communicator> host, int localRank, trace::TraceRecorder* recorder,
        CommConfig config = CommConfig::fromEnvironment(), std::vector<int> nodeOfMember = {});
    ~NcclCommunicator() override;

    // "" when a CUDA device is usable, else a sentence saying why not ("no GPU: ...").
    static std::string deviceProblem();
    struct Shared; // state shared with the communicator's Works

    int rank() const override { return m_rank; }
    int size() const override { return m_size; }
    const trace::GroupInfo& group() const override { return m_group; }
    bool onDevice() const override { return true; }
    int device() const { return m_device; }
    // The stream the caller computes on (a device::CudaDevice stream's handle; nullptr: the legacy default
    // stream, the default). Every call makes the communication stream wait, through a CUDA event, for the
    // work queued there so far, so a bucket's all-reduce starts once the backward has written it while the
    // rest of the backward goes on.
    void setComputeStream(cudaStream_t stream) { m_computeStream = stream; }

    WorkPtr send(const void* data, std::size_t count, DType type, int peer, int tag = 0) override;
    WorkPtr recv(void* data, std::size_t count, DType type, int peer, int tag = 0) override;
    WorkPtr sendRecv(const void* sendData, int sendPeer, void* recvData, int recvPeer, std::size_t count, DType type,
        int tag = 0) override;
    WorkPtr broadcast(void* data, std::size_t count, DType type, int root) override;
    WorkPtr allReduce(
        void* data, std::size_t count, DType type, ReduceOp op, const CollectiveOptions& options = {}) override;
    WorkPtr reduceScatter(const void* send, void* recv, std::size_t recvCount, DType type, ReduceOp op,
        const CollectiveOptions& options = {}) override;
    WorkPtr allGather(const void* send, void* recv, std::size_t sendCount, DType type,
        const CollectiveOptions& options = {}) override;
    WorkPtr barrier() override;
    // Grouped ncclSend/ncclRecv to and from every member (NCCL has no all-to-all of its own).
    WorkPtr allToAll(
        const void* send, void* recv, std::size_t count, DType type, const CollectiveOptions& options = {}) override;
    WorkPtr allToAllV(const void* send, const std::vector<std::size_t>& sendCounts, void* recv,
        const std::vector<std::size_t>& recvCounts, DType type, const CollectiveOptions& options = {}) override;

private:
    WorkPtr collective(CollectiveCall call);
    WorkPtr pointToPoint(CollectiveCall call, int peer, const std::string& context, WorkStats stats);
    void begin();
    void runLibrary(const CollectiveCall& call, const std::string& context) override;
    Transport& transport() override;
    Transport& hostTransport() override { return m_hostTransport; }
    std::pair<Transport*, Transport*> hierarchy() override;
    void toHost(void* host, const void* data, std::size_t bytes) override;
    void fromHost(void* data, const void* host, std::size_t bytes) override;

    std::unique_ptr<Communicator> m_host;
    CommunicatorTransport m_hostTransport;
    ncclComm_t m_comm = nullptr;
    ncclComm_t m_nodeLocal = nullptr;
    ncclComm_t m_crossNode = nullptr;
    cudaStream_t m_stream = nullptr;
    int m_rank = 0;
    int m_size = 1;
    int m_device = 0;
    trace::GroupInfo m_group;
    trace::TraceRecorder* m_recorder;
    CommConfig m_config;
    std::vector<int> m_nodeOf;
    std::uint64_t m_sequence = 0;
    std::shared_ptr<Shared> m_shared; // the communicators a timed-out Work aborts, and whether it did
    cudaEvent_t m_callerReady = nullptr;
    cudaStream_t m_computeStream = nullptr; // setComputeStream
    std::unique_ptr<NcclTransport> m_transport;
    std::unique_ptr<NcclTransport> m_localTransport;
    std::unique_ptr<NcclTransport> m_crossTransport;
    float* m_barrierWord = nullptr;
};

} // namespace loom::comm
