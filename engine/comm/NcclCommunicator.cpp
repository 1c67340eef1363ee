#include "engine/comm/NcclCommunicator.h"

#include "engine/comm/Agreement.h"
#include "engine/comm/CompressedAllReduce.h"
#include "engine/comm/MpiTransport.h"
#include "engine/comm/NcclKernels.h"
#include "engine/comm/RingAlgorithms.h"

#include <chrono>
#include <map>
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
    return t == DType::F32 ? ncclFloat32 : t == DType::F16 ? ncclFloat16 : ncclBfloat16;
}

ncclRedOp_t ncclOp(ReduceOp op)
{
    return op == ReduceOp::Sum ? ncclSum : op == ReduceOp::Max ? ncclMax : ncclMin;
}

}  // namespace

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
class EventWork final : public Work {
public:
    EventWork(cudaStream_t stream, std::shared_ptr<NcclCommunicator::Shared> shared, std::string context,
              double timeoutSeconds, trace::TraceRecorder* recorder, trace::TraceEvent event, WorkStats stats)
        : m_shared(std::move(shared)), m_context(std::move(context)), m_timeout(timeoutSeconds), m_recorder(recorder),
          m_event(std::move(event)), m_stats(stats)
    {
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
            m_shared->abortAll();  // NCCL's advice for a hung collective: abort the communicators
            m_error = m_context + " timed out after " + std::to_string(static_cast<int>(m_timeout))
                      + " s on the GPU; a peer did not take part (LOOM_COMM_TIMEOUT_S sets the limit)";
            m_finished = true;
        }
        if (m_error)
            throw CommError(*m_error);
    }
    std::optional<std::string> error() override
    {
        std::lock_guard lock(m_mutex);
        return m_error;
    }
    WorkStats stats() override
    {
        std::lock_guard lock(m_mutex);
        return m_stats;
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

    std::mutex m_mutex;
    cudaEvent_t m_done = nullptr;
    std::shared_ptr<NcclCommunicator::Shared> m_shared;
    std::string m_context;
    double m_timeout;
    trace::TraceRecorder* m_recorder;
    trace::TraceEvent m_event;
    WorkStats m_stats;
    bool m_finished = false;
    std::optional<std::string> m_error;
};

}  // namespace

// Point-to-point for Loom's algorithms: sends and receives collect in an NCCL group that is closed at the
// first wait; everything after it is ordered on the stream.
class NcclTransport final : public Transport {
public:
    NcclTransport(ncclComm_t comm, cudaStream_t stream) : m_comm(comm), m_stream(stream)
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
    void setContext(std::string context) { m_context = std::move(context); }
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
            cudaStreamSynchronize(m_stream);  // the old buffer may still be in use by queued work
            if (m_scratch[s])
                cudaFree(m_scratch[s]);
            cudaCheck(cudaMalloc(&m_scratch[s], bytes), m_context + " (scratch of " + std::to_string(bytes) + " bytes)");
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
    std::string m_context;
    std::vector<void*> m_scratch;
    std::vector<std::size_t> m_scratchBytes;
};

struct NcclCommunicator::Call {
    EventKind kind = EventKind::AllReduce;
    std::size_t count = 0;
    DType type = DType::F32;
    ReduceOp op = ReduceOp::Sum;
    int root = 0;
    int peer = -1;
    CollectiveOptions options;
    std::uint64_t sequence = 0;
    WorkStats stats;
};

std::string NcclCommunicator::deviceProblem()
{
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess)
        return std::string("no GPU: cudaGetDeviceCount says \"") + cudaGetErrorString(e)
               + "\"; use the MPI backend (--backend mpi)";
    if (count == 0)
        return "no GPU: no CUDA device is visible; use the MPI backend (--backend mpi)";
    return {};
}

NcclCommunicator::NcclCommunicator(MPI_Comm comm, trace::GroupKind kind, std::string name,
                                   trace::TraceRecorder* recorder, CommConfig config, std::vector<int> nodeOfMember)
    : m_recorder(recorder), m_config(config), m_nodeOf(std::move(nodeOfMember))
{
    MPI_Comm_rank(comm, &m_rank);
    MPI_Comm_size(comm, &m_size);
    // Every member learns whether every member has a GPU, so none is left waiting in NCCL's init.
    const std::string problem = deviceProblem();
    int ok = problem.empty() ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm);
    if (!ok)
        throw CommError("NCCL backend for " + name + ": " + (problem.empty() ? "another member has no GPU" : problem));

    MPI_Comm_dup(comm, &m_mpi);
    MPI_Comm_set_errhandler(m_mpi, MPI_ERRORS_RETURN);
    int worldRank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &worldRank);
    std::vector<int> members(static_cast<std::size_t>(m_size));
    MPI_Allgather(&worldRank, 1, MPI_INT, members.data(), 1, MPI_INT, comm);
    m_group = {-1, kind, std::vector<std::int32_t>(members.begin(), members.end()), std::move(name)};
    if (m_recorder)
        m_group.id = m_recorder->addGroup(kind, m_group.ranks, m_group.name);

    // The device is the process's rank among the processes of its node (from the world, so every
    // communicator of a process uses the same GPU).
    MPI_Comm shared;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, worldRank, MPI_INFO_NULL, &shared);
    int localRank = 0, devices = 1;
    MPI_Comm_rank(shared, &localRank);
    MPI_Comm_free(&shared);
    cudaGetDeviceCount(&devices);
    m_device = localRank % devices;
    cudaCheck(cudaSetDevice(m_device), m_group.name);
    cudaCheck(cudaStreamCreateWithFlags(&m_stream, cudaStreamNonBlocking), m_group.name);

    ncclUniqueId id;
    if (m_rank == 0)
        ncclCheck(ncclGetUniqueId(&id), m_group.name);
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, m_mpi);
    ncclCheck(ncclCommInitRank(&m_comm, m_size, id, m_rank), m_group.name + ": ncclCommInitRank");
    if (m_nodeOf.empty())
        m_nodeOf = nodesBySharedMemory(comm);
    m_transport = std::make_unique<NcclTransport>(m_comm, m_stream);
    cudaCheck(cudaMalloc(reinterpret_cast<void**>(&m_barrierWord), sizeof(float)), m_group.name);
    cudaCheck(cudaEventCreateWithFlags(&m_callerReady, cudaEventDisableTiming), m_group.name);
    m_shared = std::make_shared<Shared>();
    m_shared->comms = {m_comm};
}

void NcclCommunicator::begin()
{
    // The communicator's stream does not synchronise with the legacy default stream, where callers' kernels
    // and copies run: make it wait for everything issued there so far, so it reads finished data.
    cudaCheck(cudaEventRecord(m_callerReady, 0), m_group.name);
    cudaCheck(cudaStreamWaitEvent(m_stream, m_callerReady, 0), m_group.name);
}

NcclCommunicator::~NcclCommunicator()
{
    const bool aborted = m_shared && m_shared->aborted;
    if (m_stream && !aborted)
        cudaStreamSynchronize(m_stream);  // after an abort the stream may never drain
    m_transport.reset();
    if (!aborted)
        for (ncclComm_t c : {m_crossNode, m_nodeLocal, m_comm})
            if (c)
                ncclCommDestroy(c);
    if (m_callerReady)
        cudaEventDestroy(m_callerReady);
    if (m_barrierWord)
        cudaFree(m_barrierWord);
    if (m_stream)
        cudaStreamDestroy(m_stream);
    if (m_mpi != MPI_COMM_NULL)
        MPI_Comm_free(&m_mpi);
}

std::string NcclCommunicator::describe(const Call& c) const
{
    std::string s = std::string(trace::toString(c.kind)) + " #" + std::to_string(c.sequence) + " (" + std::to_string(c.count)
                    + " " + std::string(toString(c.type));
    if (c.kind == EventKind::AllReduce)
        s += ", " + std::string(toString(c.options.algorithm));
    if (c.options.codec.kind != plan::Codec::Kind::None)
        s += ", codec " + c.options.codec.toString();
    return s + ") on " + m_group.name + " " + rankList(m_group.ranks) + " [NCCL, GPU " + std::to_string(m_device) + "]";
}

void NcclCommunicator::check(const Call& c)
{
    if (m_config.checkAgreement && m_size > 1)
        checkAgreement(m_mpi, {c.kind, c.type, c.op, static_cast<int>(c.options.algorithm),
                               static_cast<int>(c.options.codec.kind), c.root, c.count},
                       m_group.ranks, m_config.timeoutSeconds, describe(c));
}

WorkPtr NcclCommunicator::finish(Call& c)
{
    trace::TraceEvent e;
    e.kind = c.kind;
    e.startNs = c.stats.startNs;
    e.bytes = c.stats.bytes;
    e.wireBytes = c.stats.wireBytes;
    e.group = m_group.id;
    e.groupSize = m_size;
    e.peer = c.peer >= 0 ? m_group.ranks[static_cast<std::size_t>(c.peer)] : -1;
    e.algorithm = c.stats.algorithm;
    if (c.options.codec.kind != plan::Codec::Kind::None)
        e.codec = c.options.codec.toString();
    return std::make_shared<EventWork>(m_stream, m_shared, describe(c), m_config.timeoutSeconds, m_recorder, std::move(e),
                                       c.stats);
}

void NcclCommunicator::ensureHierarchy()
{
    if (m_nodeLocal)
        return;
    ncclCheck(ncclCommSplit(m_comm, m_nodeOf[static_cast<std::size_t>(m_rank)], m_rank, &m_nodeLocal, nullptr),
              m_group.name + ": splitting by node");
    int local = 0;
    ncclCommUserRank(m_nodeLocal, &local);
    ncclCheck(ncclCommSplit(m_comm, local, m_rank, &m_crossNode, nullptr), m_group.name + ": splitting across nodes");
    std::lock_guard lock(m_shared->mutex);
    m_shared->comms = {m_comm, m_nodeLocal, m_crossNode};
}

WorkPtr NcclCommunicator::allReduce(void* data, std::size_t count, DType type, ReduceOp op,
                                    const CollectiveOptions& options)
{
    Call c{EventKind::AllReduce, count, type, op, 0, -1, options, ++m_sequence, {}};
    c.stats.startNs = trace::nowNs();
    c.stats.bytes = count * sizeOf(type);
    check(c);
    begin();
    const std::string context = describe(c);
    m_transport->setContext(context);
    const std::uint64_t before = m_transport->bytesSent();
    const double n = m_size;
    if (options.codec.kind != plan::Codec::Kind::None) {
        if (type != DType::F32 || op != ReduceOp::Sum)
            throw CommError(context + ": gradient codecs compress fp32 sums");
        // Stage through host memory and run the compressed all-reduce over MPI.
        std::vector<float> host(count);
        cudaCheck(cudaMemcpyAsync(host.data(), data, count * 4, cudaMemcpyDeviceToHost, m_stream), context);
        cudaCheck(cudaStreamSynchronize(m_stream), context);
        MpiTransport mpi(m_mpi, std::vector<int>(m_group.ranks.begin(), m_group.ranks.end()), m_config.timeoutSeconds);
        mpi.setContext(context);
        auto codec = makeCodec(options.codec, options.codecBlock);
        c.stats.algorithm = m_size > 1 ? compressedAllReduce(mpi, host.data(), count, *codec,
                                                             options.codec.kind == plan::Codec::Kind::TopK, options.feedback)
                                       : Algorithm::Library;
        c.stats.wireBytes = mpi.bytesSent();
        cudaCheck(cudaMemcpyAsync(data, host.data(), count * 4, cudaMemcpyHostToDevice, m_stream), context);
        cudaCheck(cudaStreamSynchronize(m_stream), context);
        return finish(c);
    }
    switch (options.algorithm) {
    case CollectiveAlgorithm::Library:
        ncclCheck(ncclAllReduce(data, data, count, ncclType(type), ncclOp(op), m_comm, m_stream), context);
        c.stats.algorithm = Algorithm::Library;
        c.stats.wireBytes = static_cast<std::uint64_t>(2 * (n - 1) / n * double(c.stats.bytes));
        return finish(c);
    case CollectiveAlgorithm::Ring:
    case CollectiveAlgorithm::Chunked:
        ringAllReduce(*m_transport, data, count, type, op,
                      options.algorithm == CollectiveAlgorithm::Chunked ? options.chunkBytes : 0);
        c.stats.algorithm = options.algorithm == CollectiveAlgorithm::Chunked ? Algorithm::ChunkedRing : Algorithm::Ring;
        break;
    case CollectiveAlgorithm::Hierarchical: {
        std::map<int, int> perNode;
        for (int node : m_nodeOf)
            ++perNode[node];
        bool even = true;
        for (auto& [node, count] : perNode)
            even = even && count == perNode.begin()->second;
        if (!even) {  // the cross-node groups would not line up: the ring, as the MPI backend does
            ringAllReduce(*m_transport, data, count, type, op, options.chunkBytes);
            c.stats.algorithm = Algorithm::Ring;
            break;
        }
        ensureHierarchy();
        NcclTransport local(m_nodeLocal, m_stream), cross(m_crossNode, m_stream);
        local.setContext(context + " [inside the node]");
        cross.setContext(context + " [across nodes]");
        hierarchicalAllReduce(local, cross, data, count, type, op, options.chunkBytes);
        cudaStreamSynchronize(m_stream);  // the transports' scratch buffers are freed on return
        c.stats.algorithm = Algorithm::Hierarchical;
        c.stats.wireBytes = local.bytesSent() + cross.bytesSent();
        return finish(c);
    }
    }
    m_transport->waitAll();
    c.stats.wireBytes = m_transport->bytesSent() - before;
    return finish(c);
}

WorkPtr NcclCommunicator::reduceScatter(const void* send, void* recv, std::size_t recvCount, DType type, ReduceOp op,
                                        const CollectiveOptions& options)
{
    Call c{EventKind::ReduceScatter, recvCount, type, op, 0, -1, options, ++m_sequence, {}};
    c.options.codec = {};
    c.stats.startNs = trace::nowNs();
    c.stats.bytes = recvCount * sizeOf(type) * static_cast<std::size_t>(m_size);
    check(c);
    begin();
    const std::string context = describe(c);
    if (options.algorithm == CollectiveAlgorithm::Library || options.algorithm == CollectiveAlgorithm::Hierarchical) {
        ncclCheck(ncclReduceScatter(send, recv, recvCount, ncclType(type), ncclOp(op), m_comm, m_stream), context);
        c.stats.algorithm = Algorithm::Library;
        c.stats.wireBytes = c.stats.bytes * static_cast<std::uint64_t>(m_size - 1) / static_cast<std::uint64_t>(m_size);
        return finish(c);
    }
    m_transport->setContext(context);
    const std::uint64_t before = m_transport->bytesSent();
    const std::size_t es = sizeOf(type), total = recvCount * static_cast<std::size_t>(m_size);
    void* work = m_transport->scratch(total * es, 1);
    m_transport->copy(work, send, total * es);
    const Segments seg = Segments::even(total, m_size);
    const std::size_t chunk = options.algorithm == CollectiveAlgorithm::Chunked ? options.chunkBytes : 0;
    ringReduceScatterInPlace(*m_transport, work, seg, type, op, chunk);
    m_transport->copy(recv, static_cast<char*>(work) + seg.offset[static_cast<std::size_t>(m_rank)] * es, recvCount * es);
    c.stats.algorithm = chunk ? Algorithm::ChunkedRing : Algorithm::Ring;
    c.stats.wireBytes = m_transport->bytesSent() - before;
    return finish(c);
}

WorkPtr NcclCommunicator::allGather(const void* send, void* recv, std::size_t sendCount, DType type,
                                    const CollectiveOptions& options)
{
    Call c{EventKind::AllGather, sendCount, type, ReduceOp::Sum, 0, -1, options, ++m_sequence, {}};
    c.options.codec = {};
    c.stats.startNs = trace::nowNs();
    c.stats.bytes = sendCount * sizeOf(type) * static_cast<std::size_t>(m_size);
    check(c);
    begin();
    const std::string context = describe(c);
    if (options.algorithm == CollectiveAlgorithm::Library || options.algorithm == CollectiveAlgorithm::Hierarchical) {
        ncclCheck(ncclAllGather(send, recv, sendCount, ncclType(type), m_comm, m_stream), context);
        c.stats.algorithm = Algorithm::Library;
        c.stats.wireBytes = c.stats.bytes * static_cast<std::uint64_t>(m_size - 1) / static_cast<std::uint64_t>(m_size);
        return finish(c);
    }
    m_transport->setContext(context);
    const std::uint64_t before = m_transport->bytesSent();
    const std::size_t es = sizeOf(type);
    const Segments seg = Segments::even(sendCount * static_cast<std::size_t>(m_size), m_size);
    m_transport->copy(static_cast<char*>(recv) + seg.offset[static_cast<std::size_t>(m_rank)] * es, send, sendCount * es);
    const std::size_t chunk = options.algorithm == CollectiveAlgorithm::Chunked ? options.chunkBytes : 0;
    ringAllGatherInPlace(*m_transport, recv, seg, type, chunk);
    m_transport->waitAll();
    c.stats.algorithm = chunk ? Algorithm::ChunkedRing : Algorithm::Ring;
    c.stats.wireBytes = m_transport->bytesSent() - before;
    return finish(c);
}

WorkPtr NcclCommunicator::broadcast(void* data, std::size_t count, DType type, int root)
{
    if (root < 0 || root >= m_size)
        throw CommError("broadcast on " + m_group.name + ": root " + std::to_string(root) + " is not a member");
    Call c{EventKind::Broadcast, count, type, ReduceOp::Sum, root, root, {}, ++m_sequence, {}};
    c.stats.startNs = trace::nowNs();
    c.stats.bytes = count * sizeOf(type);
    check(c);
    begin();
    ncclCheck(ncclBroadcast(data, data, count, ncclType(type), root, m_comm, m_stream), describe(c));
    c.stats.algorithm = Algorithm::Library;
    c.stats.wireBytes = m_rank == root ? c.stats.bytes : 0;
    return finish(c);
}

WorkPtr NcclCommunicator::barrier()
{
    // NCCL has no barrier: an all-reduce of one word orders every member's stream.
    Call c{EventKind::Barrier, 0, DType::F32, ReduceOp::Sum, 0, -1, {}, ++m_sequence, {}};
    c.stats.startNs = trace::nowNs();
    check(c);
    begin();
    ncclCheck(ncclAllReduce(m_barrierWord, m_barrierWord, 1, ncclFloat32, ncclSum, m_comm, m_stream), describe(c));
    c.stats.algorithm = Algorithm::Library;
    return finish(c);
}

WorkPtr NcclCommunicator::send(const void* data, std::size_t count, DType type, int peer, int)
{
    Call c{EventKind::Send, count, type, ReduceOp::Sum, 0, peer, {}, 0, {}};
    c.stats.startNs = trace::nowNs();
    c.stats.bytes = c.stats.wireBytes = count * sizeOf(type);
    begin();
    ncclCheck(ncclSend(data, count, ncclType(type), peer, m_comm, m_stream), "send to member " + std::to_string(peer) + " on " + m_group.name);
    return finish(c);
}

WorkPtr NcclCommunicator::recv(void* data, std::size_t count, DType type, int peer, int)
{
    Call c{EventKind::Recv, count, type, ReduceOp::Sum, 0, peer, {}, 0, {}};
    c.stats.startNs = trace::nowNs();
    c.stats.bytes = count * sizeOf(type);
    begin();
    ncclCheck(ncclRecv(data, count, ncclType(type), peer, m_comm, m_stream), "receive from member " + std::to_string(peer) + " on " + m_group.name);
    return finish(c);
}

WorkPtr NcclCommunicator::sendRecv(const void* sendData, int sendPeer, void* recvData, int recvPeer, std::size_t count,
                                   DType type, int)
{
    // NCCL's point-to-point blocks on the GPU until the peer's matching call: the pair goes in one group.
    Call c{EventKind::Send, count, type, ReduceOp::Sum, 0, sendPeer, {}, 0, {}};
    c.stats.startNs = trace::nowNs();
    c.stats.bytes = c.stats.wireBytes = count * sizeOf(type);
    begin();
    const std::string context = "send to member " + std::to_string(sendPeer) + " and receive from member "
                                + std::to_string(recvPeer) + " on " + m_group.name;
    ncclCheck(ncclGroupStart(), context);
    ncclCheck(ncclSend(sendData, count, ncclType(type), sendPeer, m_comm, m_stream), context);
    ncclCheck(ncclRecv(recvData, count, ncclType(type), recvPeer, m_comm, m_stream), context);
    ncclCheck(ncclGroupEnd(), context);
    return finish(c);
}

}  // namespace loom::comm
