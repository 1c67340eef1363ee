#pragma once

#include "engine/comm/Communicator.h"
#include "engine/comm/HostMemoryTransport.h"

#include <vector>

namespace loom::comm {

// A host-memory Transport over a host Communicator's point-to-point calls: what a device backend (NCCL)
// uses for the agreement check and the codecs, whichever host backend (MPI, Gloo) bootstrapped it.
// Messages use one tag, so they match in posting order between a pair, as Transport promises.
class CommunicatorTransport final : public HostMemoryTransport {
public:
    explicit CommunicatorTransport(Communicator& host, int tag = 32766)
        : m_host(host)
        , m_tag(tag)
    {
    }

    int rank() const override { return m_host.rank(); }
    int size() const override { return m_host.size(); }
    Request isend(const void* data, std::size_t bytes, int peer) override;
    Request irecv(void* data, std::size_t bytes, int peer) override;
    void wait(Request request) override;
    void waitAll() override;
    void abandon() override { m_pending.clear(); }

private:
    Communicator& m_host;
    int m_tag;
    std::vector<WorkPtr> m_pending;
};

} // namespace loom::comm
