#pragma once

#include "engine/comm/HostCommunicator.h"
#include "engine/comm/MpiTransport.h"
#include "engine/plan/RankGrid.h"

#include <mpi.h>

#include <memory>

namespace loom::comm {

// Initialises MPI for the process (MPI_THREAD_MULTIPLE: communicators run collectives on their own
// threads) and finalises it when destroyed. Create one in main() before any MPI communicator; destroy
// every communicator before it. Throws CommError when MPI lacks thread support.
class MpiSession {
public:
    MpiSession(int* argc, char*** argv);
    ~MpiSession();
    MpiSession(const MpiSession&) = delete;
    MpiSession& operator=(const MpiSession&) = delete;

    int worldRank() const { return m_rank; }
    int worldSize() const { return m_size; }
    // Ends every rank of the job at once (after an error on one rank, so none is left waiting).
    static void abortJob(int code);

private:
    bool m_initialisedHere = false;
    int m_rank = 0;
    int m_size = 1;
};

// The MPI backend: host buffers, real processes under mpirun. The collective layer (HostCommunicator,
// runCollective) does everything but the library calls; point-to-point calls are posted at once from the
// caller's thread. Collectives and point-to-point use separate duplicates of the communicator, so Loom's
// own algorithms' messages never match a user's send.
class MpiCommunicator final : public HostCommunicator {
public:
    // A communicator over `comm` (which it duplicates; the caller keeps ownership of `comm`).
    // `nodeOfMember[i]` is the node of member i for the hierarchical all-reduce; empty means "detect": ranks
    // that share memory (MPI_COMM_TYPE_SHARED) are on one node. Collective over `comm`.
    MpiCommunicator(MPI_Comm comm, trace::GroupKind kind, std::string name, trace::TraceRecorder* recorder,
        CommConfig config = CommConfig::fromEnvironment(), std::vector<int> nodeOfMember = {});
    ~MpiCommunicator() override;

    WorkPtr send(const void* data, std::size_t count, DType type, int peer, int tag = 0) override;
    WorkPtr recv(void* data, std::size_t count, DType type, int peer, int tag = 0) override;

private:
    struct Setup;
    MpiCommunicator(Setup setup, trace::TraceRecorder* recorder, CommConfig config);
    WorkPtr pointToPoint(bool isSend, void* data, std::size_t count, DType type, int peer, int tag);
    void runLibrary(const CollectiveCall& call, const std::string& context) override;
    Transport& transport() override { return *m_transport; }
    std::pair<Transport*, Transport*> hierarchy() override;

    MPI_Comm m_collectives = MPI_COMM_NULL;
    MPI_Comm m_pointToPoint = MPI_COMM_NULL;
    MPI_Comm m_nodeLocal = MPI_COMM_NULL; // hierarchical: created on first use
    MPI_Comm m_crossNode = MPI_COMM_NULL;
    std::unique_ptr<MpiTransport> m_transport;
    std::unique_ptr<MpiTransport> m_localTransport;
    std::unique_ptr<MpiTransport> m_crossTransport;
};

// The MPI backend's grid: collective over MPI_COMM_WORLD, whose size must equal the grid's. Nodes for the
// hierarchical all-reduce come from the grid (the layout's placement), so a 2-node layout can be taught
// on one machine.
// A communicator over MPI_COMM_WORLD named "world" (collective).
std::unique_ptr<Communicator> makeMpiWorldCommunicator(
    trace::TraceRecorder* recorder, CommConfig config, std::vector<int> nodeOfRank = {});

GridCommunicators makeMpiGridCommunicators(
    const plan::RankGrid& grid, trace::TraceRecorder* recorder, CommConfig config = CommConfig::fromEnvironment());

// A communicator over `members` (global ranks, in group order; this rank among them), collective over
// MPI_COMM_WORLD: every rank calls it at once with its own group, the groups partitioning the world
// (the expert and expert-data groups of a mixture of experts).
std::unique_ptr<Communicator> makeMpiGroupCommunicator(const std::vector<std::int64_t>& members, trace::GroupKind kind,
    const std::string& name, trace::TraceRecorder* recorder, CommConfig config, std::vector<int> nodeOfMember);

} // namespace loom::comm
