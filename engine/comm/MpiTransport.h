#pragma once

#include "engine/comm/HostMemoryTransport.h"
#include "engine/comm/PollUntil.h"

#include <mpi.h>
#include <sched.h>

#include <chrono>
#include <string>
#include <vector>

namespace loom::comm {

// Transport over an MPI communicator and host memory. Requests are MPI_Isend/MPI_Irecv; waiting polls
// MPI_Test (yielding the core between polls, so oversubscribed ranks make progress) until a deadline.
class MpiTransport final : public HostMemoryTransport {
public:
    // `globalRanks` names the members in messages; `timeoutSeconds` bounds every wait.
    MpiTransport(MPI_Comm comm, std::vector<int> globalRanks, double timeoutSeconds);

    int rank() const override { return m_rank; }
    int size() const override { return m_size; }
    Request isend(const void* data, std::size_t bytes, int peer) override;
    Request irecv(void* data, std::size_t bytes, int peer) override;
    void wait(Request request) override;
    void waitAll() override;

    // Cancels what is still outstanding (after a failure), so MPI holds no pointer into freed buffers.
    void abandon() override;

private:
    struct Pending {
        MPI_Request request = MPI_REQUEST_NULL;
        int peer = -1;
        std::size_t bytes = 0;
        bool isSend = false;
    };
    [[noreturn]] void timedOut(const Pending& p);
    [[noreturn]] void failed(const Pending& p, int code);

    MPI_Comm m_comm;
    std::vector<int> m_globalRanks;
    std::chrono::duration<double> m_timeout;
    int m_rank = 0;
    int m_size = 1;
    std::vector<Pending> m_pending;
};

// The node of each member of `comm`, numbered from 0: members that share memory (MPI_COMM_TYPE_SHARED) are
// on one node. Collective over `comm`.
std::vector<int> nodesBySharedMemory(MPI_Comm comm);

// A readable form of an MPI error code.
std::string mpiErrorText(int code);

} // namespace loom::comm
