#include "engine/comm/MpiCommunicator.h"

#include "engine/comm/Agreement.h"
#include "engine/comm/FlightRecorder.h"
#include "engine/comm/GridGroups.h"

#include <algorithm>
#include <climits>
#include <mutex>

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

void MpiSession::abortJob(int code)
{
    MPI_Abort(MPI_COMM_WORLD, code);
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

template <DType T, ReduceOp O> void userReduce(void* in, void* inout, int* len, MPI_Datatype*)
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
    switch (t) {
    case DType::F32:
        return MPI_FLOAT;
    case DType::F64:
        return MPI_DOUBLE;
    case DType::I64:
        return MPI_INT64_T;
    case DType::U8:
        return MPI_UINT8_T;
    default:
        return MPI_UINT16_T;
    }
}

MPI_Op mpiOp(DType t, ReduceOp op)
{
    const int i = static_cast<int>(op);
    if (t == DType::F16)
        return mpiOps().half[i];
    if (t == DType::BF16)
        return mpiOps().bf16[i];
    return op == ReduceOp::Sum ? MPI_SUM : op == ReduceOp::Max ? MPI_MAX : MPI_MIN;
}

} // namespace

// ---------------------------------------------------------------------------------------------------------
// The communicator

struct MpiCommunicator::Setup {
    MPI_Comm comm;
    int rank = 0;
    trace::GroupInfo group;
    std::vector<int> nodeOf;
};

namespace {

// The members' global ranks and (when not given) their nodes, collectively over `comm`.
trace::GroupInfo groupOf(MPI_Comm comm, trace::GroupKind kind, std::string name)
{
    int size = 1, worldRank = 0;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &worldRank);
    std::vector<int> members(static_cast<std::size_t>(size));
    MPI_Allgather(&worldRank, 1, MPI_INT, members.data(), 1, MPI_INT, comm);
    trace::GroupInfo g;
    g.kind = kind;
    g.ranks.assign(members.begin(), members.end());
    g.name = std::move(name);
    return g;
}

} // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, trace::GroupKind kind, std::string name, trace::TraceRecorder* recorder,
    CommConfig config, std::vector<int> nodeOfMember)
    : MpiCommunicator(
        [&] {
            Setup s { comm, 0, groupOf(comm, kind, std::move(name)), std::move(nodeOfMember) };
            MPI_Comm_rank(comm, &s.rank);
            if (s.nodeOf.empty())
                s.nodeOf = nodesBySharedMemory(comm);
            return s;
        }(),
        recorder, config)
{
}

MpiCommunicator::MpiCommunicator(Setup setup, trace::TraceRecorder* recorder, CommConfig config)
    : HostCommunicator(setup.rank, std::move(setup.group), recorder, config, std::move(setup.nodeOf))
{
    MPI_Comm_dup(setup.comm, &m_collectives);
    MPI_Comm_dup(setup.comm, &m_pointToPoint);
    MPI_Comm_set_errhandler(m_collectives, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(m_pointToPoint, MPI_ERRORS_RETURN);
    m_transport = std::make_unique<MpiTransport>(
        m_collectives, std::vector<int>(group().ranks.begin(), group().ranks.end()), config.timeoutSeconds);
    startWorker();
}

MpiCommunicator::~MpiCommunicator()
{
    stopWorker();
    m_localTransport.reset();
    m_crossTransport.reset();
    m_transport.reset();
    if (!failed()) { // freeing after a failure could wait on the missing peer
        for (MPI_Comm* c : { &m_nodeLocal, &m_crossNode, &m_collectives, &m_pointToPoint })
            if (*c != MPI_COMM_NULL)
                MPI_Comm_free(c);
    }
}

void MpiCommunicator::runLibrary(const CollectiveCall& op, const std::string& context)
{
    const MPI_Datatype type = mpiType(op.type);
    const double timeoutSeconds = config().timeoutSeconds;
    auto finish = [&](MPI_Request& request, int rc) {
        if (rc == MPI_SUCCESS) {
            const bool done = pollUntil(
                [&] {
                    int flag = 0;
                    rc = MPI_Test(&request, &flag, MPI_STATUS_IGNORE);
                    return flag != 0 || rc != MPI_SUCCESS;
                },
                std::chrono::duration<double>(timeoutSeconds));
            if (rc == MPI_SUCCESS && !done)
                throw CommError(context + " timed out after " + std::to_string(static_cast<int>(timeoutSeconds))
                    + " s in the MPI library: a member of " + rankList(group().ranks)
                    + " did not take part; check that it is alive (LOOM_COMM_TIMEOUT_S sets the limit)");
        }
        if (rc != MPI_SUCCESS)
            throw CommError(context + ": MPI failed: " + mpiErrorText(rc));
    };
    const std::size_t es = sizeOf(op.type);
    constexpr std::size_t kPiece = std::size_t(1) << 30; // MPI counts are int: large buffers go in pieces
    MPI_Request request;
    switch (op.kind) {
    case trace::EventKind::AllReduce:
    case trace::EventKind::Broadcast: {
        std::size_t off = 0;
        do {
            char* piece = static_cast<char*>(op.data) + off * es;
            const int n = static_cast<int>(std::min(kPiece, op.count - off));
            finish(request,
                op.kind == trace::EventKind::AllReduce
                    ? MPI_Iallreduce(MPI_IN_PLACE, piece, n, type, mpiOp(op.type, op.op), m_collectives, &request)
                    : MPI_Ibcast(piece, n, type, op.root, m_collectives, &request));
            off += kPiece;
        } while (off < op.count);
        break;
    }
    case trace::EventKind::ReduceScatter:
    case trace::EventKind::AllGather:
        if (op.count > static_cast<std::size_t>(INT_MAX))
            throw CommError(context + ": " + std::to_string(op.count)
                + " elements per rank is over MPI's int limit; split the tensor");
        if (op.kind == trace::EventKind::ReduceScatter)
            finish(request,
                MPI_Ireduce_scatter_block(op.send, op.recv, static_cast<int>(op.count), type, mpiOp(op.type, op.op),
                    m_collectives, &request));
        else
            finish(request,
                MPI_Iallgather(op.send, static_cast<int>(op.count), type, op.recv, static_cast<int>(op.count), type,
                    m_collectives, &request));
        break;
    case trace::EventKind::Barrier:
        finish(request, MPI_Ibarrier(m_collectives, &request));
        break;
    case trace::EventKind::AllToAll: {
        const int n = size();
        if (op.sendCounts.empty()) {
            if (op.count > static_cast<std::size_t>(INT_MAX))
                throw CommError(context + ": " + std::to_string(op.count)
                    + " elements per rank is over MPI's int limit; split the tensor");
            const int c = static_cast<int>(op.count);
            finish(request, MPI_Ialltoall(op.send, c, type, op.recv, c, type, m_collectives, &request));
            break;
        }
        // Counts and displacements in elements; MPI's are int.
        std::vector<int> sc(static_cast<std::size_t>(n)), sd(sc.size()), rc(sc.size()), rd(sc.size());
        std::size_t sendOff = 0, recvOff = 0;
        for (std::size_t j = 0; j < sc.size(); ++j) {
            if (sendOff + op.sendCounts[j] > static_cast<std::size_t>(INT_MAX)
                || recvOff + op.recvCounts[j] > static_cast<std::size_t>(INT_MAX))
                throw CommError(context + ": over MPI's int limit of elements; split the exchange");
            sc[j] = static_cast<int>(op.sendCounts[j]);
            sd[j] = static_cast<int>(sendOff);
            rc[j] = static_cast<int>(op.recvCounts[j]);
            rd[j] = static_cast<int>(recvOff);
            sendOff += op.sendCounts[j];
            recvOff += op.recvCounts[j];
        }
        finish(request,
            MPI_Ialltoallv(
                op.send, sc.data(), sd.data(), type, op.recv, rc.data(), rd.data(), type, m_collectives, &request));
        break;
    }
    default:
        throw CommError(context + ": not a collective");
    }
}

std::pair<Transport*, Transport*> MpiCommunicator::hierarchy()
{
    if (!m_localTransport) {
        MPI_Comm_split(m_collectives, nodeOfMember()[static_cast<std::size_t>(rank())], rank(), &m_nodeLocal);
        int local = 0;
        MPI_Comm_rank(m_nodeLocal, &local);
        MPI_Comm_split(m_collectives, local, rank(), &m_crossNode);
        MPI_Comm_set_errhandler(m_nodeLocal, MPI_ERRORS_RETURN);
        MPI_Comm_set_errhandler(m_crossNode, MPI_ERRORS_RETURN);
        auto membersOf = [&](MPI_Comm c) {
            int n = 0;
            MPI_Comm_size(c, &n);
            std::vector<int> global(static_cast<std::size_t>(n));
            int me = group().ranks[static_cast<std::size_t>(rank())];
            MPI_Allgather(&me, 1, MPI_INT, global.data(), 1, MPI_INT, c);
            return global;
        };
        m_localTransport = std::make_unique<MpiTransport>(m_nodeLocal, membersOf(m_nodeLocal), config().timeoutSeconds);
        m_crossTransport = std::make_unique<MpiTransport>(m_crossNode, membersOf(m_crossNode), config().timeoutSeconds);
    }
    return { m_localTransport.get(), m_crossTransport.get() };
}

// ---------------------------------------------------------------------------------------------------------
// Point-to-point: posted at once from the caller's thread, completed by polling in wait()

namespace {

class RequestWork final : public GuardedWork {
public:
    RequestWork(MPI_Request request, std::string context, double timeoutSeconds, bool isSend,
        trace::TraceRecorder* recorder, trace::TraceEvent event, std::uint64_t flight)
        : m_request(request)
        , m_context(std::move(context))
        , m_timeout(timeoutSeconds)
        , m_isSend(isSend)
        , m_recorder(recorder)
        , m_event(std::move(event))
        , m_flight(flight)
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
                    + " s; check that the peer is alive and posted the matching " + (m_isSend ? "receive" : "send")
                    + " (LOOM_COMM_TIMEOUT_S sets the limit)";
                m_done = true;
                FlightRecorder::instance().finish(m_flight, false);
                // Withdraw the request so a late message cannot land in a buffer the caller has moved on from.
                MPI_Cancel(&m_request);
                MPI_Request_free(&m_request);
            }
        }
        if (m_error)
            throw CommError(*m_error);
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
            FlightRecorder::instance().finish(m_flight, false);
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
        FlightRecorder::instance().finish(m_flight, !m_error);
        if (m_recorder && !m_error) {
            m_event.endNs = m_stats.endNs;
            m_recorder->record(m_event);
        }
        return true;
    }

    MPI_Request m_request;
    std::string m_context;
    double m_timeout;
    bool m_isSend;
    trace::TraceRecorder* m_recorder;
    trace::TraceEvent m_event;
    std::uint64_t m_flight; // its FlightRecorder ticket
    bool m_done = false;
};

} // namespace

WorkPtr MpiCommunicator::pointToPoint(bool isSend, void* data, std::size_t count, DType type, int peer, int tag)
{
    const std::size_t bytes = count * sizeOf(type);
    const std::string context = describePointToPoint(isSend, bytes, peer, tag);
    if (bytes > static_cast<std::size_t>(INT_MAX))
        throw CommError(context + ": over MPI's 2 GiB message limit; send it in parts");
    MPI_Request request;
    const int rc = isSend ? MPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, peer, tag, m_pointToPoint, &request)
                          : MPI_Irecv(data, static_cast<int>(bytes), MPI_BYTE, peer, tag, m_pointToPoint, &request);
    if (rc != MPI_SUCCESS)
        throw CommError(context + ": MPI failed: " + mpiErrorText(rc));
    return std::make_shared<RequestWork>(request, context, config().timeoutSeconds, isSend, recorder(),
        pointToPointEvent(isSend, bytes, peer), flightRecord(isSend, bytes, peer));
}

WorkPtr MpiCommunicator::send(const void* data, std::size_t count, DType type, int peer, int tag)
{
    return pointToPoint(true, const_cast<void*>(data), count, type, peer, tag);
}

WorkPtr MpiCommunicator::recv(void* data, std::size_t count, DType type, int peer, int tag)
{
    return pointToPoint(false, data, count, type, peer, tag);
}

// ---------------------------------------------------------------------------------------------------------

std::unique_ptr<Communicator> makeMpiWorldCommunicator(
    trace::TraceRecorder* recorder, CommConfig config, std::vector<int> nodeOfRank)
{
    return std::make_unique<MpiCommunicator>(
        MPI_COMM_WORLD, trace::GroupKind::World, "world", recorder, config, std::move(nodeOfRank));
}

GridCommunicators makeMpiGridCommunicators(
    const plan::RankGrid& grid, trace::TraceRecorder* recorder, CommConfig config)
{
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != grid.size())
        throw CommError("the layout has " + std::to_string(grid.size()) + " ranks (tp·cp·pp·dp) but mpirun started "
            + std::to_string(size) + "; start it with -np " + std::to_string(grid.size()));
    const plan::RankCoord me = grid.coordOf(rank);
    auto make = [&](plan::GroupKind kind, std::int64_t key) {
        const auto members = gridCommMembers(grid, kind, rank);
        MPI_Comm split;
        MPI_Comm_split(MPI_COMM_WORLD, static_cast<int>(members.front()), static_cast<int>(key), &split);
        std::unique_ptr<Communicator> c = std::make_unique<MpiCommunicator>(
            split, kind, gridGroupName(grid, kind, rank), recorder, config, gridGroupNodes(grid, kind, rank));
        MPI_Comm_free(&split);
        return c;
    };
    GridCommunicators out;
    auto world = std::make_unique<MpiCommunicator>(
        MPI_COMM_WORLD, trace::GroupKind::World, "world", recorder, config, gridWorldNodes(grid));
    world->muteEvents();
    out.world = std::move(world);
    out.tensor = make(plan::GroupKind::Tensor, me.tp);
    out.pipeline = make(plan::GroupKind::Pipeline, me.pp);
    out.data = make(plan::GroupKind::Data, me.dp * grid.cp() + me.cp);
    out.context = make(plan::GroupKind::Context, me.cp);
    return out;
}

std::unique_ptr<Communicator> makeMpiGroupCommunicator(const std::vector<std::int64_t>& members, trace::GroupKind kind,
    const std::string& name, trace::TraceRecorder* recorder, CommConfig config, std::vector<int> nodeOfMember)
{
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int key = 0;
    for (std::size_t i = 0; i < members.size(); ++i)
        if (members[i] == rank)
            key = static_cast<int>(i);
    MPI_Comm split;
    MPI_Comm_split(MPI_COMM_WORLD, static_cast<int>(members.front()), key, &split);
    auto c = std::make_unique<MpiCommunicator>(split, kind, name, recorder, config, std::move(nodeOfMember));
    MPI_Comm_free(&split);
    return c;
}

} // namespace loom::comm
