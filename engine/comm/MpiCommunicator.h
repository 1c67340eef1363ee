#pragma once

#include "engine/comm/CommConfig.h"
#include "engine/comm/Communicator.h"
#include "engine/plan/RankGrid.h"
#include "engine/trace/TraceRecorder.h"

#include <mpi.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace loom::comm {

class MpiTransport;

// Initialises MPI for the process (MPI_THREAD_MULTIPLE: communicators run collectives on their own
// threads) and finalises it when destroyed. Create one in main() before any communicator; destroy every
// communicator before it. Throws CommError when MPI lacks thread support.
class MpiSession {
public:
    MpiSession(int* argc, char*** argv);
    ~MpiSession();
    MpiSession(const MpiSession&) = delete;
    MpiSession& operator=(const MpiSession&) = delete;

    int worldRank() const { return m_rank; }
    int worldSize() const { return m_size; }

private:
    bool m_initialisedHere = false;
    int m_rank = 0;
    int m_size = 1;
};

// The MPI backend: host buffers, real processes under mpirun.
//
// Collectives run one at a time, in call order, on the communicator's own worker thread (as PyTorch's
// ProcessGroupMPI does), so the caller computes while they run; point-to-point calls are posted at once
// from the caller's thread. Collectives and point-to-point use separate duplicates of the communicator, so
// Loom's own algorithms' messages never match a user's send.
class MpiCommunicator final : public Communicator {
public:
    // A communicator over `comm` (which it duplicates; the caller keeps ownership of `comm`).
    // `nodeOfMember[i]` is the node of member i for the hierarchical all-reduce; empty means "detect": ranks
    // that share memory (MPI_COMM_TYPE_SHARED) are on one node. Collective over `comm`.
    MpiCommunicator(MPI_Comm comm, trace::GroupKind kind, std::string name, trace::TraceRecorder* recorder,
                    CommConfig config = CommConfig::fromEnvironment(), std::vector<int> nodeOfMember = {});
    ~MpiCommunicator() override;

    int rank() const override { return m_rank; }
    int size() const override { return m_size; }
    const trace::GroupInfo& group() const override { return m_group; }
    bool onDevice() const override { return false; }

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

    const std::vector<int>& nodeOfMember() const { return m_nodeOf; }

private:
    struct Op;
    WorkPtr enqueue(std::shared_ptr<Op> op);
    WorkPtr pointToPoint(bool isSend, void* data, std::size_t count, DType type, int peer, int tag);
    void workerLoop();
    void execute(Op& op);
    void checkAgreement(const Op& op);
    void runLibrary(Op& op);
    void runHierarchical(Op& op);
    std::string describe(const Op& op) const;

    MPI_Comm m_collectives = MPI_COMM_NULL;
    MPI_Comm m_pointToPoint = MPI_COMM_NULL;
    MPI_Comm m_nodeLocal = MPI_COMM_NULL;  // hierarchical: created on first use
    MPI_Comm m_crossNode = MPI_COMM_NULL;
    int m_rank = 0;
    int m_size = 1;
    trace::GroupInfo m_group;
    trace::TraceRecorder* m_recorder;
    CommConfig m_config;
    std::vector<int> m_nodeOf;
    std::unique_ptr<MpiTransport> m_transport;

    std::mutex m_mutex;
    std::condition_variable m_cv;
    std::deque<std::shared_ptr<Op>> m_queue;
    bool m_stop = false;
    std::uint64_t m_sequence = 0;  // collectives issued (worker side)
    std::uint64_t m_hierarchicalBytes = 0;  // bytes sent by the current hierarchical all-reduce
    std::string m_brokenBy;       // first failure; later operations fail with it
    std::thread m_worker;
};

// The TP, PP and DP communicators of this rank (and the world), made from the layout's rank grid.
struct GridCommunicators {
    std::unique_ptr<MpiCommunicator> world;
    std::unique_ptr<MpiCommunicator> tensor;
    std::unique_ptr<MpiCommunicator> pipeline;
    std::unique_ptr<MpiCommunicator> data;
};

// Collective over MPI_COMM_WORLD, whose size must equal the grid's. Nodes for the hierarchical all-reduce
// come from the grid (the layout's placement), so a 2-node layout can be taught on one machine.
GridCommunicators makeGridCommunicators(const plan::RankGrid& grid, trace::TraceRecorder* recorder,
                                        CommConfig config = CommConfig::fromEnvironment());

}  // namespace loom::comm
