#include "engine/comm/CommunicatorTransport.h"

#include "engine/comm/CommError.h"

namespace loom::comm {

Transport::Request CommunicatorTransport::isend(const void* data, std::size_t bytes, int peer)
{
    m_pending.push_back(m_host.send(data, bytes, DType::U8, peer, m_tag));
    m_bytesSent += bytes;
    return m_pending.size() - 1;
}

Transport::Request CommunicatorTransport::irecv(void* data, std::size_t bytes, int peer)
{
    m_pending.push_back(m_host.recv(data, bytes, DType::U8, peer, m_tag));
    return m_pending.size() - 1;
}

void CommunicatorTransport::wait(Request request)
{
    try {
        m_pending.at(request)->wait();
    } catch (const CommError& e) {
        throw CommError(m_context + ": " + e.what());
    }
}

void CommunicatorTransport::waitAll()
{
    for (std::size_t i = 0; i < m_pending.size(); ++i)
        wait(i);
    m_pending.clear();
}

} // namespace loom::comm
