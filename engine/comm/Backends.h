#pragma once

#include "engine/comm/CommConfig.h"
#include "engine/comm/Communicator.h"
#include "engine/comm/ProcessStart.h"
#include "engine/plan/Layout.h"
#include "engine/plan/RankGrid.h"
#include "engine/trace/TraceRecorder.h"

#include <memory>
#include <string>

namespace loom::comm {

// The process-wide state of the layout's communication backend, and the factory of its communicators:
// MPI initialises MPI (MPI_THREAD_MULTIPLE); Gloo opens its TCP device and the rendezvous store (no MPI
// at all, so any process starter will do); NCCL does either for its host communicators (MPI when mpirun
// started the process, Gloo otherwise) and checks for a GPU. Create one in main() before any communicator
// and destroy every communicator before it.
class CommRuntime {
public:
    // `rendezvousParent`: where Gloo's default rendezvous folder goes when LOOM_RENDEZVOUS is unset (beside
    // the layout file). Throws CommError (or std::invalid_argument for a bad LOOM_* variable) saying what to fix.
    CommRuntime(plan::CommBackend backend, const ProcessStart& start, int* argc, char*** argv,
        const std::string& rendezvousParent = {}, CommConfig config = CommConfig::fromEnvironment());
    ~CommRuntime();
    CommRuntime(const CommRuntime&) = delete;
    CommRuntime& operator=(const CommRuntime&) = delete;

    plan::CommBackend backend() const { return m_backend; }
    int rank() const { return m_start.rank; }
    int size() const { return m_start.size; }

    // The grid's TP, PP and DP communicators and the world (collective over every rank).
    GridCommunicators makeGrid(const plan::RankGrid& grid, trace::TraceRecorder* recorder);
    // Mixture of experts: sets comms.expert and comms.expertData to this rank's expert-parallel and
    // expert-data-parallel groups for `ep` (plan::expertGroupOf; collective over every rank). No-op for ep 1.
    void addExpertGroups(
        GridCommunicators& comms, const plan::RankGrid& grid, std::int64_t ep, trace::TraceRecorder* recorder);
    // One communicator over every rank (collective): on the backend's memory (`device`: NCCL's GPU buffers)
    // or the host. `key` names it in Gloo's rendezvous (unique per communicator); `nodeOfRank` as for the
    // hierarchical all-reduce (empty: MPI detects shared memory, Gloo assumes one node).
    std::unique_ptr<Communicator> makeWorld(
        const std::string& key, trace::TraceRecorder* recorder, std::vector<int> nodeOfRank, bool device);
    // After a failure on this rank: ends the whole job where the backend can (MPI_Abort), else this
    // process (Gloo's peers see the connection close and fail at once). Does not return.
    [[noreturn]] void abortJob(int code);

private:
    struct State;
    plan::CommBackend m_backend;
    ProcessStart m_start;
    CommConfig m_config;
    std::unique_ptr<State> m_state;
};

} // namespace loom::comm
