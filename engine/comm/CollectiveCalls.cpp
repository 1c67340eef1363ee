#include "engine/comm/CollectiveCalls.h"

#include "engine/comm/CommError.h"

namespace loom::comm {

using trace::EventKind;

CollectiveCall allReduceCall(void* data, std::size_t count, DType type, ReduceOp op, const CollectiveOptions& options)
{
    CollectiveCall c;
    c.kind = EventKind::AllReduce;
    c.data = data;
    c.count = count;
    c.type = type;
    c.op = op;
    c.options = options;
    return c;
}

CollectiveCall reduceScatterCall(
    const void* send, void* recv, std::size_t recvCount, DType type, ReduceOp op, const CollectiveOptions& options)
{
    CollectiveCall c = allGatherCall(send, recv, recvCount, type, options);
    c.kind = EventKind::ReduceScatter;
    c.op = op;
    return c;
}

CollectiveCall allGatherCall(
    const void* send, void* recv, std::size_t sendCount, DType type, const CollectiveOptions& options)
{
    CollectiveCall c;
    c.kind = EventKind::AllGather;
    c.send = send;
    c.recv = recv;
    c.count = sendCount;
    c.type = type;
    c.options = options;
    c.options.codec = {};
    return c;
}

CollectiveCall broadcastCall(
    void* data, std::size_t count, DType type, int root, int size, const std::string& groupName)
{
    if (root < 0 || root >= size)
        throw CommError("broadcast on " + groupName + ": root " + std::to_string(root) + " is not a member (0 to "
            + std::to_string(size - 1) + ")");
    CollectiveCall c;
    c.kind = EventKind::Broadcast;
    c.data = data;
    c.count = count;
    c.type = type;
    c.root = root;
    return c;
}

CollectiveCall barrierCall()
{
    CollectiveCall c;
    c.kind = EventKind::Barrier;
    return c;
}

CollectiveCall allToAllCall(
    const void* send, void* recv, std::size_t count, DType type, const CollectiveOptions& options)
{
    CollectiveCall c;
    c.options.algorithm = options.algorithm;
    c.kind = EventKind::AllToAll;
    c.send = send;
    c.recv = recv;
    c.count = count;
    c.type = type;
    return c;
}

CollectiveCall allToAllVCall(const void* send, const std::vector<std::size_t>& sendCounts, void* recv,
    const std::vector<std::size_t>& recvCounts, DType type, const CollectiveOptions& options, int size,
    const std::string& groupName)
{
    if (sendCounts.size() != static_cast<std::size_t>(size) || recvCounts.size() != sendCounts.size())
        throw CommError("all-to-all on " + groupName + ": " + std::to_string(sendCounts.size()) + " send counts and "
            + std::to_string(recvCounts.size()) + " receive counts for a group of " + std::to_string(size)
            + "; give one of each per member");
    CollectiveCall c = allToAllCall(send, recv, 0, type, options);
    c.sendCounts = sendCounts;
    c.recvCounts = recvCounts;
    for (auto n : sendCounts)
        c.count += n;
    return c;
}

} // namespace loom::comm
