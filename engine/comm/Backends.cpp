#include "engine/comm/Backends.h"

#include "engine/comm/CommError.h"
#include "engine/comm/GlooCommunicator.h"
#include "engine/comm/GlooStore.h"
#include "engine/comm/GridGroups.h"
#include "engine/comm/MpiCommunicator.h"
#include "engine/plan/ExpertGroups.h"
#if LOOM_WITH_NCCL
#include "engine/comm/NcclCommunicator.h"
#endif

#include <cstdlib>
#include <filesystem>
#include <optional>

namespace loom::comm {

struct CommRuntime::State {
    std::optional<MpiSession> mpi;
    std::optional<GlooEndpoint> gloo;
    std::string defaultFolder; // Gloo's rendezvous folder when Loom chose it (removed at the end)
    Communicator* world = nullptr;
};

CommRuntime::CommRuntime(plan::CommBackend backend, const ProcessStart& start, int* argc, char*** argv,
    const std::string& rendezvousParent, CommConfig config)
    : m_backend(backend)
    , m_start(start)
    , m_config(config)
    , m_state(std::make_unique<State>())
{
    const bool mpiHost
        = backend == plan::CommBackend::Mpi || (backend == plan::CommBackend::Nccl && start.source == "mpirun");
    if (backend == plan::CommBackend::Nccl) {
#if LOOM_WITH_NCCL
        if (const std::string problem = NcclCommunicator::deviceProblem(); !problem.empty())
            throw CommError("comm.backend \"nccl\": " + problem);
#else
        throw CommError("comm.backend \"nccl\": this loom-train was built without CUDA and NCCL (WITH_CUDA=OFF); "
                        "use \"mpi\" or \"gloo\", or build with the CUDA toolkit and NCCL");
#endif
    }
    if (mpiHost) {
        m_state->mpi.emplace(argc, argv);
        m_start.rank = m_state->mpi->worldRank();
        m_start.size = m_state->mpi->worldSize();
        return;
    }
    GlooEndpoint endpoint;
    endpoint.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(config.timeoutSeconds * 1000));
    std::string folder;
    endpoint.store = makeRendezvousStore(start, rendezvousParent, endpoint.timeout, &folder);
    if (start.rendezvous.kind == Rendezvous::Kind::None)
        m_state->defaultFolder = folder;
    endpoint.device = makeGlooDevice();
    m_state->gloo = std::move(endpoint);
}

CommRuntime::~CommRuntime()
{
    if (!m_state->defaultFolder.empty() && m_start.rank == 0) {
        std::error_code ec;
        std::filesystem::remove_all(m_state->defaultFolder, ec);
        std::filesystem::remove(std::filesystem::path(m_state->defaultFolder).parent_path(), ec); // only if empty
    }
}

GridCommunicators CommRuntime::makeGrid(const plan::RankGrid& grid, trace::TraceRecorder* recorder)
{
    const bool nccl = m_backend == plan::CommBackend::Nccl;
    trace::TraceRecorder* hostRecorder = nccl ? nullptr : recorder; // NCCL registers and records its own groups
    GridCommunicators host = m_state->mpi
        ? makeMpiGridCommunicators(grid, hostRecorder, m_config)
        : makeGlooGridCommunicators(grid, hostRecorder, m_start, *m_state->gloo, m_config);
    if (!nccl)
        return host;
#if LOOM_WITH_NCCL
    if (recorder)
        recorder->addGroup(trace::GroupKind::World, host.world->group().ranks, "world");
    // The TP, PP and DP groups move device buffers through NCCL, bootstrapped over their host groups; the
    // world stays the host control plane.
    const std::int64_t rank = m_start.rank;
    GridCommunicators out;
    out.world = std::move(host.world);
    auto device = [&](std::unique_ptr<Communicator> hostGroup, plan::GroupKind kind) -> std::unique_ptr<Communicator> {
        return std::make_unique<NcclCommunicator>(
            std::move(hostGroup), m_start.localRank, recorder, m_config, gridGroupNodes(grid, kind, rank));
    };
    out.tensor = device(std::move(host.tensor), plan::GroupKind::Tensor);
    out.pipeline = device(std::move(host.pipeline), plan::GroupKind::Pipeline);
    out.data = device(std::move(host.data), plan::GroupKind::Data);
    out.context = device(std::move(host.context), plan::GroupKind::Context);
    return out;
#else
    return host;
#endif
}

void CommRuntime::addExpertGroups(
    GridCommunicators& comms, const plan::RankGrid& grid, std::int64_t ep, trace::TraceRecorder* recorder)
{
    if (ep <= 1)
        return;
    const bool nccl = m_backend == plan::CommBackend::Nccl;
    const std::int64_t rank = m_start.rank;
    const plan::RankCoord c = grid.coordOf(rank);
    const std::string where = "tp=" + std::to_string(c.tp) + " pp=" + std::to_string(c.pp);
    auto make = [&](const std::vector<std::int64_t>& members, trace::GroupKind kind,
                    const std::string& name) -> std::unique_ptr<Communicator> {
        std::vector<int> nodes;
        for (auto m : members)
            nodes.push_back(static_cast<int>(grid.nodeOf(m)));
        trace::TraceRecorder* hostRecorder = nccl ? nullptr : recorder;
        std::unique_ptr<Communicator> host;
        if (m_state->mpi) {
            host = makeMpiGroupCommunicator(members, kind, name, hostRecorder, m_config, nodes);
        } else {
            std::vector<std::int32_t> ranks(members.begin(), members.end());
            int me = 0;
            for (std::size_t i = 0; i < members.size(); ++i)
                if (members[i] == rank)
                    me = static_cast<int>(i);
            const std::string key = std::string(trace::toString(kind)) + "-" + std::to_string(members.front());
            host = std::make_unique<GlooCommunicator>(
                *m_state->gloo, key, me, ranks, kind, name, hostRecorder, m_config, nodes);
        }
#if LOOM_WITH_NCCL
        if (nccl)
            return std::make_unique<NcclCommunicator>(std::move(host), m_start.localRank, recorder, m_config, nodes);
#endif
        return host;
    };
    const auto experts = plan::expertGroupOf(grid, ep, rank);
    const auto expertData = plan::expertDataGroupOf(grid, ep, rank);
    const std::int64_t index = plan::expertRankOf(grid, ep, rank);
    comms.expert = make(experts, trace::GroupKind::Expert,
        "EP group of " + where + " dp=" + std::to_string(c.dp - index) + "-" + std::to_string(c.dp - index + ep - 1));
    comms.expertData = make(
        expertData, trace::GroupKind::ExpertData, "EDP group of " + where + " expert rank " + std::to_string(index));
}

std::unique_ptr<Communicator> CommRuntime::makeWorld(
    const std::string& key, trace::TraceRecorder* recorder, std::vector<int> nodeOfRank, bool device)
{
    const bool nccl = device && m_backend == plan::CommBackend::Nccl;
    trace::TraceRecorder* hostRecorder = nccl ? nullptr : recorder;
    std::unique_ptr<Communicator> host;
    if (m_state->mpi) {
        host = makeMpiWorldCommunicator(hostRecorder, m_config, nodeOfRank);
    } else {
        std::vector<std::int32_t> everyone;
        for (int r = 0; r < m_start.size; ++r)
            everyone.push_back(r);
        host = std::make_unique<GlooCommunicator>(*m_state->gloo, key, m_start.rank, everyone, trace::GroupKind::World,
            "world", hostRecorder, m_config, nodeOfRank);
    }
#if LOOM_WITH_NCCL
    if (nccl)
        return std::make_unique<NcclCommunicator>(std::move(host), m_start.localRank, recorder, m_config, nodeOfRank);
#endif
    return host;
}

void CommRuntime::abortJob(int code)
{
    if (m_state->mpi)
        MpiSession::abortJob(code);
    std::_Exit(code);
}

} // namespace loom::comm
