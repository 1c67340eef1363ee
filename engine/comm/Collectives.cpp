#include "engine/comm/Collectives.h"

#include "engine/comm/Agreement.h"
#include "engine/comm/CommError.h"
#include "engine/comm/CompressedAllReduce.h"
#include "engine/comm/GradientCodec.h"
#include "engine/comm/RingAlgorithms.h"
#include "engine/comm/SharedMemory.h"

#include <algorithm>
#include <cstring>
#include <map>

namespace loom::comm {

using trace::Algorithm;
using trace::EventKind;

void CollectiveBackend::toHost(void* host, const void* data, std::size_t bytes)
{
    if (bytes && host != data)
        std::memmove(host, data, bytes);
}

void CollectiveBackend::fromHost(void* data, const void* host, std::size_t bytes)
{
    if (bytes && host != data)
        std::memmove(data, host, bytes);
}

std::optional<CollectiveAlgorithm> collectiveAlgorithmFromString(std::string_view text)
{
    for (auto a : { Algorithm::Library, Algorithm::Ring, Algorithm::ChunkedRing, Algorithm::Hierarchical,
             Algorithm::SharedMemory })
        if (trace::toString(a) == text)
            return a;
    return std::nullopt;
}

std::string describe(const CollectiveCall& call, const trace::GroupInfo& group)
{
    std::string s = std::string(trace::toString(call.kind)) + " #" + std::to_string(call.sequence);
    if (call.kind != EventKind::Barrier) {
        s += " (" + std::to_string(call.count) + " " + std::string(toString(call.type));
        if (call.kind == EventKind::AllReduce || call.kind == EventKind::ReduceScatter
            || call.kind == EventKind::AllGather || call.kind == EventKind::AllToAll)
            s += ", " + std::string(trace::toString(call.options.algorithm));
        if (call.options.codec.kind != plan::Codec::Kind::None)
            s += ", codec " + call.options.codec.toString();
        s += ")";
    }
    return s + " on " + group.name + " " + rankList(group.ranks);
}

std::uint64_t logicalBytes(const CollectiveCall& call, int size)
{
    const std::uint64_t bytes = call.count * sizeOf(call.type);
    if (call.kind == EventKind::AllToAll && !call.sendCounts.empty()) {
        std::uint64_t total = 0;
        for (auto c : call.sendCounts)
            total += c;
        return total * sizeOf(call.type);
    }
    const bool perRank = call.kind == EventKind::ReduceScatter || call.kind == EventKind::AllGather
        || call.kind == EventKind::AllToAll;
    return call.kind == EventKind::Barrier ? 0 : perRank ? bytes * static_cast<std::uint64_t>(size) : bytes;
}

std::uint64_t libraryWireBytes(const CollectiveCall& call, int rank, int size)
{
    if (call.kind == EventKind::Barrier || size <= 1)
        return 0;
    if (call.kind == EventKind::Broadcast)
        return rank == call.root ? logicalBytes(call, size) : 0;
    if (call.kind == EventKind::AllToAll && !call.sendCounts.empty())
        return logicalBytes(call, size) - call.sendCounts[static_cast<std::size_t>(rank)] * sizeOf(call.type);
    return static_cast<std::uint64_t>(trace::busBandwidthFactor(call.kind, size) * double(logicalBytes(call, size)));
}

bool evenNodes(const std::vector<int>& nodeOfMember)
{
    std::map<int, int> perNode;
    for (int node : nodeOfMember)
        ++perNode[node];
    for (const auto& [node, n] : perNode)
        if (n != perNode.begin()->second)
            return false;
    return true;
}

namespace {

// Loom's ring or chunked ring for all-reduce, reduce-scatter and all-gather over `t`.
void runRing(Transport& t, const CollectiveCall& call, int rank, int size, std::size_t chunk)
{
    const std::size_t es = sizeOf(call.type), n = static_cast<std::size_t>(size);
    switch (call.kind) {
    case EventKind::AllReduce:
        ringAllReduce(t, call.data, call.count, call.type, call.op, chunk);
        break;
    case EventKind::ReduceScatter: {
        if (call.count == 0)
            return; // nothing to reduce (and the buffers may be null)
        void* work = t.scratch(call.count * n * es, 1);
        t.copy(work, call.send, call.count * n * es);
        const Segments seg = Segments::even(call.count * n, size);
        ringReduceScatterInPlace(t, work, seg, call.type, call.op, chunk);
        t.copy(call.recv, static_cast<char*>(work) + seg.offset[static_cast<std::size_t>(rank)] * es, call.count * es);
        break;
    }
    case EventKind::AllGather: {
        if (call.count == 0)
            return;
        const Segments seg = Segments::even(call.count * n, size);
        t.copy(static_cast<char*>(call.recv) + seg.offset[static_cast<std::size_t>(rank)] * es, call.send,
            call.count * es);
        ringAllGatherInPlace(t, call.recv, seg, call.type, chunk);
        break;
    }
    default:
        throw CommError("not a ring collective");
    }
    t.waitAll();
}

// Loom's all-to-all on point-to-point: the own block is copied, then n-1 pairwise steps; in step s this
// rank sends its block for rank+s and receives rank-s's block for it.
void pairwiseAllToAll(Transport& t, const CollectiveCall& call, int rank, int size)
{
    const std::size_t es = sizeOf(call.type), n = static_cast<std::size_t>(size);
    const bool equal = call.sendCounts.empty();
    std::vector<std::size_t> sendOff(n + 1, 0), recvOff(n + 1, 0);
    for (std::size_t j = 0; j < n; ++j) {
        sendOff[j + 1] = sendOff[j] + (equal ? call.count : call.sendCounts[j]);
        recvOff[j + 1] = recvOff[j] + (equal ? call.count : call.recvCounts[j]);
    }
    const auto* send = static_cast<const char*>(call.send);
    auto* recv = static_cast<char*>(call.recv);
    const auto me = static_cast<std::size_t>(rank);
    if (sendOff[me + 1] > sendOff[me])
        t.copy(recv + recvOff[me] * es, send + sendOff[me] * es, (sendOff[me + 1] - sendOff[me]) * es);
    for (std::size_t s = 1; s < n; ++s) {
        const std::size_t to = (me + s) % n, from = (me + n - s) % n;
        if (recvOff[from + 1] > recvOff[from])
            t.irecv(recv + recvOff[from] * es, (recvOff[from + 1] - recvOff[from]) * es, static_cast<int>(from));
        if (sendOff[to + 1] > sendOff[to])
            t.isend(send + sendOff[to] * es, (sendOff[to + 1] - sendOff[to]) * es, static_cast<int>(to));
        t.waitAll();
    }
}

Algorithm runCompressed(CollectiveBackend& backend, const CollectiveCall& call, int size, const std::string& context)
{
    if (call.type != DType::F32 || call.op != ReduceOp::Sum)
        throw CommError(context + ": gradient codecs compress fp32 sums; this call is "
            + std::string(toString(call.type)) + " " + std::string(toString(call.op)));
    if (size == 1)
        return Algorithm::Library;
    // Codecs run on the host: device buffers (NCCL) are staged through host memory.
    std::vector<float> staged;
    float* host = static_cast<float*>(call.data);
    if (&backend.hostTransport() != &backend.transport()) {
        staged.resize(call.count);
        backend.toHost(staged.data(), call.data, call.count * sizeof(float));
        host = staged.data();
    }
    auto codec = makeCodec(call.options.codec, call.options.codecBlock);
    const Algorithm ran = compressedAllReduce(backend.hostTransport(), host, call.count, *codec,
        call.options.codec.kind == plan::Codec::Kind::TopK, call.options.feedback);
    if (!staged.empty())
        backend.fromHost(call.data, staged.data(), call.count * sizeof(float));
    return ran;
}

} // namespace

CollectiveOutcome runCollective(CollectiveBackend& backend, const CollectiveCall& call, const trace::GroupInfo& group,
    int rank, int size, const std::vector<int>& nodeOfMember, const CommConfig& config)
{
    const std::string context = describe(call, group);
    Transport& host = backend.hostTransport();
    Transport& t = backend.transport();
    // A variable-split all-to-all's counts differ between members by design: nothing to compare.
    const bool variable = call.kind == EventKind::AllToAll && !call.sendCounts.empty();
    if (config.checkAgreement && size > 1 && !variable) {
        CallSignature signature { call.kind, call.type, call.op, static_cast<int>(call.options.algorithm),
            static_cast<int>(call.options.codec.kind), call.root, call.count, optionsFingerprint(call.options) };
        checkAgreement(host, signature, group.ranks, context);
    }
    host.setContext(context);
    t.setContext(context);
    const std::uint64_t hostBefore = host.bytesSent(), before = t.bytesSent();
    CollectiveOutcome out;
    const Algorithm algorithm = call.options.algorithm;
    const bool collective = call.kind == EventKind::AllReduce || call.kind == EventKind::ReduceScatter
        || call.kind == EventKind::AllGather;
    if (call.kind == EventKind::AllReduce && call.options.codec.kind != plan::Codec::Kind::None) {
        out.algorithm = runCompressed(backend, call, size, context);
        out.wireBytes = host.bytesSent() - hostBefore;
        return out;
    }
    if (call.kind == EventKind::AllToAll && (algorithm == Algorithm::Ring || algorithm == Algorithm::ChunkedRing)) {
        pairwiseAllToAll(t, call, rank, size);
        return { Algorithm::Ring, t.bytesSent() - before };
    }
    if (algorithm == Algorithm::SharedMemory && collective && size > 1 && &t == &host) {
        if (SharedArena* arena = backend.sharedArena()) { // else the members are not on one machine: the ring
            const std::size_t bytes = call.count * sizeOf(call.type);
            if (call.kind == EventKind::AllReduce)
                sharedMemoryAllReduce(*arena, t, call.data, call.count, call.type, call.op);
            else if (call.kind == EventKind::ReduceScatter)
                sharedMemoryReduceScatter(*arena, t, call.send, call.recv, call.count, call.type, call.op);
            else
                sharedMemoryAllGather(*arena, t, call.send, call.recv, call.count, call.type);
            // What crossed the segment from this rank: the all-reduce's buffer, or the others' blocks.
            return { Algorithm::SharedMemory,
                call.kind == EventKind::AllReduce ? bytes : bytes * static_cast<std::size_t>(size - 1) };
        }
    }
    if (call.kind == EventKind::AllToAll && algorithm == Algorithm::Hierarchical)
        throw CommError(context + ": the hierarchical algorithm is for all-reduce; use ring or library");
    if (!collective || algorithm == Algorithm::Library || algorithm == Algorithm::None) {
        backend.runLibrary(call, context);
        return { Algorithm::Library, libraryWireBytes(call, rank, size) };
    }
    if (algorithm == Algorithm::Hierarchical && call.kind != EventKind::AllReduce)
        throw CommError(context + ": the hierarchical algorithm is for all-reduce; use ring or library");
    if (algorithm == Algorithm::Hierarchical && evenNodes(nodeOfMember)) {
        auto [local, cross] = backend.hierarchy();
        local->setContext(context + " [inside the node]");
        cross->setContext(context + " [across nodes]");
        const std::uint64_t localBefore = local->bytesSent(), crossBefore = cross->bytesSent();
        try {
            hierarchicalAllReduce(*local, *cross, call.data, call.count, call.type, call.op, call.options.chunkBytes);
            local->waitAll();
            cross->waitAll();
        } catch (...) {
            local->abandon();
            cross->abandon();
            throw;
        }
        return { Algorithm::Hierarchical, local->bytesSent() - localBefore + cross->bytesSent() - crossBefore };
    }
    // The ring, chunked ring, and the hierarchical all-reduce's fallback when nodes hold unequal numbers
    // of members (chunked by chunk_kb, as the hierarchical algorithm's own rings would be).
    // "shm" without a segment (or on device buffers) is the ring.
    const bool chunked = algorithm == Algorithm::ChunkedRing || algorithm == Algorithm::Hierarchical;
    const std::size_t chunk = chunked ? std::max<std::size_t>(call.options.chunkBytes, sizeOf(call.type)) : 0;
    runRing(t, call, rank, size, chunk);
    return { algorithm == Algorithm::ChunkedRing ? Algorithm::ChunkedRing : Algorithm::Ring, t.bytesSent() - before };
}

trace::TraceEvent collectiveEvent(
    const CollectiveCall& call, const trace::GroupInfo& group, const WorkStats& stats, int peer)
{
    trace::TraceEvent e;
    e.kind = call.kind;
    e.startNs = stats.startNs;
    e.endNs = stats.endNs;
    e.bytes = stats.bytes;
    e.wireBytes = stats.wireBytes;
    e.group = group.id;
    e.groupSize = static_cast<std::int32_t>(group.ranks.size());
    e.peer = call.kind == EventKind::Broadcast ? group.ranks[static_cast<std::size_t>(call.root)] : peer;
    e.algorithm = stats.algorithm;
    if (call.options.codec.kind != plan::Codec::Kind::None)
        e.codec = call.options.codec.toString();
    return e;
}

} // namespace loom::comm
