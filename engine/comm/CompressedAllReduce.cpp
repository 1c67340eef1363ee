#include "engine/comm/CompressedAllReduce.h"

#include "engine/comm/RingAlgorithms.h"

#include <cstring>
#include <vector>

namespace loom::comm {

namespace {

using Bytes = std::vector<std::uint8_t>;

// Encodes `in`; with a residual, also stores in `residual` what decoding the result loses.
Bytes encodeTracked(const GradientCodec& codec, const float* in, std::size_t count, float* residual)
{
    Bytes out(codec.maxEncodedBytes(count));
    out.resize(codec.encode(in, count, out.data()));
    if (residual) {
        std::vector<float> back(count);
        codec.decode(out.data(), out.size(), back.data(), count);
        for (std::size_t i = 0; i < count; ++i)
            residual[i] = in[i] - back[i];
    }
    return out;
}

// Sends `payload` to `peer` as a size header and the bytes; the header lets variable-size codecs (lz4)
// tell the receiver how much to expect.
void postSend(Transport& t, const Bytes& payload, std::uint64_t& header, int peer)
{
    header = payload.size();
    t.isend(&header, sizeof header, peer);
    if (!payload.empty())
        t.isend(payload.data(), payload.size(), peer);
}

Bytes receive(Transport& t, int peer)
{
    std::uint64_t size = 0;
    t.wait(t.irecv(&size, sizeof size, peer));
    Bytes payload(static_cast<std::size_t>(size));
    if (size > 0)
        t.wait(t.irecv(payload.data(), payload.size(), peer));
    return payload;
}

void ensureSize(std::vector<float>& v, std::size_t n)
{
    if (v.size() != n)
        v.assign(n, 0.0f);
}

} // namespace

trace::Algorithm compressedAllReduce(
    Transport& t, float* data, std::size_t count, const GradientCodec& codec, bool sparse, ErrorFeedback* feedback)
{
    const int n = t.size(), r = t.rank();
    const bool track = feedback && codec.lossy();
    std::vector<float> input(data, data + count);
    if (track) {
        ensureSize(feedback->worker, count);
        for (std::size_t i = 0; i < count; ++i)
            input[i] += feedback->worker[i];
    }

    if (sparse) {
        const Bytes mine = encodeTracked(codec, input.data(), count, track ? feedback->worker.data() : nullptr);
        std::vector<std::uint64_t> headers(static_cast<std::size_t>(n));
        for (int p = 0; p < n; ++p)
            if (p != r)
                postSend(t, mine, headers[static_cast<std::size_t>(p)], p);
        std::vector<Bytes> all(static_cast<std::size_t>(n));
        for (int p = 0; p < n; ++p)
            all[static_cast<std::size_t>(p)] = p == r ? mine : receive(t, p);
        t.waitAll();
        std::fill(data, data + count, 0.0f);
        std::vector<float> dense(count);
        for (const auto& bytes : all) { // rank order: the same additions on every rank
            codec.decode(bytes.data(), bytes.size(), dense.data(), count);
            for (std::size_t i = 0; i < count; ++i)
                data[i] += dense[i];
        }
        return trace::Algorithm::SparseAllGather;
    }

    const Segments seg = Segments::even(count, n);
    const auto me = static_cast<std::size_t>(r);
    // Phase 1: segment j of every rank goes to rank j.
    std::vector<Bytes> encoded(static_cast<std::size_t>(n));
    for (int j = 0; j < n; ++j) {
        const auto sj = static_cast<std::size_t>(j);
        encoded[sj] = encodeTracked(codec, input.data() + seg.offset[sj], seg.length[sj],
            track ? feedback->worker.data() + seg.offset[sj] : nullptr);
    }
    std::vector<std::uint64_t> headers(static_cast<std::size_t>(n));
    for (int j = 0; j < n; ++j)
        if (j != r)
            postSend(t, encoded[static_cast<std::size_t>(j)], headers[static_cast<std::size_t>(j)], j);
    std::vector<float> reduced(seg.length[me], 0.0f), part(seg.length[me]);
    for (int p = 0; p < n; ++p) {
        const Bytes bytes = p == r ? encoded[me] : receive(t, p);
        codec.decode(bytes.data(), bytes.size(), part.data(), part.size());
        for (std::size_t i = 0; i < part.size(); ++i)
            reduced[i] += part[i];
    }
    t.waitAll();

    // Phase 2: every rank's reduced segment goes to every rank.
    if (track) {
        ensureSize(feedback->server, seg.length[me]);
        for (std::size_t i = 0; i < reduced.size(); ++i)
            reduced[i] += feedback->server[i];
    }
    const Bytes result
        = encodeTracked(codec, reduced.data(), reduced.size(), track ? feedback->server.data() : nullptr);
    std::vector<std::uint64_t> headers2(static_cast<std::size_t>(n));
    for (int j = 0; j < n; ++j)
        if (j != r)
            postSend(t, result, headers2[static_cast<std::size_t>(j)], j);
    for (int p = 0; p < n; ++p) {
        const auto sp = static_cast<std::size_t>(p);
        const Bytes bytes = p == r ? result : receive(t, p);
        codec.decode(bytes.data(), bytes.size(), data + seg.offset[sp], seg.length[sp]);
    }
    t.waitAll();
    return trace::Algorithm::TwoPhaseCompressed;
}

} // namespace loom::comm
