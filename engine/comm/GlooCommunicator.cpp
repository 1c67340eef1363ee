#include "engine/comm/GlooCommunicator.h"

#include "engine/comm/Agreement.h"
#include "engine/comm/FlightRecorder.h"
#include "engine/comm/GlooStore.h"
#include "engine/comm/GridGroups.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>

namespace loom::comm {

using trace::EventKind;

namespace {

// Gloo's own collectives use small slot prefixes; Loom's messages use slots far above them.
constexpr std::uint64_t kTransportSlot = 0x4c6f6f6d00000001ull; // "Loom", 1
constexpr std::uint64_t kPointToPointSlot = 0x4c6f6f6d00010000ull;

std::shared_ptr<gloo::Context> connect(const GlooEndpoint& endpoint, const std::string& key, int me, int size)
{
    auto context = std::make_shared<gloo::rendezvous::Context>(me, size);
    context->setTimeout(endpoint.timeout);
    KeyPrefixStore store(key, endpoint.store, endpoint.timeout);
    auto device = endpoint.device;
    try {
        context->connectFullMesh(store, device);
    } catch (const std::exception& e) {
        throw CommError("Gloo backend: connecting " + key + " (member " + std::to_string(me) + " of "
            + std::to_string(size) + ") failed: " + e.what());
    }
    return context;
}

// Calls f(T{}) with the C++ type that holds one element of `type`.
template <typename F> void withElement(DType type, F&& f)
{
    switch (type) {
    case DType::F32:
        return f(float {});
    case DType::F16:
    case DType::BF16:
        return f(std::uint16_t {});
    case DType::F64:
        return f(double {});
    case DType::I64:
        return f(std::int64_t {});
    case DType::U8:
        return f(std::uint8_t {});
    }
}

gloo::AllreduceOptions::Func reduction(DType type, ReduceOp op)
{
    return [type, op](void* c, const void* a, const void* b, std::size_t n) {
        if (c == b) {
            reduceHost(c, a, n, type, op);
            return;
        }
        if (c != a)
            std::memcpy(c, a, n * sizeOf(type));
        reduceHost(c, b, n, type, op);
    };
}

} // namespace

// Transport over a Gloo context's unbound buffers, host memory.
class GlooTransport final : public Transport {
public:
    GlooTransport(std::shared_ptr<gloo::Context> context, std::vector<std::int32_t> globalRanks,
        std::chrono::milliseconds timeout)
        : m_gloo(std::move(context))
        , m_globalRanks(std::move(globalRanks))
        , m_timeout(timeout)
    {
    }
    int rank() const override { return m_gloo->rank; }
    int size() const override { return m_gloo->size; }
    Request isend(const void* data, std::size_t bytes, int peer) override
    {
        return post(true, const_cast<void*>(data), bytes, peer);
    }
    Request irecv(void* data, std::size_t bytes, int peer) override { return post(false, data, bytes, peer); }
    void wait(Request request) override
    {
        Pending& p = m_pending.at(request);
        if (!p.buffer)
            return;
        const int peer = m_globalRanks.at(static_cast<std::size_t>(p.peer));
        try {
            const bool ok = p.isSend ? p.buffer->waitSend(m_timeout) : p.buffer->waitRecv(m_timeout);
            if (!ok)
                throw gloo::Exception("the wait was aborted");
        } catch (const gloo::Exception& e) {
            throw CommError(contextText() + " failed waiting for rank " + std::to_string(peer) + " ("
                + (p.isSend ? "send of " : "receive of ") + std::to_string(p.bytes) + " bytes): " + e.what()
                + "; check that rank " + std::to_string(peer)
                + " is alive and reached the same operation (LOOM_COMM_TIMEOUT_S sets the limit)");
        }
        p.buffer.reset();
    }
    void waitAll() override
    {
        for (std::size_t i = 0; i < m_pending.size(); ++i)
            wait(i);
        m_pending.clear();
    }
    void reduce(void* dst, const void* src, std::size_t count, DType type, ReduceOp op) override
    {
        reduceHost(dst, src, count, type, op);
    }
    void copy(void* dst, const void* src, std::size_t bytes) override
    {
        if (bytes && dst != src)
            std::memmove(dst, src, bytes);
    }
    void* scratch(std::size_t bytes, int slot) override
    {
        const auto s = static_cast<std::size_t>(slot);
        if (m_scratch.size() <= s)
            m_scratch.resize(s + 1);
        if (m_scratch[s].size() < bytes)
            m_scratch[s].resize(bytes);
        return m_scratch[s].data();
    }
    void abandon() override
    {
        // Gloo's pairs hold only weak references to unbound buffers: dropping them withdraws the requests.
        m_pending.clear();
    }

private:
    struct Pending {
        std::unique_ptr<gloo::transport::UnboundBuffer> buffer; // null: nothing to wait for (0 bytes)
        int peer = -1;
        std::size_t bytes = 0;
        bool isSend = false;
    };
    std::string contextText() const { return m_context.empty() ? std::string("Gloo transport") : m_context; }
    Request post(bool isSend, void* data, std::size_t bytes, int peer)
    {
        Pending p { nullptr, peer, bytes, isSend };
        if (bytes > 0) {
            try {
                p.buffer = m_gloo->createUnboundBuffer(data, bytes);
                if (isSend)
                    p.buffer->send(peer, kTransportSlot);
                else
                    p.buffer->recv(peer, kTransportSlot);
            } catch (const gloo::Exception& e) {
                throw CommError(contextText() + ": Gloo failed "
                    + (isSend ? "sending to rank " : "receiving from rank ")
                    + std::to_string(m_globalRanks.at(static_cast<std::size_t>(peer))) + ": " + e.what());
            }
        }
        if (isSend)
            m_bytesSent += bytes;
        m_pending.push_back(std::move(p));
        return m_pending.size() - 1;
    }

    std::shared_ptr<gloo::Context> m_gloo;
    std::vector<std::int32_t> m_globalRanks;
    std::chrono::milliseconds m_timeout;
    std::vector<Pending> m_pending;
    std::vector<std::vector<std::byte>> m_scratch;
};

namespace {

// A point-to-point call: completes in wait() (Gloo's unbound buffers have no non-blocking test, so
// isCompleted() says true only once a wait has seen the transfer finish).
class GlooWork final : public GuardedWork {
public:
    GlooWork(std::unique_ptr<gloo::transport::UnboundBuffer> buffer, bool isSend, std::string context,
        std::chrono::milliseconds timeout, trace::TraceRecorder* recorder, trace::TraceEvent event,
        std::uint64_t flight)
        : m_buffer(std::move(buffer))
        , m_isSend(isSend)
        , m_context(std::move(context))
        , m_timeout(timeout)
        , m_recorder(recorder)
        , m_event(std::move(event))
        , m_flight(flight)
    {
        m_stats.bytes = m_event.bytes;
        m_stats.wireBytes = m_event.wireBytes;
        m_stats.startNs = m_event.startNs;
        if (!m_buffer)
            finish();
    }
    bool isCompleted() override
    {
        std::lock_guard lock(m_mutex);
        return m_done;
    }
    bool completesUnwaited() const override { return false; }
    void wait() override
    {
        std::lock_guard lock(m_mutex);
        if (!m_done) {
            try {
                if (!(m_isSend ? m_buffer->waitSend(m_timeout) : m_buffer->waitRecv(m_timeout)))
                    m_error = m_context + ": the wait was aborted";
            } catch (const gloo::Exception& e) {
                m_error = m_context + " failed: " + e.what() + "; check that the peer is alive and posted the matching "
                    + (m_isSend ? "receive" : "send") + " (LOOM_COMM_TIMEOUT_S sets the limit)";
            }
            finish();
        }
        if (m_error)
            throw CommError(*m_error);
    }

private:
    void finish()
    {
        m_done = true;
        m_stats.endNs = trace::nowNs();
        FlightRecorder::instance().finish(m_flight, !m_error);
        if (m_recorder && !m_error) {
            m_event.endNs = m_stats.endNs;
            m_recorder->record(m_event);
        }
    }

    std::unique_ptr<gloo::transport::UnboundBuffer> m_buffer;
    bool m_isSend;
    std::string m_context;
    std::chrono::milliseconds m_timeout;
    trace::TraceRecorder* m_recorder;
    trace::TraceEvent m_event;
    std::uint64_t m_flight; // its FlightRecorder ticket
    bool m_done = false;
};

} // namespace

std::shared_ptr<gloo::transport::Device> makeGlooDevice()
{
    gloo::transport::tcp::attr attr;
    if (const char* iface = std::getenv("LOOM_GLOO_IFACE"); iface && *iface)
        attr.iface = iface;
    else if (const char* host = std::getenv("LOOM_GLOO_HOST"); host && *host)
        attr.hostname = host;
    else {
        char name[256] = {};
        ::gethostname(name, sizeof name - 1);
        attr.hostname = name;
    }
    try {
        return gloo::transport::tcp::CreateDevice(attr);
    } catch (const std::exception& e) {
        throw CommError(std::string("Gloo backend: cannot open a TCP device on ")
            + (attr.iface.empty() ? "host \"" + attr.hostname + "\"" : "interface \"" + attr.iface + "\"") + ": "
            + e.what() + "; set LOOM_GLOO_IFACE (an interface, e.g. eth0) or LOOM_GLOO_HOST (this host's address)");
    }
}

GlooCommunicator::GlooCommunicator(const GlooEndpoint& endpoint, std::string key, int me,
    std::vector<std::int32_t> members, trace::GroupKind kind, std::string name, trace::TraceRecorder* recorder,
    CommConfig config, std::vector<int> nodeOfMember)
    : HostCommunicator(
        me, trace::GroupInfo { -1, kind, members, std::move(name) }, recorder, config, std::move(nodeOfMember))
    , m_endpoint(endpoint)
    , m_key(std::move(key))
{
    m_context = connect(m_endpoint, m_key, me, static_cast<int>(members.size()));
    m_transport = std::make_unique<GlooTransport>(m_context, members, m_endpoint.timeout);
    startWorker();
}

GlooCommunicator::~GlooCommunicator()
{
    stopWorker();
}

Transport& GlooCommunicator::transport()
{
    return *m_transport;
}

void GlooCommunicator::runLibrary(const CollectiveCall& c, const std::string& context)
{
    const auto& members = group().ranks;
    try {
        switch (c.kind) {
        case EventKind::AllReduce:
        case EventKind::ReduceScatter: {
            // Reduce-scatter: an all-reduce of a copy of the whole array, of which this member keeps its block.
            void* data = c.data;
            const std::size_t total = c.kind == EventKind::AllReduce ? c.count : c.count * members.size();
            if (c.kind == EventKind::ReduceScatter) {
                m_scratch.resize(total * sizeOf(c.type));
                std::memcpy(m_scratch.data(), c.send, m_scratch.size());
                data = m_scratch.data();
            }
            if (total == 0)
                return;
            withElement(c.type, [&](auto element) {
                using T = decltype(element);
                gloo::AllreduceOptions opts(m_context);
                opts.setOutput(static_cast<T*>(data), total);
                opts.setReduceFunction(reduction(c.type, c.op));
                opts.setTimeout(m_endpoint.timeout);
                gloo::allreduce(opts);
            });
            if (c.kind == EventKind::ReduceScatter)
                std::memcpy(c.recv, m_scratch.data() + static_cast<std::size_t>(rank()) * c.count * sizeOf(c.type),
                    c.count * sizeOf(c.type));
            return;
        }
        case EventKind::AllGather:
            if (c.count == 0)
                return;
            withElement(c.type, [&](auto element) {
                using T = decltype(element);
                gloo::AllgatherOptions opts(m_context);
                opts.setInput(static_cast<T*>(const_cast<void*>(c.send)), c.count);
                opts.setOutput(static_cast<T*>(c.recv), c.count * members.size());
                opts.setTimeout(m_endpoint.timeout);
                gloo::allgather(opts);
            });
            return;
        case EventKind::Broadcast:
            if (c.count == 0)
                return;
            withElement(c.type, [&](auto element) {
                using T = decltype(element);
                gloo::BroadcastOptions opts(m_context);
                opts.setOutput(static_cast<T*>(c.data), c.count);
                opts.setRoot(c.root);
                opts.setTimeout(m_endpoint.timeout);
                gloo::broadcast(opts);
            });
            return;
        case EventKind::AllToAll: {
            const std::size_t n = members.size();
            if (c.sendCounts.empty()) {
                if (c.count == 0)
                    return;
                withElement(c.type, [&](auto element) {
                    using T = decltype(element);
                    gloo::AlltoallOptions opts(m_context);
                    opts.setInput(static_cast<T*>(const_cast<void*>(c.send)), c.count * n);
                    opts.setOutput(static_cast<T*>(c.recv), c.count * n);
                    opts.setTimeout(m_endpoint.timeout);
                    gloo::alltoall(opts);
                });
                return;
            }
            std::vector<std::int64_t> in(c.sendCounts.begin(), c.sendCounts.end()),
                out(c.recvCounts.begin(), c.recvCounts.end());
            // Gloo wants buffers even for empty exchanges: point empty ones at a word of scratch.
            m_scratch.resize(std::max<std::size_t>(m_scratch.size(), 16));
            void* send = c.send ? const_cast<void*>(c.send) : m_scratch.data();
            void* recv = c.recv ? c.recv : m_scratch.data();
            withElement(c.type, [&](auto element) {
                using T = decltype(element);
                gloo::AlltoallvOptions opts(m_context);
                opts.setInput(static_cast<T*>(send), in);
                opts.setOutput(static_cast<T*>(recv), out);
                opts.setTimeout(m_endpoint.timeout);
                gloo::alltoallv(opts);
            });
            return;
        }
        case EventKind::Barrier: {
            gloo::BarrierOptions opts(m_context);
            opts.setTimeout(m_endpoint.timeout);
            gloo::barrier(opts);
            return;
        }
        default:
            throw CommError(context + ": not a collective");
        }
    } catch (const gloo::Exception& e) {
        throw CommError(context + ": Gloo failed: " + e.what() + "; a member of " + rankList(members)
            + " may have stopped (LOOM_COMM_TIMEOUT_S sets the limit)");
    }
}

std::pair<Transport*, Transport*> GlooCommunicator::hierarchy()
{
    if (!m_localTransport) {
        const auto& nodes = nodeOfMember();
        const int myNode = nodes[static_cast<std::size_t>(rank())];
        std::vector<std::int32_t> local, cross;
        int localIndex = 0;
        std::vector<int> indexOnNode(nodes.size());
        std::map<int, int> seen;
        for (std::size_t i = 0; i < nodes.size(); ++i)
            indexOnNode[i] = seen[nodes[i]]++;
        localIndex = indexOnNode[static_cast<std::size_t>(rank())];
        int meLocal = 0, meCross = 0;
        for (std::size_t i = 0; i < nodes.size(); ++i) {
            if (nodes[i] == myNode) {
                if (static_cast<int>(i) == rank())
                    meLocal = static_cast<int>(local.size());
                local.push_back(group().ranks[i]);
            }
            if (indexOnNode[i] == localIndex) {
                if (static_cast<int>(i) == rank())
                    meCross = static_cast<int>(cross.size());
                cross.push_back(group().ranks[i]);
            }
        }
        auto localContext
            = connect(m_endpoint, m_key + ".node" + std::to_string(myNode), meLocal, static_cast<int>(local.size()));
        auto crossContext = connect(
            m_endpoint, m_key + ".cross" + std::to_string(localIndex), meCross, static_cast<int>(cross.size()));
        m_localTransport = std::make_unique<GlooTransport>(localContext, local, m_endpoint.timeout);
        m_crossTransport = std::make_unique<GlooTransport>(crossContext, cross, m_endpoint.timeout);
    }
    return { m_localTransport.get(), m_crossTransport.get() };
}

WorkPtr GlooCommunicator::pointToPoint(bool isSend, void* data, std::size_t count, DType type, int peer, int tag)
{
    const std::size_t bytes = count * sizeOf(type);
    const std::string context = describePointToPoint(isSend, bytes, peer, tag);
    std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
    if (bytes > 0) {
        try {
            buffer = m_context->createUnboundBuffer(data, bytes);
            if (isSend)
                buffer->send(peer, kPointToPointSlot + static_cast<std::uint64_t>(tag));
            else
                buffer->recv(peer, kPointToPointSlot + static_cast<std::uint64_t>(tag));
        } catch (const gloo::Exception& e) {
            throw CommError(context + ": Gloo failed: " + e.what());
        }
    }
    return std::make_shared<GlooWork>(std::move(buffer), isSend, context, m_endpoint.timeout, recorder(),
        pointToPointEvent(isSend, bytes, peer), flightRecord(isSend, bytes, peer));
}

WorkPtr GlooCommunicator::send(const void* data, std::size_t count, DType type, int peer, int tag)
{
    return pointToPoint(true, const_cast<void*>(data), count, type, peer, tag);
}

WorkPtr GlooCommunicator::recv(void* data, std::size_t count, DType type, int peer, int tag)
{
    return pointToPoint(false, data, count, type, peer, tag);
}

GridCommunicators makeGlooGridCommunicators(const plan::RankGrid& grid, trace::TraceRecorder* recorder,
    const ProcessStart& start, const GlooEndpoint& endpoint, CommConfig config)
{
    if (start.size != grid.size())
        throw CommError("the layout has " + std::to_string(grid.size()) + " ranks (tp·cp·pp·dp) but " + start.source
            + " started " + std::to_string(start.size) + "; start " + std::to_string(grid.size()) + " processes");
    const std::int64_t rank = start.rank;
    GridCommunicators out;
    std::vector<std::int32_t> everyone;
    for (std::int64_t r = 0; r < grid.size(); ++r)
        everyone.push_back(static_cast<std::int32_t>(r));
    auto world = std::make_unique<GlooCommunicator>(endpoint, "world", start.rank, everyone, trace::GroupKind::World,
        "world", recorder, config, gridWorldNodes(grid));
    world->muteEvents();
    out.world = std::move(world);
    auto make = [&](plan::GroupKind kind) -> std::unique_ptr<Communicator> {
        std::vector<std::int32_t> members;
        int me = 0;
        for (auto m : gridCommMembers(grid, kind, rank)) {
            if (m == rank)
                me = static_cast<int>(members.size());
            members.push_back(static_cast<std::int32_t>(m));
        }
        const std::string key = std::string(trace::toString(kind)) + "-" + std::to_string(members.front());
        return std::make_unique<GlooCommunicator>(endpoint, key, me, members, kind, gridGroupName(grid, kind, rank),
            recorder, config, gridGroupNodes(grid, kind, rank));
    };
    out.tensor = make(plan::GroupKind::Tensor);
    out.pipeline = make(plan::GroupKind::Pipeline);
    out.data = make(plan::GroupKind::Data);
    out.context = make(plan::GroupKind::Context);
    return out;
}

} // namespace loom::comm
