#pragma once

#include "engine/comm/HostCommunicator.h"
#include "engine/comm/ProcessStart.h"
#include "engine/plan/RankGrid.h"

#include <gloo/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/device.h>

#include <memory>

namespace loom::comm {

class GlooTransport;

// What every Gloo communicator of a process shares: the TCP device and the rendezvous store.
struct GlooEndpoint {
    std::shared_ptr<gloo::transport::Device> device;
    std::shared_ptr<gloo::rendezvous::Store> store;
    std::chrono::milliseconds timeout { 300000 };
};

// The TCP device: on LOOM_GLOO_IFACE's interface or LOOM_GLOO_HOST's address when set, else on the address
// this host's name resolves to. Throws CommError saying which to set when neither works.
std::shared_ptr<gloo::transport::Device> makeGlooDevice();

// The Gloo backend: host buffers, TCP between any processes, no MPI. Library collectives are Gloo's own
// algorithms (its reduce-scatter is an all-reduce of a copy: this Gloo has no reduce-scatter of that
// form); Loom's ring, chunked ring, hierarchical all-reduce and codecs run on a GlooTransport (unbound
// buffers). Point-to-point calls are posted at once from the caller's thread.
class GlooCommunicator final : public HostCommunicator {
public:
    // Collective over the group's members: `members` are their global ranks, `me` this process's index
    // among them. `key` names the group in the store (unique per group, the same on every member).
    GlooCommunicator(const GlooEndpoint& endpoint, std::string key, int me, std::vector<std::int32_t> members,
        trace::GroupKind kind, std::string name, trace::TraceRecorder* recorder,
        CommConfig config = CommConfig::fromEnvironment(), std::vector<int> nodeOfMember = {});
    ~GlooCommunicator() override;

    WorkPtr send(const void* data, std::size_t count, DType type, int peer, int tag = 0) override;
    WorkPtr recv(void* data, std::size_t count, DType type, int peer, int tag = 0) override;

private:
    void runLibrary(const CollectiveCall& call, const std::string& context) override;
    Transport& transport() override;
    std::pair<Transport*, Transport*> hierarchy() override;
    WorkPtr pointToPoint(bool isSend, void* data, std::size_t count, DType type, int peer, int tag);

    GlooEndpoint m_endpoint;
    std::string m_key;
    std::shared_ptr<gloo::Context> m_context;
    std::unique_ptr<GlooTransport> m_transport;
    std::unique_ptr<GlooTransport> m_localTransport;
    std::unique_ptr<GlooTransport> m_crossTransport;
    std::vector<char> m_scratch; // library reduce-scatter
};

// The Gloo backend's grid for `start` (its rank and size must match the grid's), with `endpoint`'s store.
GridCommunicators makeGlooGridCommunicators(const plan::RankGrid& grid, trace::TraceRecorder* recorder,
    const ProcessStart& start, const GlooEndpoint& endpoint, CommConfig config = CommConfig::fromEnvironment());

} // namespace loom::comm
