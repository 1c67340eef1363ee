#pragma once

#include "engine/comm/CommConfig.h"
#include "engine/comm/Communicator.h"
#include "engine/trace/TraceRecorder.h"

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <memory>

namespace loom::comm {

class NcclTransport;

// The NCCL backend: device buffers, one CUDA stream per communicator. Every call is enqueued on the stream
// at once and returns a Work that completes when the stream reaches it (a CUDA event), so the host and
// other streams run on. The NCCL unique id travels over MPI. Loom's own algorithms run on ncclSend/ncclRecv
// with a reduction kernel; gradient codecs stage through host memory and run over MPI.
//
// Use one communicator from the thread that created it (the CUDA device is per thread). On a machine
// without a GPU the constructor throws CommError saying so; deviceProblem() tells beforehand.
class NcclCommunicator final : public Communicator {
public:
    // Collective over `comm`. The device is the member's local rank (among ranks on its node) modulo the
    // node's device count.
    NcclCommunicator(MPI_Comm comm, trace::GroupKind kind, std::string name, trace::TraceRecorder* recorder,
                     CommConfig config = CommConfig::fromEnvironment(), std::vector<int> nodeOfMember = {});
    ~NcclCommunicator() override;

    // "" when a CUDA device is usable, else a sentence saying why not ("no GPU: ...").
    static std::string deviceProblem();
    struct Shared;  // state shared with the communicator's Works

    int rank() const override { return m_rank; }
    int size() const override { return m_size; }
    const trace::GroupInfo& group() const override { return m_group; }
    bool onDevice() const override { return true; }
    int device() const { return m_device; }

    WorkPtr send(const void* data, std::size_t count, DType type, int peer, int tag = 0) override;
    WorkPtr recv(void* data, std::size_t count, DType type, int peer, int tag = 0) override;
    WorkPtr sendRecv(const void* sendData, int sendPeer, void* recvData, int recvPeer, std::size_t count, DType type,
                     int tag = 0) override;
    WorkPtr broadcast(void* data, std::size_t count, DType type, int root) override;
    WorkPtr allReduce(void* data, std::size_t count, DType type, ReduceOp op,
                      const CollectiveOptions& options = {}) override;
    WorkPtr reduceScatter(const void* send, void* recv, std::size_t recvCount, DType type, ReduceOp op,
                          const CollectiveOptions& options = {}) override;
    WorkPtr allGather(const void* send, void* recv, std::size_t sendCount, DType type,
                      const CollectiveOptions& options = {}) override;
    WorkPtr barrier() override;

private:
    struct Call;
    WorkPtr finish(Call& call);
    void begin();
    void check(const Call& call);
    std::string describe(const Call& call) const;
    void ensureHierarchy();

    MPI_Comm m_mpi = MPI_COMM_NULL;
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
    std::shared_ptr<Shared> m_shared;  // the communicators a timed-out Work aborts, and whether it did
    cudaEvent_t m_callerReady = nullptr;
    std::unique_ptr<NcclTransport> m_transport;
    float* m_barrierWord = nullptr;
};

}  // namespace loom::comm
