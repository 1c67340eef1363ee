#include "engine/comm/MpiTransport.h"

#include "engine/comm/CommError.h"

#include <sched.h>

#include <climits>
#include <cstring>
#include <map>

namespace loom::comm {

std::string mpiErrorText(int code)
{
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
        return "MPI error " + std::to_string(code);
    return std::string(text, static_cast<std::size_t>(length));
}

MpiTransport::MpiTransport(MPI_Comm comm, std::vector<int> globalRanks, double timeoutSeconds)
    : m_comm(comm)
    , m_globalRanks(std::move(globalRanks))
    , m_timeout(timeoutSeconds)
{
    MPI_Comm_rank(comm, &m_rank);
    MPI_Comm_size(comm, &m_size);
}

Transport::Request MpiTransport::isend(const void* data, std::size_t bytes, int peer)
{
    if (bytes > static_cast<std::size_t>(INT_MAX))
        throw CommError(m_context + ": a message of " + std::to_string(bytes)
            + " bytes is over MPI's 2 GiB limit; "
              "use chunks (chunk_kb) or smaller buckets");
    Pending p { MPI_REQUEST_NULL, peer, bytes, true };
    const int rc = MPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, peer, 0, m_comm, &p.request);
    if (rc != MPI_SUCCESS)
        failed(p, rc);
    m_bytesSent += bytes;
    m_pending.push_back(p);
    return m_pending.size() - 1;
}

Transport::Request MpiTransport::irecv(void* data, std::size_t bytes, int peer)
{
    if (bytes > static_cast<std::size_t>(INT_MAX))
        throw CommError(m_context + ": a message of " + std::to_string(bytes)
            + " bytes is over MPI's 2 GiB limit; "
              "use chunks (chunk_kb) or smaller buckets");
    Pending p { MPI_REQUEST_NULL, peer, bytes, false };
    const int rc = MPI_Irecv(data, static_cast<int>(bytes), MPI_BYTE, peer, 0, m_comm, &p.request);
    if (rc != MPI_SUCCESS)
        failed(p, rc);
    m_pending.push_back(p);
    return m_pending.size() - 1;
}

void MpiTransport::wait(Request id)
{
    Pending& p = m_pending.at(id);
    int rc = MPI_SUCCESS;
    MPI_Status status;
    const bool done = pollUntil(
        [&] {
            int flag = 0;
            rc = MPI_Test(&p.request, &flag, &status);
            return flag != 0 || rc != MPI_SUCCESS;
        },
        m_timeout);
    if (rc != MPI_SUCCESS)
        failed(p, rc);
    if (!done)
        timedOut(p);
    if (!p.isSend) {
        int received = 0;
        MPI_Get_count(&status, MPI_BYTE, &received);
        if (static_cast<std::size_t>(received) != p.bytes)
            throw CommError(m_context + ": rank " + std::to_string(m_globalRanks.at(static_cast<std::size_t>(p.peer)))
                + " sent " + std::to_string(received) + " bytes where " + std::to_string(p.bytes)
                + " were expected; the ranks disagree about the operation's size");
    }
}

void MpiTransport::waitAll()
{
    for (std::size_t i = 0; i < m_pending.size(); ++i)
        if (m_pending[i].request != MPI_REQUEST_NULL)
            wait(i);
    m_pending.clear();
}

void MpiTransport::abandon()
{
    for (auto& p : m_pending) {
        if (p.request != MPI_REQUEST_NULL) {
            MPI_Cancel(&p.request); // a send too: its buffer is about to be freed
            MPI_Request_free(&p.request);
        }
    }
    m_pending.clear();
}

void MpiTransport::timedOut(const Pending& p)
{
    const int peer = m_globalRanks.at(static_cast<std::size_t>(p.peer));
    throw CommError(m_context + " timed out after " + std::to_string(static_cast<int>(m_timeout.count()))
        + " s waiting for rank " + std::to_string(peer) + " (" + (p.isSend ? "send of " : "receive of ")
        + std::to_string(p.bytes) + " bytes); check that rank " + std::to_string(peer)
        + " is alive and reached the same operation (LOOM_COMM_TIMEOUT_S sets the limit)");
}

void MpiTransport::failed(const Pending& p, int code)
{
    throw CommError(m_context + ": MPI failed " + (p.isSend ? "sending to rank " : "receiving from rank ")
        + std::to_string(m_globalRanks.at(static_cast<std::size_t>(p.peer))) + ": " + mpiErrorText(code));
}

std::vector<int> nodesBySharedMemory(MPI_Comm comm)
{
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    MPI_Comm shared;
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shared);
    int sharedRank = 0;
    MPI_Comm_rank(shared, &sharedRank);
    int leader = sharedRank == 0 ? rank : 0;
    MPI_Allreduce(MPI_IN_PLACE, &leader, 1, MPI_INT, MPI_MAX, shared); // the node leader's rank in `comm`
    MPI_Comm_free(&shared);
    std::vector<int> leaders(static_cast<std::size_t>(size));
    MPI_Allgather(&leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, comm);
    std::map<int, int> index;
    for (int l : leaders)
        index.emplace(l, 0);
    int next = 0;
    for (auto& [l, i] : index)
        i = next++;
    std::vector<int> nodes;
    for (int l : leaders)
        nodes.push_back(index[l]);
    return nodes;
}

} // namespace loom::comm
