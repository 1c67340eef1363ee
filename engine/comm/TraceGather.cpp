#include "engine/comm/TraceGather.h"

#include <algorithm>
#include <climits>
#include <cstring>

namespace loom::comm {

namespace {

constexpr int kPingTag = 32001, kPongTag = 32002, kCountTag = 32003, kEventsTag = 32004;

} // namespace

ClockAlignment alignClock(Communicator& world, int rounds)
{
    const int rank = world.rank(), size = world.size();
    std::vector<std::int64_t> results(2 * static_cast<std::size_t>(size), 0); // (offset, error) per rank
    if (rank == 0) {
        for (int r = 1; r < size; ++r) {
            std::int64_t bestRtt = INT64_MAX, bestOffset = 0;
            for (int i = 0; i < rounds; ++i) {
                std::int64_t t0 = trace::nowNs(), theirs = 0;
                auto pong = world.recv(&theirs, 1, DType::I64, r, kPongTag);
                world.send(&t0, 1, DType::I64, r, kPingTag)->wait();
                pong->wait();
                const std::int64_t t1 = trace::nowNs();
                if (t1 - t0 < bestRtt) {
                    bestRtt = t1 - t0;
                    bestOffset = theirs - (t0 + t1) / 2;
                }
            }
            results[2 * static_cast<std::size_t>(r)] = bestOffset;
            results[2 * static_cast<std::size_t>(r) + 1] = bestRtt / 2;
        }
    } else {
        for (int i = 0; i < rounds; ++i) {
            std::int64_t ping = 0;
            world.recv(&ping, 1, DType::I64, 0, kPingTag)->wait();
            const std::int64_t now = trace::nowNs();
            world.send(&now, 1, DType::I64, 0, kPongTag)->wait();
        }
    }
    world.broadcast(results.data(), results.size(), DType::I64, 0)->wait();
    return { results[2 * static_cast<std::size_t>(rank)], results[2 * static_cast<std::size_t>(rank) + 1] };
}

namespace {

// A fixed-size form of TraceEvent for the wire.
struct Packed {
    std::int32_t rank, step, microBatch, stage, chunk, group, groupSize, peer;
    std::int64_t startNs, endNs;
    std::uint64_t bytes, wireBytes;
    std::uint8_t lane, kind, source, algorithm;
    char codec[28];
};

Packed pack(const trace::TraceEvent& e, std::int64_t offset)
{
    Packed p {};
    p.rank = e.rank;
    p.step = e.step;
    p.microBatch = e.microBatch;
    p.stage = e.stage;
    p.chunk = e.chunk;
    p.group = e.group;
    p.groupSize = e.groupSize;
    p.peer = e.peer;
    p.startNs = e.startNs - offset;
    p.endNs = e.endNs - offset;
    p.bytes = e.bytes;
    p.wireBytes = e.wireBytes;
    p.lane = static_cast<std::uint8_t>(e.lane);
    p.kind = static_cast<std::uint8_t>(e.kind);
    p.source = static_cast<std::uint8_t>(e.source);
    p.algorithm = static_cast<std::uint8_t>(e.algorithm);
    std::strncpy(p.codec, e.codec.c_str(), sizeof p.codec - 1);
    return p;
}

trace::TraceEvent unpack(const Packed& p)
{
    trace::TraceEvent e;
    e.rank = p.rank;
    e.step = p.step;
    e.microBatch = p.microBatch;
    e.stage = p.stage;
    e.chunk = p.chunk;
    e.group = p.group;
    e.groupSize = p.groupSize;
    e.peer = p.peer;
    e.startNs = p.startNs;
    e.endNs = p.endNs;
    e.bytes = p.bytes;
    e.wireBytes = p.wireBytes;
    e.lane = static_cast<trace::Lane>(p.lane);
    e.kind = static_cast<trace::EventKind>(p.kind);
    e.source = static_cast<trace::EventSource>(p.source);
    e.algorithm = static_cast<trace::Algorithm>(p.algorithm);
    e.codec = std::string(p.codec, strnlen(p.codec, sizeof p.codec));
    return e;
}

} // namespace

std::vector<trace::TraceEvent> gatherEvents(
    Communicator& world, const std::vector<trace::TraceEvent>& mine, std::int64_t offsetNs)
{
    std::vector<Packed> packed;
    packed.reserve(mine.size());
    for (const auto& e : mine)
        packed.push_back(pack(e, offsetNs));
    std::vector<trace::TraceEvent> out;
    if (world.rank() != 0) {
        std::int64_t count = static_cast<std::int64_t>(packed.size());
        world.send(&count, 1, DType::I64, 0, kCountTag)->wait();
        if (count > 0)
            world.send(packed.data(), packed.size() * sizeof(Packed), DType::U8, 0, kEventsTag)->wait();
        return out;
    }
    for (const Packed& p : packed)
        out.push_back(unpack(p));
    for (int r = 1; r < world.size(); ++r) {
        std::int64_t count = 0;
        world.recv(&count, 1, DType::I64, r, kCountTag)->wait();
        std::vector<Packed> theirs(static_cast<std::size_t>(count));
        if (count > 0)
            world.recv(theirs.data(), theirs.size() * sizeof(Packed), DType::U8, r, kEventsTag)->wait();
        for (const Packed& p : theirs)
            out.push_back(unpack(p));
    }
    return out;
}

std::vector<std::int64_t> gatherValues(Communicator& world, std::int64_t value)
{
    std::vector<std::int64_t> all(static_cast<std::size_t>(world.size()), 0);
    all[static_cast<std::size_t>(world.rank())] = value;
    world.allReduce(all.data(), all.size(), DType::I64, ReduceOp::Sum)->wait();
    if (world.rank() != 0)
        all.clear();
    return all;
}

} // namespace loom::comm
