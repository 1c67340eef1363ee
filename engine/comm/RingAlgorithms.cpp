#include "engine/comm/RingAlgorithms.h"

#include <algorithm>

namespace loom::comm {

namespace {

std::size_t mod(long long a, int n)
{
    return static_cast<std::size_t>(((a % n) + n) % n);
}

char* at(void* data, std::size_t elements, DType type)
{
    return static_cast<char*>(data) + elements * sizeOf(type);
}

// Splits `bytes` into chunks of at most `chunkBytes` (whole elements); one chunk when chunkBytes is 0.
std::vector<std::pair<std::size_t, std::size_t>> chunks(
    std::size_t elements, std::size_t elementSize, std::size_t chunkBytes)
{
    std::vector<std::pair<std::size_t, std::size_t>> out; // (offset, length) in elements
    if (elements == 0)
        return out;
    const std::size_t per = chunkBytes == 0 ? elements : std::max<std::size_t>(1, chunkBytes / elementSize);
    for (std::size_t off = 0; off < elements; off += per)
        out.emplace_back(off, std::min(per, elements - off));
    return out;
}

} // namespace

Segments Segments::even(std::size_t count, int parts)
{
    Segments s;
    const std::size_t n = static_cast<std::size_t>(parts);
    const std::size_t base = count / n, extra = count % n;
    std::size_t offset = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t len = base + (i < extra ? 1 : 0);
        s.offset.push_back(offset);
        s.length.push_back(len);
        offset += len;
    }
    return s;
}

void ringReduceScatterInPlace(
    Transport& t, void* data, const Segments& seg, DType type, ReduceOp op, std::size_t chunkBytes)
{
    const int n = t.size(), r = t.rank();
    if (n == 1)
        return;
    const int right = (r + 1) % n, left = (r + n - 1) % n;
    const std::size_t es = sizeOf(type);
    std::size_t largest = 0;
    for (auto len : seg.length)
        largest = std::max(largest, len);
    char* incoming = static_cast<char*>(t.scratch(largest * es, 0));

    for (int s = 0; s < n - 1; ++s) {
        const std::size_t sendSeg = mod(r - s - 1, n), recvSeg = mod(r - s - 2, n);
        const auto recvChunks = chunks(seg.length[recvSeg], es, chunkBytes);
        const auto sendChunks = chunks(seg.length[sendSeg], es, chunkBytes);
        std::vector<Transport::Request> recvs;
        recvs.reserve(recvChunks.size());
        for (auto [off, len] : recvChunks)
            recvs.push_back(t.irecv(incoming + off * es, len * es, left));
        for (auto [off, len] : sendChunks)
            t.isend(at(data, seg.offset[sendSeg] + off, type), len * es, right);
        for (std::size_t c = 0; c < recvChunks.size(); ++c) {
            t.wait(recvs[c]);
            const auto [off, len] = recvChunks[c];
            t.reduce(at(data, seg.offset[recvSeg] + off, type), incoming + off * es, len, type, op);
        }
        t.waitAll(); // sends of this step done before the next step reuses `incoming`' data
    }
}

void ringAllGatherInPlace(Transport& t, void* data, const Segments& seg, DType type, std::size_t chunkBytes)
{
    const int n = t.size(), r = t.rank();
    if (n == 1)
        return;
    const int right = (r + 1) % n, left = (r + n - 1) % n;
    const std::size_t es = sizeOf(type);
    for (int s = 0; s < n - 1; ++s) {
        const std::size_t sendSeg = mod(r - s, n), recvSeg = mod(r - s - 1, n);
        for (auto [off, len] : chunks(seg.length[recvSeg], es, chunkBytes))
            t.irecv(at(data, seg.offset[recvSeg] + off, type), len * es, left);
        for (auto [off, len] : chunks(seg.length[sendSeg], es, chunkBytes))
            t.isend(at(data, seg.offset[sendSeg] + off, type), len * es, right);
        t.waitAll();
    }
}

void ringAllReduce(Transport& t, void* data, std::size_t count, DType type, ReduceOp op, std::size_t chunkBytes)
{
    const Segments seg = Segments::even(count, t.size());
    ringReduceScatterInPlace(t, data, seg, type, op, chunkBytes);
    ringAllGatherInPlace(t, data, seg, type, chunkBytes);
}

void hierarchicalAllReduce(
    Transport& local, Transport& cross, void* data, std::size_t count, DType type, ReduceOp op, std::size_t chunkBytes)
{
    const Segments seg = Segments::even(count, local.size());
    ringReduceScatterInPlace(local, data, seg, type, op, chunkBytes);
    const auto mine = static_cast<std::size_t>(local.rank());
    ringAllReduce(cross, at(data, seg.offset[mine], type), seg.length[mine], type, op, chunkBytes);
    ringAllGatherInPlace(local, data, seg, type, chunkBytes);
}

} // namespace loom::comm
