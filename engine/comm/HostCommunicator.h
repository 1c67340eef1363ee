#pragma once

#include "engine/comm/Collectives.h"
#include "engine/comm/CommConfig.h"
#include "engine/comm/Communicator.h"
#include "engine/comm/SharedMemory.h"
#include "engine/trace/TraceRecorder.h"

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace loom::comm {

// What the host-memory backends (MPI, Gloo) share: collectives run one at a time, in call order, on the
// communicator's own worker thread (as PyTorch's ProcessGroupMPI and ProcessGroupGloo do), so the caller
// computes while they run; each goes through runCollective() and is recorded with collectiveEvent(). After
// a failure every later collective fails with the first error. A backend supplies the CollectiveBackend
// calls and point-to-point (send, recv, sendRecv), and must call startWorker() at the end of its
// constructor and stopWorker() at the start of its destructor.
class HostCommunicator : public Communicator, protected CollectiveBackend {
public:
    ~HostCommunicator() override;

    int rank() const override { return m_rank; }
    int size() const override { return static_cast<int>(m_group.ranks.size()); }
    const trace::GroupInfo& group() const override { return m_group; }
    bool onDevice() const override { return false; }

    WorkPtr broadcast(void* data, std::size_t count, DType type, int root) override;
    WorkPtr allReduce(
        void* data, std::size_t count, DType type, ReduceOp op, const CollectiveOptions& options = {}) override;
    WorkPtr reduceScatter(const void* send, void* recv, std::size_t recvCount, DType type, ReduceOp op,
        const CollectiveOptions& options = {}) override;
    WorkPtr allGather(const void* send, void* recv, std::size_t sendCount, DType type,
        const CollectiveOptions& options = {}) override;
    WorkPtr barrier() override;
    WorkPtr allToAll(
        const void* send, void* recv, std::size_t count, DType type, const CollectiveOptions& options = {}) override;
    WorkPtr allToAllV(const void* send, const std::vector<std::size_t>& sendCounts, void* recv,
        const std::vector<std::size_t>& recvCounts, DType type, const CollectiveOptions& options = {}) override;
    WorkPtr sendRecv(const void* sendData, int sendPeer, void* recvData, int recvPeer, std::size_t count, DType type,
        int tag = 0) override;

    // Members on one node (nodeOfMember): mapSharedMemory over the transport, after a barrier that leaves the
    // worker idle. Members on several nodes: null.
    std::shared_ptr<void> sharedMemory(std::size_t bytes, std::string& why) override;
    // The node of each member (hierarchical all-reduce).
    const std::vector<int>& nodeOfMember() const { return m_nodeOf; }
    // Stops recording this communicator's events (the world's control traffic stays out of the trace); its
    // group stays registered, so group ids are the same with every backend.
    void muteEvents() { m_recordEvents = false; }

protected:
    // `group.ranks` are the members' global ranks in group order; `rank` is this process's index among them.
    // Registers the group with `recorder` (when set).
    HostCommunicator(int rank, trace::GroupInfo group, trace::TraceRecorder* recorder, CommConfig config,
        std::vector<int> nodeOfMember);
    void startWorker();
    void stopWorker();
    bool failed() const { return !m_brokenBy.empty(); }
    const CommConfig& config() const { return m_config; }
    trace::TraceRecorder* recorder() const { return m_recordEvents ? m_recorder : nullptr; }
    Transport& hostTransport() override { return transport(); }
    // The members' shared-memory segment, made on the first "shm" all-reduce (null, once and for all, when
    // they are not on one machine or /dev/shm has no room: the ring runs instead).
    SharedArena* sharedArena() override;
    // Checks a point-to-point call's peer and tag; returns its description for messages ("send of 64 bytes
    // to rank 3 on PP group ... [1, 3]"). Throws CommError for a peer outside the group or a bad tag.
    std::string describePointToPoint(bool isSend, std::size_t bytes, int peer, int tag) const;
    // The trace event a point-to-point call records when it completes.
    trace::TraceEvent pointToPointEvent(bool isSend, std::size_t bytes, int peer) const;
    // Enters a posted send or receive in the flight record (FlightRecorder), its peer by global rank; the
    // backend's Work finishes the ticket when the transfer ends.
    std::uint64_t flightRecord(bool isSend, std::size_t bytes, int peer) const;

private:
    struct Item {
        CollectiveCall call;
        std::shared_ptr<PendingWork> work = std::make_shared<PendingWork>();
    };
    WorkPtr enqueue(CollectiveCall call);
    void workerLoop();
    void execute(Item& item);

    int m_rank = 0;
    trace::GroupInfo m_group;
    trace::TraceRecorder* m_recorder;
    bool m_recordEvents = true;
    CommConfig m_config;
    std::vector<int> m_nodeOf;
    std::unique_ptr<SharedArena> m_arena;
    bool m_arenaTried = false;

    std::mutex m_mutex;
    std::condition_variable m_cv;
    std::deque<std::shared_ptr<Item>> m_queue;
    bool m_stop = false;
    std::uint64_t m_sequence = 0; // collectives issued (caller side)
    std::string m_brokenBy; // first failure; later operations fail with it
    std::thread m_worker;
};

} // namespace loom::comm
