#include "engine/comm/MpiCommunicator.h"

#include "engine/comm/Agreement.h"
#include "engine/comm/CompressedAllReduce.h"
#include "engine/comm/GradientCodec.h"
#include "engine/comm/MpiTransport.h"
#include "engine/comm/RingAlgorithms.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

namespace loom::comm {

using trace::Algorithm;
using trace::EventKind;

// ---------------------------------------------------------------------------------------------------------
// Session

MpiSession::MpiSession(int* argc, char*** argv)
{
    int initialised = 0;
    MPI_Initialized(&initialised);
    int provided = MPI_THREAD_SINGLE;
    if (!initialised) {
        MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
        m_initialisedHere = true;
    } else {
        MPI_Query_thread(&provided);
    }
    if (provided < MPI_THREAD_MULTIPLE)
        throw CommError("this MPI library does not provide MPI_THREAD_MULTIPLE, which Loom's communicators need "
                        "(collectives run on their own threads); use an Open MPI built with thread support");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &m_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &m_size);
}

MpiSession::~MpiSession()
{
    int finalised = 0;
    MPI_Finalized(&finalised);
    if (m_initialisedHere && !finalised)
        MPI_Finalize();
}

// ---------------------------------------------------------------------------------------------------------
// MPI types and reduction operators (MPI has no fp16/bf16: use 16-bit words with Loom's own operators)

namespace {

template <DType T, ReduceOp O>
void userReduce(void* in, void* inout, int* len, MPI_Datatype*)
{
    reduceHost(inout, in, static_cast<std::size_t>(*len), T, O);
}

struct MpiOps {
    MPI_Op half[3];
    MPI_Op bf16[3];
};

const MpiOps& mpiOps()
{
    static MpiOps ops;
    static std::once_flag once;
    std::call_once(once, [] {
        MPI_Op_create(&userReduce<DType::F16, ReduceOp::Sum>, 1, &ops.half[0]);
        MPI_Op_create(&userReduce<DType::F16, ReduceOp::Max>, 1, &ops.half[1]);
        MPI_Op_create(&userReduce<DType::F16, ReduceOp::Min>, 1, &ops.half[2]);
        MPI_Op_create(&userReduce<DType::BF16, ReduceOp::Sum>, 1, &ops.bf16[0]);
        MPI_Op_create(&userReduce<DType::BF16, ReduceOp::Max>, 1, &ops.bf16[1]);
        MPI_Op_create(&userReduce<DType::BF16, ReduceOp::Min>, 1, &ops.bf16[2]);
    });
    return ops;
}

MPI_Datatype mpiType(DType t)
{
    return t == DType::F32 ? MPI_FLOAT : MPI_UINT16_T;
}

MPI_Op mpiOp(DType t, ReduceOp op)
{
    const int i = static_cast<int>(op);
    if (t == DType::F32)
        return op == ReduceOp::Sum ? MPI_SUM : op == ReduceOp::Max ? MPI_MAX : MPI_MIN;
    return t == DType::F16 ? mpiOps().half[i] : mpiOps().bf16[i];
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// Operations

struct MpiCommunicator::Op {
    EventKind kind = EventKind::AllReduce;
    void* data = nullptr;        // all-reduce, broadcast
    const void* send = nullptr;  // reduce-scatter, all-gather
    void* recv = nullptr;
    std::size_t count = 0;       // all-reduce/broadcast: elements; RS: per-rank result; AG: per-rank input
    DType type = DType::F32;
    ReduceOp reduce = ReduceOp::Sum;
    int root = 0;
    CollectiveOptions options;
    std::shared_ptr<PendingWork> work = std::make_shared<PendingWork>();
    std::uint64_t sequence = 0;
    Algorithm ran = Algorithm::None;
};

MpiCommunicator::MpiCommunicator(MPI_Comm comm, trace::GroupKind kind, std::string name,
                                 trace::TraceRecorder* recorder, CommConfig config, std::vector<int> nodeOfMember)
    : m_recorder(recorder), m_config(config), m_nodeOf(std::move(nodeOfMember))
{
    MPI_Comm_dup(comm, &m_collectives);
    MPI_Comm_dup(comm, &m_pointToPoint);
    MPI_Comm_set_errhandler(m_collectives, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(m_pointToPoint, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm, &m_rank);
    MPI_Comm_size(comm, &m_size);

    int worldRank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &worldRank);
    std::vector<int> members(static_cast<std::size_t>(m_size));
    MPI_Allgather(&worldRank, 1, MPI_INT, members.data(), 1, MPI_INT, comm);
    m_group.kind = kind;
    m_group.ranks.assign(members.begin(), members.end());
    m_group.name = std::move(name);
    if (m_recorder)
        m_group.id = m_recorder->addGroup(kind, m_group.ranks, m_group.name);
    if (m_nodeOf.empty())
        m_nodeOf = nodesBySharedMemory(comm);

    m_transport = std::make_unique<MpiTransport>(m_collectives, members, m_config.timeoutSeconds);
    m_worker = std::thread([this] { workerLoop(); });
}

MpiCommunicator::~MpiCommunicator()
{
    {
        std::lock_guard lock(m_mutex);
        m_stop = true;
    }
    m_cv.notify_all();
    if (m_worker.joinable())
        m_worker.join();
    if (m_brokenBy.empty()) {  // freeing after a failure could wait on the missing peer
        for (MPI_Comm* c : {&m_nodeLocal, &m_crossNode, &m_collectives, &m_pointToPoint})
            if (*c != MPI_COMM_NULL)
                MPI_Comm_free(c);
    }
}

std::string MpiCommunicator::describe(const Op& op) const
{
    std::string s = std::string(trace::toString(op.kind)) + " #" + std::to_string(op.sequence);
    if (op.kind != EventKind::Barrier) {
        s += " (" + std::to_string(op.count) + " " + std::string(toString(op.type));
        if (op.kind == EventKind::AllReduce || op.kind == EventKind::ReduceScatter || op.kind == EventKind::AllGather)
            s += ", " + std::string(toString(op.options.algorithm));
        if (op.options.codec.kind != plan::Codec::Kind::None)
            s += ", codec " + op.options.codec.toString();
        s += ")";
    }
    return s + " on " + m_group.name + " " + rankList(m_group.ranks);
}

WorkPtr MpiCommunicator::enqueue(std::shared_ptr<Op> op)
{
    WorkPtr work = op->work;
    {
        std::lock_guard lock(m_mutex);
        m_queue.push_back(std::move(op));
    }
    m_cv.notify_one();
    return work;
}

void MpiCommunicator::workerLoop()
{
    for (;;) {
        std::shared_ptr<Op> op;
        {
            std::unique_lock lock(m_mutex);
            m_cv.wait(lock, [this] { return m_stop || !m_queue.empty(); });
            if (m_queue.empty())
                return;  // stopping, and everything queued has run
            op = std::move(m_queue.front());
            m_queue.pop_front();
        }
        execute(*op);
    }
}

void MpiCommunicator::checkAgreement(const Op& op)
{
    CallSignature call{op.kind, op.type, op.reduce, static_cast<int>(op.options.algorithm),
                       static_cast<int>(op.options.codec.kind), op.root, op.count, optionsFingerprint(op.options)};
    comm::checkAgreement(m_collectives, call, m_group.ranks, m_config.timeoutSeconds, describe(op));
}

void MpiCommunicator::runLibrary(Op& op)
{
    const MPI_Datatype type = mpiType(op.type);
    const auto timeout = std::chrono::duration<double>(m_config.timeoutSeconds);
    auto finish = [&](MPI_Request& request, int rc) {
        if (rc == MPI_SUCCESS) {
            const bool done = pollUntil(
                [&] {
                    int flag = 0;
                    rc = MPI_Test(&request, &flag, MPI_STATUS_IGNORE);
                    return flag != 0 || rc != MPI_SUCCESS;
                },
                timeout);
            if (rc == MPI_SUCCESS && !done)
                throw CommError(describe(op) + " timed out after " + std::to_string(static_cast<int>(m_config.timeoutSeconds))
                                + " s in the MPI library: a member of " + rankList(m_group.ranks)
                                + " did not take part; check that it is alive (LOOM_COMM_TIMEOUT_S sets the limit)");
        }
        if (rc != MPI_SUCCESS)
            throw CommError(describe(op) + ": MPI failed: " + mpiErrorText(rc));
    };
    const std::size_t es = sizeOf(op.type);
    constexpr std::size_t kPiece = std::size_t(1) << 30;  // MPI counts are int: large buffers go in pieces
    MPI_Request request;
    switch (op.kind) {
    case EventKind::AllReduce:
    case EventKind::Broadcast: {
        std::size_t off = 0;
        do {
            char* piece = static_cast<char*>(op.data) + off * es;
            const int n = static_cast<int>(std::min(kPiece, op.count - off));
            finish(request, op.kind == EventKind::AllReduce
                                ? MPI_Iallreduce(MPI_IN_PLACE, piece, n, type, mpiOp(op.type, op.reduce), m_collectives, &request)
                                : MPI_Ibcast(piece, n, type, op.root, m_collectives, &request));
            off += kPiece;
        } while (off < op.count);
        break;
    }
    case EventKind::ReduceScatter:
    case EventKind::AllGather:
        if (op.count > static_cast<std::size_t>(INT_MAX))
            throw CommError(describe(op) + ": " + std::to_string(op.count)
                            + " elements per rank is over MPI's int limit; split the tensor");
        if (op.kind == EventKind::ReduceScatter)
            finish(request, MPI_Ireduce_scatter_block(op.send, op.recv, static_cast<int>(op.count), type,
                                                      mpiOp(op.type, op.reduce), m_collectives, &request));
        else
            finish(request, MPI_Iallgather(op.send, static_cast<int>(op.count), type, op.recv,
                                           static_cast<int>(op.count), type, m_collectives, &request));
        break;
    case EventKind::Barrier: finish(request, MPI_Ibarrier(m_collectives, &request)); break;
    default: throw CommError(describe(op) + ": not a collective");
    }
    op.ran = Algorithm::Library;
}

void MpiCommunicator::runHierarchical(Op& op)
{
    // Equal ranks on every node, else the cross-node groups would not line up: fall back to the ring.
    std::map<int, int> perNode;
    for (int node : m_nodeOf)
        ++perNode[node];
    bool even = true;
    for (auto& [node, n] : perNode)
        even = even && n == perNode.begin()->second;
    if (!even) {
        ringAllReduce(*m_transport, op.data, op.count, op.type, op.reduce, op.options.chunkBytes);
        op.ran = Algorithm::Ring;
        return;
    }
    if (m_nodeLocal == MPI_COMM_NULL) {
        MPI_Comm_split(m_collectives, m_nodeOf[static_cast<std::size_t>(m_rank)], m_rank, &m_nodeLocal);
        int local = 0;
        MPI_Comm_rank(m_nodeLocal, &local);
        MPI_Comm_split(m_collectives, local, m_rank, &m_crossNode);
        MPI_Comm_set_errhandler(m_nodeLocal, MPI_ERRORS_RETURN);
        MPI_Comm_set_errhandler(m_crossNode, MPI_ERRORS_RETURN);
    }
    auto membersOf = [&](MPI_Comm c) {
        int n = 0;
        MPI_Comm_size(c, &n);
        std::vector<int> global(static_cast<std::size_t>(n));
        int me = m_group.ranks[static_cast<std::size_t>(m_rank)];
        MPI_Allgather(&me, 1, MPI_INT, global.data(), 1, MPI_INT, c);
        return global;
    };
    MpiTransport local(m_nodeLocal, membersOf(m_nodeLocal), m_config.timeoutSeconds);
    MpiTransport cross(m_crossNode, membersOf(m_crossNode), m_config.timeoutSeconds);
    local.setContext(describe(op) + " [inside the node]");
    cross.setContext(describe(op) + " [across nodes]");
    try {
        hierarchicalAllReduce(local, cross, op.data, op.count, op.type, op.reduce, op.options.chunkBytes);
    } catch (...) {
        local.abandon();
        cross.abandon();
        throw;
    }
    op.ran = Algorithm::Hierarchical;
    m_hierarchicalBytes = local.bytesSent() + cross.bytesSent();
}

void MpiCommunicator::execute(Op& op)
{
    op.sequence = ++m_sequence;
    const std::int64_t start = trace::nowNs();
    const std::size_t es = sizeOf(op.type);
    const std::size_t n = static_cast<std::size_t>(m_size);
    WorkStats stats;
    stats.startNs = start;
    stats.bytes = op.kind == EventKind::ReduceScatter || op.kind == EventKind::AllGather ? op.count * n * es
                                                                                        : op.count * es;
    if (!m_brokenBy.empty()) {
        op.work->fail(describe(op) + ": " + m_group.name + " is unusable after an earlier failure: " + m_brokenBy, stats);
        return;
    }
    m_transport->setContext(describe(op));
    const std::uint64_t sentBefore = m_transport->bytesSent();
    m_hierarchicalBytes = 0;
    try {
        if (m_config.checkAgreement && m_size > 1)
            checkAgreement(op);
        const auto algorithm = op.options.algorithm;
        const bool compressed = op.kind == EventKind::AllReduce && op.options.codec.kind != plan::Codec::Kind::None;
        if (compressed) {
            if (op.type != DType::F32 || op.reduce != ReduceOp::Sum)
                throw CommError(describe(op) + ": gradient codecs compress fp32 sums; this call is "
                                + std::string(toString(op.type)) + " " + std::string(toString(op.reduce)));
            auto codec = makeCodec(op.options.codec, op.options.codecBlock);
            if (m_size > 1)
                op.ran = compressedAllReduce(*m_transport, static_cast<float*>(op.data), op.count, *codec,
                                             op.options.codec.kind == plan::Codec::Kind::TopK, op.options.feedback);
            else
                op.ran = Algorithm::Library;
        } else if (algorithm == CollectiveAlgorithm::Library || op.kind == EventKind::Broadcast
                   || op.kind == EventKind::Barrier) {
            runLibrary(op);
        } else {
            const std::size_t chunk = algorithm == CollectiveAlgorithm::Chunked ? std::max<std::size_t>(op.options.chunkBytes, es) : 0;
            op.ran = algorithm == CollectiveAlgorithm::Chunked ? Algorithm::ChunkedRing : Algorithm::Ring;
            switch (op.kind) {
            case EventKind::AllReduce:
                if (algorithm == CollectiveAlgorithm::Hierarchical)
                    runHierarchical(op);
                else
                    ringAllReduce(*m_transport, op.data, op.count, op.type, op.reduce, chunk);
                break;
            case EventKind::ReduceScatter: {
                if (algorithm == CollectiveAlgorithm::Hierarchical)
                    throw CommError(describe(op) + ": the hierarchical algorithm is for all-reduce; use ring or library");
                if (op.count == 0)
                    break;  // nothing to reduce (and the buffers may be null)
                char* work = static_cast<char*>(m_transport->scratch(op.count * n * es, 1));
                std::memcpy(work, op.send, op.count * n * es);
                const Segments seg = Segments::even(op.count * n, m_size);
                ringReduceScatterInPlace(*m_transport, work, seg, op.type, op.reduce, chunk);
                std::memcpy(op.recv, work + seg.offset[static_cast<std::size_t>(m_rank)] * es, op.count * es);
                break;
            }
            case EventKind::AllGather: {
                if (algorithm == CollectiveAlgorithm::Hierarchical)
                    throw CommError(describe(op) + ": the hierarchical algorithm is for all-reduce; use ring or library");
                if (op.count == 0)
                    break;
                const Segments seg = Segments::even(op.count * n, m_size);
                std::memmove(static_cast<char*>(op.recv) + seg.offset[static_cast<std::size_t>(m_rank)] * es, op.send,
                             op.count * es);
                ringAllGatherInPlace(*m_transport, op.recv, seg, op.type, chunk);
                break;
            }
            default: runLibrary(op);
            }
        }
    } catch (const std::exception& e) {
        // CommError, or anything else (out of memory for scratch buffers): the Work fails, the process lives.
        const std::string message = dynamic_cast<const CommError*>(&e) ? std::string(e.what())
                                                                        : describe(op) + ": " + e.what();
        m_brokenBy = message;
        m_transport->abandon();
        stats.endNs = trace::nowNs();
        op.work->fail(message, stats);
        return;
    }

    stats.endNs = trace::nowNs();
    stats.algorithm = op.ran;
    if (op.ran == Algorithm::Library) {
        // What the library sends is its own business; report the standard algorithm's traffic (nccl-tests'
        // bus-bandwidth factors): 2(n-1)/n for all-reduce, (n-1)/n for reduce-scatter and all-gather.
        const double f = op.kind == EventKind::AllReduce                                       ? 2.0 * double(n - 1) / double(n)
                         : op.kind == EventKind::ReduceScatter || op.kind == EventKind::AllGather ? double(n - 1) / double(n)
                         : op.kind == EventKind::Broadcast                                       ? (m_rank == op.root ? 1.0 : 0.0)
                                                                                                 : 0.0;
        stats.wireBytes = static_cast<std::uint64_t>(f * double(stats.bytes));
    } else {
        stats.wireBytes = m_transport->bytesSent() - sentBefore + m_hierarchicalBytes;
    }
    if (m_recorder) {
        trace::TraceEvent e;
        e.kind = op.kind;
        e.startNs = stats.startNs;
        e.endNs = stats.endNs;
        e.bytes = stats.bytes;
        e.wireBytes = stats.wireBytes;
        e.group = m_group.id;
    e.groupSize = m_size;
        e.groupSize = m_size;
        e.peer = op.kind == EventKind::Broadcast ? m_group.ranks[static_cast<std::size_t>(op.root)] : -1;
        e.algorithm = op.ran;
        if (op.options.codec.kind != plan::Codec::Kind::None)
            e.codec = op.options.codec.toString();
        m_recorder->record(std::move(e));
    }
    op.work->complete(stats);
}

WorkPtr MpiCommunicator::allReduce(void* data, std::size_t count, DType type, ReduceOp reduce,
                                   const CollectiveOptions& options)
{
    auto op = std::make_shared<Op>();
    op->kind = EventKind::AllReduce;
    op->data = data;
    op->count = count;
    op->type = type;
    op->reduce = reduce;
    op->options = options;
    return enqueue(std::move(op));
}

WorkPtr MpiCommunicator::reduceScatter(const void* send, void* recv, std::size_t recvCount, DType type,
                                       ReduceOp reduce, const CollectiveOptions& options)
{
    auto op = std::make_shared<Op>();
    op->kind = EventKind::ReduceScatter;
    op->send = send;
    op->recv = recv;
    op->count = recvCount;
    op->type = type;
    op->reduce = reduce;
    op->options = options;
    op->options.codec = {};
    return enqueue(std::move(op));
}

WorkPtr MpiCommunicator::allGather(const void* send, void* recv, std::size_t sendCount, DType type,
                                   const CollectiveOptions& options)
{
    auto op = std::make_shared<Op>();
    op->kind = EventKind::AllGather;
    op->send = send;
    op->recv = recv;
    op->count = sendCount;
    op->type = type;
    op->options = options;
    op->options.codec = {};
    return enqueue(std::move(op));
}

WorkPtr MpiCommunicator::broadcast(void* data, std::size_t count, DType type, int root)
{
    if (root < 0 || root >= m_size)
        throw CommError("broadcast on " + m_group.name + ": root " + std::to_string(root) + " is not a member (0 to "
                        + std::to_string(m_size - 1) + ")");
    auto op = std::make_shared<Op>();
    op->kind = EventKind::Broadcast;
    op->data = data;
    op->count = count;
    op->type = type;
    op->root = root;
    return enqueue(std::move(op));
}

WorkPtr MpiCommunicator::barrier()
{
    auto op = std::make_shared<Op>();
    op->kind = EventKind::Barrier;
    return enqueue(std::move(op));
}

// ---------------------------------------------------------------------------------------------------------
// Point-to-point: posted at once from the caller's thread, completed by polling in wait()

namespace {

class RequestWork final : public Work {
public:
    RequestWork(MPI_Request request, std::string context, double timeoutSeconds, bool isSend,
                trace::TraceRecorder* recorder, trace::TraceEvent event)
        : m_request(request), m_context(std::move(context)), m_timeout(timeoutSeconds), m_isSend(isSend),
          m_recorder(recorder), m_event(std::move(event))
    {
        m_stats.bytes = m_event.bytes;
        m_stats.wireBytes = m_event.wireBytes;
        m_stats.startNs = m_event.startNs;
    }
    ~RequestWork() override
    {
        if (!m_done && m_request != MPI_REQUEST_NULL) {
            // Abandoned unfinished: a receive is cancelled; a send is left to MPI to finish.
            if (!m_isSend)
                MPI_Cancel(&m_request);
            MPI_Request_free(&m_request);
        }
    }
    bool isCompleted() override
    {
        std::lock_guard lock(m_mutex);
        if (!m_done)
            test();
        return m_done;
    }
    void wait() override
    {
        std::lock_guard lock(m_mutex);
        if (!m_done) {
            const bool finished = pollUntil([this] { return test(); }, std::chrono::duration<double>(m_timeout));
            if (!finished) {
                m_error = m_context + " timed out after " + std::to_string(static_cast<int>(m_timeout))
                          + " s; check that the peer is alive and posted the matching "
                          + (m_isSend ? "receive" : "send") + " (LOOM_COMM_TIMEOUT_S sets the limit)";
                m_done = true;
                // Withdraw the request so a late message cannot land in a buffer the caller has moved on from.
                MPI_Cancel(&m_request);
                MPI_Request_free(&m_request);
            }
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
    bool test()
    {
        int flag = 0;
        MPI_Status status;
        const int rc = MPI_Test(&m_request, &flag, &status);
        if (rc != MPI_SUCCESS) {
            m_error = m_context + ": MPI failed: " + mpiErrorText(rc);
            m_done = true;
            return true;
        }
        if (!flag)
            return false;
        m_done = true;
        if (!m_isSend) {
            int received = 0;
            MPI_Get_count(&status, MPI_BYTE, &received);
            if (static_cast<std::uint64_t>(received) != m_event.bytes)
                m_error = m_context + ": the peer sent " + std::to_string(received) + " bytes where "
                          + std::to_string(m_event.bytes) + " were expected";
        }
        m_stats.endNs = trace::nowNs();
        if (m_recorder && !m_error) {
            m_event.endNs = m_stats.endNs;
            m_recorder->record(m_event);
        }
        return true;
    }

    std::mutex m_mutex;
    MPI_Request m_request;
    std::string m_context;
    double m_timeout;
    bool m_isSend;
    trace::TraceRecorder* m_recorder;
    trace::TraceEvent m_event;
    bool m_done = false;
    std::optional<std::string> m_error;
    WorkStats m_stats;
};

}  // namespace

WorkPtr MpiCommunicator::pointToPoint(bool isSend, void* data, std::size_t count, DType type, int peer, int tag)
{
    const std::size_t bytes = count * sizeOf(type);
    if (peer < 0 || peer >= m_size)
        throw CommError(std::string(isSend ? "send" : "receive") + " on " + m_group.name + ": peer " + std::to_string(peer)
                        + " is not a member (0 to " + std::to_string(m_size - 1) + ")");
    const int globalPeer = m_group.ranks[static_cast<std::size_t>(peer)];
    const std::string context = std::string(isSend ? "send of " : "receive of ") + std::to_string(bytes) + " bytes "
                                + (isSend ? "to" : "from") + " rank " + std::to_string(globalPeer) + " on " + m_group.name
                                + " " + rankList(m_group.ranks);
    if (bytes > static_cast<std::size_t>(INT_MAX))
        throw CommError(context + ": over MPI's 2 GiB message limit; send it in parts");
    MPI_Request request;
    if (tag < 0 || tag > 32767)
        throw CommError(context + ": tag " + std::to_string(tag) + " is outside 0 to 32767");
    const int rc = isSend ? MPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, peer, tag, m_pointToPoint, &request)
                          : MPI_Irecv(data, static_cast<int>(bytes), MPI_BYTE, peer, tag, m_pointToPoint, &request);
    if (rc != MPI_SUCCESS)
        throw CommError(context + ": MPI failed: " + mpiErrorText(rc));
    trace::TraceEvent e;
    e.kind = isSend ? EventKind::Send : EventKind::Recv;
    e.startNs = trace::nowNs();
    e.bytes = bytes;
    e.wireBytes = isSend ? bytes : 0;
    e.group = m_group.id;
    e.groupSize = m_size;
    e.peer = globalPeer;
    return std::make_shared<RequestWork>(request, context, m_config.timeoutSeconds, isSend, m_recorder, std::move(e));
}

WorkPtr MpiCommunicator::send(const void* data, std::size_t count, DType type, int peer, int tag)
{
    return pointToPoint(true, const_cast<void*>(data), count, type, peer, tag);
}

WorkPtr MpiCommunicator::recv(void* data, std::size_t count, DType type, int peer, int tag)
{
    return pointToPoint(false, data, count, type, peer, tag);
}

WorkPtr MpiCommunicator::sendRecv(const void* sendData, int sendPeer, void* recvData, int recvPeer, std::size_t count,
                                  DType type, int tag)
{
    auto r = recv(recvData, count, type, recvPeer, tag);
    auto s = send(sendData, count, type, sendPeer, tag);
    return allOf({s, r});
}

// ---------------------------------------------------------------------------------------------------------

GridCommunicators makeGridCommunicators(const plan::RankGrid& grid, trace::TraceRecorder* recorder, CommConfig config)
{
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != grid.size())
        throw CommError("the layout has " + std::to_string(grid.size()) + " ranks (tp·pp·dp) but mpirun started "
                        + std::to_string(size) + "; start it with -np " + std::to_string(grid.size()));
    const plan::RankCoord me = grid.coordOf(rank);
    auto nodesOf = [&](plan::GroupKind kind) {
        std::vector<int> nodes;
        for (auto member : grid.groupOf(kind, rank))
            nodes.push_back(static_cast<int>(grid.nodeOf(member)));
        return nodes;
    };
    auto make = [&](plan::GroupKind kind, trace::GroupKind traceKind, std::int64_t key, std::string name) {
        const auto members = grid.groupOf(kind, rank);
        MPI_Comm split;
        MPI_Comm_split(MPI_COMM_WORLD, static_cast<int>(members.front()), static_cast<int>(key), &split);
        auto c = std::make_unique<MpiCommunicator>(split, traceKind, std::move(name), recorder, config, nodesOf(kind));
        MPI_Comm_free(&split);
        return c;
    };
    GridCommunicators out;
    std::vector<int> worldNodes;
    for (std::int64_t r = 0; r < grid.size(); ++r)
        worldNodes.push_back(static_cast<int>(grid.nodeOf(r)));
    out.world = std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, trace::GroupKind::World, "world", recorder, config,
                                                  worldNodes);
    out.tensor = make(plan::GroupKind::Tensor, trace::GroupKind::Tensor, me.tp,
                      "TP group of pp=" + std::to_string(me.pp) + " dp=" + std::to_string(me.dp));
    out.pipeline = make(plan::GroupKind::Pipeline, trace::GroupKind::Pipeline, me.pp,
                        "PP group of tp=" + std::to_string(me.tp) + " dp=" + std::to_string(me.dp));
    out.data = make(plan::GroupKind::Data, trace::GroupKind::Data, me.dp,
                    "DP group of tp=" + std::to_string(me.tp) + " pp=" + std::to_string(me.pp));
    return out;
}

std::string_view toString(CollectiveAlgorithm algorithm)
{
    switch (algorithm) {
    case CollectiveAlgorithm::Library: return "library";
    case CollectiveAlgorithm::Ring: return "ring";
    case CollectiveAlgorithm::Chunked: return "chunked";
    case CollectiveAlgorithm::Hierarchical: return "hierarchical";
    }
    return "library";
}

std::optional<CollectiveAlgorithm> collectiveAlgorithmFromString(std::string_view text)
{
    for (auto a : {CollectiveAlgorithm::Library, CollectiveAlgorithm::Ring, CollectiveAlgorithm::Chunked,
                   CollectiveAlgorithm::Hierarchical})
        if (toString(a) == text)
            return a;
    return std::nullopt;
}

}  // namespace loom::comm
