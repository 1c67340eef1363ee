#include "engine/comm/HostCommunicator.h"

#include "engine/comm/Agreement.h"
#include "engine/comm/CollectiveCalls.h"
#include "engine/comm/FlightRecorder.h"
#include "engine/plan/AllreduceChoice.h"

#include <algorithm>
#include <cstdio>
#include <functional>

namespace loom::comm {

using trace::EventKind;

HostCommunicator::HostCommunicator(
    int rank, trace::GroupInfo group, trace::TraceRecorder* recorder, CommConfig config, std::vector<int> nodeOfMember)
    : m_rank(rank)
    , m_group(std::move(group))
    , m_recorder(recorder)
    , m_config(config)
    , m_nodeOf(std::move(nodeOfMember))
{
    if (m_recorder)
        m_group.id = m_recorder->addGroup(m_group.kind, m_group.ranks, m_group.name);
    if (m_nodeOf.size() != m_group.ranks.size())
        m_nodeOf.assign(m_group.ranks.size(), 0);
}

HostCommunicator::~HostCommunicator()
{
    stopWorker();
}

void HostCommunicator::startWorker()
{
    m_worker = std::thread([this] { workerLoop(); });
}

void HostCommunicator::stopWorker()
{
    {
        std::lock_guard lock(m_mutex);
        m_stop = true;
    }
    m_cv.notify_all();
    if (m_worker.joinable())
        m_worker.join();
}

WorkPtr HostCommunicator::enqueue(CollectiveCall call)
{
    auto item = std::make_shared<Item>();
    item->call = std::move(call);
    WorkPtr work = item->work;
    {
        std::lock_guard lock(m_mutex);
        item->call.sequence = ++m_sequence;
        m_queue.push_back(std::move(item));
    }
    m_cv.notify_one();
    return work;
}

void HostCommunicator::workerLoop()
{
    for (;;) {
        std::shared_ptr<Item> item;
        {
            std::unique_lock lock(m_mutex);
            m_cv.wait(lock, [this] { return m_stop || !m_queue.empty(); });
            if (m_queue.empty())
                return; // stopping, and everything queued has run
            item = std::move(m_queue.front());
            m_queue.pop_front();
        }
        execute(*item);
    }
}

void HostCommunicator::execute(Item& item)
{
    const CollectiveCall& call = item.call;
    WorkStats stats;
    stats.startNs = trace::nowNs();
    stats.bytes = logicalBytes(call, size());
    if (!m_brokenBy.empty()) {
        item.work->fail(
            describe(call, m_group) + ": " + m_group.name + " is unusable after an earlier failure: " + m_brokenBy,
            stats);
        return;
    }
    // In the flight record until it ends: a hung run's ranks say which collective they wait in.
    const std::uint64_t ticket
        = FlightRecorder::instance().start(trace::toString(call.kind), m_group.name, call.sequence, stats.bytes);
    try {
        const CollectiveOutcome out = runCollective(*this, call, m_group, m_rank, size(), m_nodeOf, m_config);
        FlightRecorder::instance().finish(ticket, true);
        stats.algorithm = out.algorithm;
        stats.wireBytes = out.wireBytes;
    } catch (const std::exception& e) {
        // CommError, or anything else (out of memory for scratch buffers): the Work fails, the process lives.
        const std::string message
            = dynamic_cast<const CommError*>(&e) ? std::string(e.what()) : describe(call, m_group) + ": " + e.what();
        m_brokenBy = message;
        FlightRecorder::instance().finish(ticket, false);
        transport().abandon();
        stats.endNs = trace::nowNs();
        item.work->fail(message, stats);
        return;
    }
    stats.endNs = trace::nowNs();
    if (recorder())
        recorder()->record(collectiveEvent(call, m_group, stats));
    item.work->complete(stats);
}

WorkPtr HostCommunicator::allReduce(
    void* data, std::size_t count, DType type, ReduceOp op, const CollectiveOptions& options)
{
    return enqueue(allReduceCall(data, count, type, op, options));
}

WorkPtr HostCommunicator::reduceScatter(
    const void* send, void* recv, std::size_t recvCount, DType type, ReduceOp op, const CollectiveOptions& options)
{
    return enqueue(reduceScatterCall(send, recv, recvCount, type, op, options));
}

WorkPtr HostCommunicator::allGather(
    const void* send, void* recv, std::size_t sendCount, DType type, const CollectiveOptions& options)
{
    return enqueue(allGatherCall(send, recv, sendCount, type, options));
}

WorkPtr HostCommunicator::broadcast(void* data, std::size_t count, DType type, int root)
{
    return enqueue(broadcastCall(data, count, type, root, size(), m_group.name));
}

WorkPtr HostCommunicator::barrier()
{
    return enqueue(barrierCall());
}

WorkPtr HostCommunicator::allToAll(
    const void* send, void* recv, std::size_t count, DType type, const CollectiveOptions& options)
{
    return enqueue(allToAllCall(send, recv, count, type, options));
}

WorkPtr HostCommunicator::allToAllV(const void* send, const std::vector<std::size_t>& sendCounts, void* recv,
    const std::vector<std::size_t>& recvCounts, DType type, const CollectiveOptions& options)
{
    return enqueue(allToAllVCall(send, sendCounts, recv, recvCounts, type, options, size(), m_group.name));
}

WorkPtr HostCommunicator::sendRecv(
    const void* sendData, int sendPeer, void* recvData, int recvPeer, std::size_t count, DType type, int tag)
{
    auto r = recv(recvData, count, type, recvPeer, tag);
    auto s = send(sendData, count, type, sendPeer, tag);
    return allOf({ s, r });
}

std::string HostCommunicator::describePointToPoint(bool isSend, std::size_t bytes, int peer, int tag) const
{
    if (peer < 0 || peer >= size())
        throw CommError(std::string(isSend ? "send" : "receive") + " on " + m_group.name + ": peer "
            + std::to_string(peer) + " is not a member (0 to " + std::to_string(size() - 1) + ")");
    const int globalPeer = m_group.ranks[static_cast<std::size_t>(peer)];
    const std::string context = std::string(isSend ? "send of " : "receive of ") + std::to_string(bytes) + " bytes "
        + (isSend ? "to" : "from") + " rank " + std::to_string(globalPeer) + " on " + m_group.name + " "
        + rankList(m_group.ranks);
    if (tag < 0 || tag > 32767)
        throw CommError(context + ": tag " + std::to_string(tag) + " is outside 0 to 32767");
    return context;
}

trace::TraceEvent HostCommunicator::pointToPointEvent(bool isSend, std::size_t bytes, int peer) const
{
    trace::TraceEvent e;
    e.kind = isSend ? EventKind::Send : EventKind::Recv;
    e.startNs = trace::nowNs();
    e.bytes = bytes;
    e.wireBytes = isSend ? bytes : 0;
    e.group = m_group.id;
    e.groupSize = size();
    e.peer = m_group.ranks[static_cast<std::size_t>(peer)];
    return e;
}

std::uint64_t HostCommunicator::flightRecord(bool isSend, std::size_t bytes, int peer) const
{
    return FlightRecorder::instance().startPointToPoint(
        isSend, m_group.ranks[static_cast<std::size_t>(peer)], m_group.name, bytes);
}

SharedArena* HostCommunicator::sharedArena()
{
    if (!m_arenaTried && size() > 1) {
        m_arenaTried = true;
        // Two banks of one slot per member, 32 MiB of /dev/shm in all: 8 MiB slots for 2 members, 4 MiB for 4
        // (the size the cost model prices the pieces at).
        const std::size_t slot = plan::sharedMemorySlotBytes(size());
        std::string why;
        m_arena = SharedArena::create(transport(), slot, why);
        if (!m_arena) // a warning, not an error: the ring gives the same sums (the trace says "ring")
            std::fprintf(stderr,
                "loom: rank %d: the shared-memory all-reduce of %s cannot be used (%s); it runs the ring\n",
                m_group.ranks[static_cast<std::size_t>(m_rank)], m_group.name.c_str(), why.c_str());
    }
    return m_arena.get();
}

std::shared_ptr<void> HostCommunicator::sharedMemory(std::size_t bytes, std::string& why)
{
    if (size() < 2 || std::adjacent_find(m_nodeOf.begin(), m_nodeOf.end(), std::not_equal_to<>()) != m_nodeOf.end()) {
        why = size() < 2 ? "the group has one member" : kMembersOnSeveralNodes;
        return nullptr;
    }
    // Every collective queued before this one has run once the barrier completes, and the caller queues no
    // other: until this returns, the transport is this thread's.
    barrier()->wait();
    return mapSharedMemory(transport(), bytes, why);
}

} // namespace loom::comm
