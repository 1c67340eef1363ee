#include "engine/comm/NcclCommunicator.h"

#include "engine/comm/Agreement.h"
#include "engine/comm/CollectiveCalls.h"
#include "engine/comm/NcclKernels.h"
#include "engine/comm/PollUntil.h"

#include <chrono>
#include <cstring>
#include <mutex>

namespace loom::comm {

using trace::Algorithm;
using trace::EventKind;

namespace {

void cudaCheck(cudaError_t e, const std::string& context)
{
    if (e != cudaSuccess)
        throw CommError(context + ": CUDA error: " + cudaGetErrorString(e));
}

void ncclCheck(ncclResult_t r, const std::string& context)
{
    if (r != ncclSuccess)
        throw CommError(context + ": NCCL error: " + ncclGetErrorString(r));
}

ncclDataType_t ncclType(DType t)
{
    switch (t) {
    case DType::F32:
        return ncclFloat32;
    case DType::F16:
        return ncclFloat16;
    case DType::BF16:
        return ncclBfloat16;
    case DType::F64:
        return ncclFloat64;
    case DType::I64:
        return ncclInt64;
    case DType::U8:
        return ncclUint8;
    }
    return ncclFloat32;
}

ncclRedOp_t ncclOp(ReduceOp op)
{
    return op == ReduceOp::Sum ? ncclSum : op == ReduceOp::Max ? ncclMax : ncclMin;
}

} // namespace

// What outlives a communicator's Works: its NCCL communicators (a timed-out Work aborts all of them, as NCCL
// advises for a hung collective) and whether that happened (then the destructor must not wait or destroy).
struct NcclCommunicator::Shared {
    std::mutex mutex;
    std::vector<ncclComm_t> comms;
    bool aborted = false;
    void abortAll()
    {
        std::lock_guard lock(mutex);
        if (aborted)
            return;
        aborted = true;
        for (ncclComm_t c : comms)
            if (c)
                ncclCommAbort(c);
    }
    ncclResult_t asyncError()
    {
        std::lock_guard lock(mutex);
        for (ncclComm_t c : comms) {
            ncclResult_t e = ncclSuccess;
            if (c && ncclCommGetAsyncError(c, &e) == ncclSuccess && e != ncclSuccess && e != ncclInProgress)
                return e;
        }
        return ncclSuccess;
    }
};

namespace {

// Completes when the stream passes the event recorded after the operation.
class EventWork final : public GuardedWork {
public:
    EventWork(cudaStream_t stream, std::shared_ptr<NcclCommunicator::Shared> shared, std::string context,
        double timeoutSeconds, trace::TraceRecorder* recorder, trace::TraceEvent event, WorkStats stats)
        : m_shared(std::move(shared))
        , m_context(std::move(context))
        , m_timeout(timeoutSeconds)
        , m_recorder(recorder)
        , m_event(std::move(event))
    {
        m_stats = stats;
        cudaEventCreateWithFlags(&m_done, cudaEventDisableTiming);
        cudaEventRecord(m_done, stream);
    }
    ~EventWork() override { cudaEventDestroy(m_done); }
    bool isCompleted() override
    {
        std::lock_guard lock(m_mutex);
        return poll();
    }
    void wait() override
    {
        std::lock_guard lock(m_mutex);
        const bool finished = pollUntil([this] { return poll(); }, std::chrono::duration<double>(m_timeout));
        if (!finished && !m_error) {
            m_shared->abortAll(); // NCCL's advice for a hung collective: abort the communicators
            m_error = m_context + " timed out after " + std::to_string(static_cast<int>(m_timeout))
                + " s on the GPU; a peer did not take part (LOOM_COMM_TIMEOUT_S sets the limit)";
            m_finished = true;
        }
        if (m_error)
            throw CommError(*m_error);
    }

private:
    bool poll()
    {
        if (m_finished)
            return true;
        const cudaError_t q = cudaEventQuery(m_done);
        if (q == cudaErrorNotReady) {
            const ncclResult_t async = m_shared->asyncError();
            if (async == ncclSuccess)
                return false;
            m_error = m_context + ": NCCL failed: " + ncclGetErrorString(async);
        } else if (q != cudaSuccess) {
            m_error = m_context + ": CUDA failed: " + cudaGetErrorString(q);
        }
        m_finished = true;
        m_stats.endNs = trace::nowNs();
        if (m_recorder && !m_error) {
            m_event.endNs = m_stats.endNs;
            m_recorder->record(m_event);
        }
        return true;
    }

    cudaEvent_t m_done = nullptr;
    std::shared_ptr<NcclCommunicator::Shared> m_shared;
    std::string m_context;
    double m_timeout;
    trace::TraceRecorder* m_recorder;
    trace::TraceEvent m_event;
    bool m_finished = false;
};

} // namespace

// Point-to-point for Loom's algorithms: sends and receives collect in an NCCL group that is closed at the
// first wait; everything after it is ordered on the stream.
class NcclTransport final : public Transport {
public:
    NcclTransport(ncclComm_t comm, cudaStream_t stream)
        : m_comm(comm)
        , m_stream(stream)
    {
        ncclCommCount(comm, &m_size);
        ncclCommUserRank(comm, &m_rank);
    }
    ~NcclTransport() override
    {
        for (void* p : m_scratch)
            if (p)
                cudaFree(p);
    }
    int rank() const override { return m_rank; }
    int size() const override { return m_size; }
    Request isend(const void* data, std::size_t bytes, int peer) override
    {
        open();
        ncclCheck(ncclSend(data, bytes, ncclUint8, peer, m_comm, m_stream), m_context);
        m_bytesSent += bytes;
        return m_posted++;
    }
    Request irecv(void* data, std::size_t bytes, int peer) override
    {
        open();
        ncclCheck(ncclRecv(data, bytes, ncclUint8, peer, m_comm, m_stream), m_context);
        return m_posted++;
    }
    void wait(Request) override { close(); }
    void waitAll() override { close(); }
    void reduce(void* dst, const void* src, std::size_t count, DType type, ReduceOp op) override
    {
        close();
        cudaCheck(cuda::reduce(dst, src, count, type, op, m_stream), m_context);
    }
    void copy(void* dst, const void* src, std::size_t bytes) override
    {
        close();
        if (bytes)
            cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, m_stream), m_context);
    }
    void* scratch(std::size_t bytes, int slot) override
    {
        const auto s = static_cast<std::size_t>(slot);
        if (m_scratch.size() <= s) {
            m_scratch.resize(s + 1, nullptr);
            m_scratchBytes.resize(s + 1, 0);
        }
        if (m_scratchBytes[s] < bytes) {
            close();
            cudaStreamSynchronize(m_stream); // the old buffer may still be in use by queued work
            if (m_scratch[s])
                cudaFree(m_scratch[s]);
            cudaCheck(
                cudaMalloc(&m_scratch[s], bytes), m_context + " (scratch of " + std::to_string(bytes) + " bytes)");
            m_scratchBytes[s] = bytes;
        }
        return m_scratch[s];
    }

private:
    void open()
    {
        if (!m_open) {
            ncclCheck(ncclGroupStart(), m_context);
            m_open = true;
        }
    }
    void close()
    {
        if (m_open) {
            m_open = false;
            ncclCheck(ncclGroupEnd(), m_context);
        }
    }
    ncclComm_t m_comm;
    cudaStream_t m_stream;
    int m_rank = 0;
    int m_size = 1;
    bool m_open = false;
    Request m_posted = 0;
    std::vector<void*> m_scratch;
    std::vector<std::size_t> m_scratchBytes;
};

std::string NcclCommunicator::deviceProblem()
{
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess)
        return std::string("no GPU: cudaGetDeviceCount says \"") + cudaGetErrorString(e)
            + "\"; use the MPI or Gloo backend (comm.backend \"mpi\" or \"gloo\")";
    if (count == 0)
        return "no GPU: no CUDA device is visible; use the MPI or Gloo backend (comm.backend \"mpi\" or \"gloo\")";
    return {};
}

NcclCommunicator::NcclCommunicator(std::unique_ptr<Communicator> host, int localRank, trace::TraceRecorder* recorder,
    CommConfig config, std::vector<int> nodeOfMember)
    : m_host(std::move(host))
    , m_hostTransport(*m_host)
    , m_recorder(recorder)
    , m_config(config)
    , m_nodeOf(std::move(nodeOfMember))
{
    m_rank = m_host->rank();
    m_size = m_host->size();
    m_group = m_host->group();
    // Every member learns whether every member has a GPU, so none is left waiting in NCCL's init.
    const std::string problem = deviceProblem();
    std::int64_t ok = problem.empty() ? 1 : 0;
    m_host->allReduce(&ok, 1, DType::I64, ReduceOp::Min)->wait();
    if (!ok)
        throw CommError(
            "NCCL backend for " + m_group.name + ": " + (problem.empty() ? "another member has no GPU" : problem));
    m_group.id = m_recorder ? m_recorder->addGroup(m_group.kind, m_group.ranks, m_group.name) : -1;
    if (m_nodeOf.size() != m_group.ranks.size())
        m_nodeOf.assign(m_group.ranks.size(), 0);

    int devices = 1;
    cudaGetDeviceCount(&devices);
    m_device = localRank % devices;
    cudaCheck(cudaSetDevice(m_device), m_group.name);
    cudaCheck(cudaStreamCreateWithFlags(&m_stream, cudaStreamNonBlocking), m_group.name);

    ncclUniqueId id;
    if (m_rank == 0)
        ncclCheck(ncclGetUniqueId(&id), m_group.name);
    m_host->broadcast(&id, sizeof id, DType::U8, 0)->wait();
    ncclCheck(ncclCommInitRank(&m_comm, m_size, id, m_rank), m_group.name + ": ncclCommInitRank");
    m_transport = std::make_unique<NcclTransport>(m_comm, m_stream);
    cudaCheck(cudaMalloc(reinterpret_cast<void**>(&m_barrierWord), sizeof(float)), m_group.name);
    cudaCheck(cudaEventCreateWithFlags(&m_callerReady, cudaEventDisableTiming), m_group.name);
    m_shared = std::make_shared<Shared>();
    m_shared->comms = { m_comm };
}

void NcclCommunicator::begin()
{
    // The communicator's stream does not synchronise with the caller's compute stream (the legacy default
    // stream unless setComputeStream named another): make it wait for everything issued there so far, so it
    // reads finished data.
    cudaCheck(cudaEventRecord(m_callerReady, m_computeStream), m_group.name);
    cudaCheck(cudaStreamWaitEvent(m_stream, m_callerReady, 0), m_group.name);
}

NcclCommunicator::~NcclCommunicator()
{
    const bool aborted = m_shared && m_shared->aborted;
    if (m_stream && !aborted)
        cudaStreamSynchronize(m_stream); // after an abort the stream may never drain
    m_transport.reset();
    m_localTransport.reset();
    m_crossTransport.reset();
    if (!aborted)
        for (ncclComm_t c : { m_crossNode, m_nodeLocal, m_comm })
            if (c)
                ncclCommDestroy(c);
    if (m_callerReady)
        cudaEventDestroy(m_callerReady);
    if (m_barrierWord)
        cudaFree(m_barrierWord);
    if (m_stream)
        cudaStreamDestroy(m_stream);
}

Transport& NcclCommunicator::transport()
{
    return *m_transport;
}

std::pair<Transport*, Transport*> NcclCommunicator::hierarchy()
{
    if (!m_localTransport) {
        ncclCheck(ncclCommSplit(m_comm, m_nodeOf[static_cast<std::size_t>(m_rank)], m_rank, &m_nodeLocal, nullptr),
            m_group.name + ": splitting by node");
        int local = 0;
        ncclCommUserRank(m_nodeLocal, &local);
        ncclCheck(
            ncclCommSplit(m_comm, local, m_rank, &m_crossNode, nullptr), m_group.name + ": splitting across nodes");
        {
            std::lock_guard lock(m_shared->mutex);
            m_shared->comms = { m_comm, m_nodeLocal, m_crossNode };
        }
        m_localTransport = std::make_unique<NcclTransport>(m_nodeLocal, m_stream);
        m_crossTransport = std::make_unique<NcclTransport>(m_crossNode, m_stream);
    }
    return { m_localTransport.get(), m_crossTransport.get() };
}

void NcclCommunicator::toHost(void* host, const void* data, std::size_t bytes)
{
    cudaCheck(cudaMemcpyAsync(host, data, bytes, cudaMemcpyDeviceToHost, m_stream), m_group.name);
    cudaCheck(cudaStreamSynchronize(m_stream), m_group.name);
}

void NcclCommunicator::fromHost(void* data, const void* host, std::size_t bytes)
{
    cudaCheck(cudaMemcpyAsync(data, host, bytes, cudaMemcpyHostToDevice, m_stream), m_group.name);
    cudaCheck(cudaStreamSynchronize(m_stream), m_group.name);
}

void NcclCommunicator::runLibrary(const CollectiveCall& c, const std::string& context)
{
    switch (c.kind) {
    case EventKind::AllReduce:
        ncclCheck(ncclAllReduce(c.data, c.data, c.count, ncclType(c.type), ncclOp(c.op), m_comm, m_stream), context);
        break;
    case EventKind::ReduceScatter:
        ncclCheck(
            ncclReduceScatter(c.send, c.recv, c.count, ncclType(c.type), ncclOp(c.op), m_comm, m_stream), context);
        break;
    case EventKind::AllGather:
        ncclCheck(ncclAllGather(c.send, c.recv, c.count, ncclType(c.type), m_comm, m_stream), context);
        break;
    case EventKind::Broadcast:
        ncclCheck(ncclBroadcast(c.data, c.data, c.count, ncclType(c.type), c.root, m_comm, m_stream), context);
        break;
    case EventKind::Barrier:
        // NCCL has no barrier: an all-reduce of one word orders every member's stream.
        ncclCheck(ncclAllReduce(m_barrierWord, m_barrierWord, 1, ncclFloat32, ncclSum, m_comm, m_stream), context);
        break;
    case EventKind::AllToAll: {
        // nccl-tests' all-to-all: one grouped send and receive per member, blocks packed in member order.
        const std::size_t es = sizeOf(c.type);
        const bool equal = c.sendCounts.empty();
        std::size_t sendOff = 0, recvOff = 0;
        ncclCheck(ncclGroupStart(), context);
        for (int j = 0; j < m_size; ++j) {
            const std::size_t sn = equal ? c.count : c.sendCounts[static_cast<std::size_t>(j)];
            const std::size_t rn = equal ? c.count : c.recvCounts[static_cast<std::size_t>(j)];
            if (sn)
                ncclCheck(ncclSend(static_cast<const char*>(c.send) + sendOff * es, sn, ncclType(c.type), j, m_comm,
                              m_stream),
                    context);
            if (rn)
                ncclCheck(
                    ncclRecv(static_cast<char*>(c.recv) + recvOff * es, rn, ncclType(c.type), j, m_comm, m_stream),
                    context);
            sendOff += sn;
            recvOff += rn;
        }
        ncclCheck(ncclGroupEnd(), context);
        break;
    }
    default:
        throw CommError(context + ": not a collective");
    }
}

WorkPtr NcclCommunicator::allToAll(
    const void* send, void* recv, std::size_t count, DType type, const CollectiveOptions& options)
{
    return collective(allToAllCall(send, recv, count, type, options));
}

WorkPtr NcclCommunicator::allToAllV(const void* send, const std::vector<std::size_t>& sendCounts, void* recv,
    const std::vector<std::size_t>& recvCounts, DType type, const CollectiveOptions& options)
{
    return collective(allToAllVCall(send, sendCounts, recv, recvCounts, type, options, m_size, m_group.name));
}

WorkPtr NcclCommunicator::collective(CollectiveCall call)
{
    call.sequence = ++m_sequence;
    WorkStats stats;
    stats.startNs = trace::nowNs();
    stats.bytes = logicalBytes(call, m_size);
    begin();
    const CollectiveOutcome out = runCollective(*this, call, m_group, m_rank, m_size, m_nodeOf, m_config);
    stats.algorithm = out.algorithm;
    stats.wireBytes = out.wireBytes;
    return std::make_shared<EventWork>(m_stream, m_shared,
        describe(call, m_group) + " [NCCL, GPU " + std::to_string(m_device) + "]", m_config.timeoutSeconds, m_recorder,
        collectiveEvent(call, m_group, stats), stats);
}

WorkPtr NcclCommunicator::allReduce(
    void* data, std::size_t count, DType type, ReduceOp op, const CollectiveOptions& options)
{
    return collective(allReduceCall(data, count, type, op, options));
}

WorkPtr NcclCommunicator::reduceScatter(
    const void* send, void* recv, std::size_t recvCount, DType type, ReduceOp op, const CollectiveOptions& options)
{
    return collective(reduceScatterCall(send, recv, recvCount, type, op, options));
}

WorkPtr NcclCommunicator::allGather(
    const void* send, void* recv, std::size_t sendCount, DType type, const CollectiveOptions& options)
{
    return collective(allGatherCall(send, recv, sendCount, type, options));
}

WorkPtr NcclCommunicator::broadcast(void* data, std::size_t count, DType type, int root)
{
    return collective(broadcastCall(data, count, type, root, m_size, m_group.name));
}

WorkPtr NcclCommunicator::barrier()
{
    return collective(barrierCall());
}

WorkPtr NcclCommunicator::pointToPoint(CollectiveCall call, int peer, const std::string& context, WorkStats stats)
{
    if (peer < 0 || peer >= m_size)
        throw CommError(
            context + ": peer " + std::to_string(peer) + " is not a member (0 to " + std::to_string(m_size - 1) + ")");
    stats.algorithm = trace::Algorithm::None;
    return std::make_shared<EventWork>(m_stream, m_shared, context, m_config.timeoutSeconds, m_recorder,
        collectiveEvent(call, m_group, stats, m_group.ranks[static_cast<std::size_t>(peer)]), stats);
}

WorkPtr NcclCommunicator::send(const void* data, std::size_t count, DType type, int peer, int)
{
    const std::string context = "send to member " + std::to_string(peer) + " on " + m_group.name;
    WorkStats stats;
    stats.startNs = trace::nowNs();
    stats.bytes = stats.wireBytes = count * sizeOf(type);
    begin();
    ncclCheck(ncclSend(data, count, ncclType(type), peer, m_comm, m_stream), context);
    CollectiveCall c;
    c.kind = EventKind::Send;
    return pointToPoint(c, peer, context, stats);
}

WorkPtr NcclCommunicator::recv(void* data, std::size_t count, DType type, int peer, int)
{
    const std::string context = "receive from member " + std::to_string(peer) + " on " + m_group.name;
    WorkStats stats;
    stats.startNs = trace::nowNs();
    stats.bytes = count * sizeOf(type);
    begin();
    ncclCheck(ncclRecv(data, count, ncclType(type), peer, m_comm, m_stream), context);
    CollectiveCall c;
    c.kind = EventKind::Recv;
    return pointToPoint(c, peer, context, stats);
}

WorkPtr NcclCommunicator::sendRecv(
    const void* sendData, int sendPeer, void* recvData, int recvPeer, std::size_t count, DType type, int)
{
    // NCCL's point-to-point blocks on the GPU until the peer's matching call: the pair goes in one group.
    const std::string context = "send to member " + std::to_string(sendPeer) + " and receive from member "
        + std::to_string(recvPeer) + " on " + m_group.name;
    WorkStats stats;
    stats.startNs = trace::nowNs();
    stats.bytes = stats.wireBytes = count * sizeOf(type);
    begin();
    ncclCheck(ncclGroupStart(), context);
    ncclCheck(ncclSend(sendData, count, ncclType(type), sendPeer, m_comm, m_stream), context);
    ncclCheck(ncclRecv(recvData, count, ncclType(type), recvPeer, m_comm, m_stream), context);
    ncclCheck(ncclGroupEnd(), context);
    CollectiveCall c;
    c.kind = EventKind::Send;
    return pointToPoint(c, sendPeer, context, stats);
}

} // namespace loom::comm
