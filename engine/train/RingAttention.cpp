#include "engine/train/RingAttention.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace loom::train {

namespace {

constexpr int kTagKv = 1; // K/V blocks, forward and backward
constexpr int kTagDkv = 2; // dK/dV accumulators, backward

} // namespace

RingAttention::RingAttention(comm::Communicator* cp, Shape shape)
    : m_cp(cp && cp->size() > 1 ? cp : nullptr)
    , m_rank(m_cp ? m_cp->rank() : 0)
    , m_size(m_cp ? m_cp->size() : 1)
    , m_s(shape)
{
    if (m_s.kvHeads < 1 || m_s.heads % m_s.kvHeads != 0)
        throw std::invalid_argument("ring attention: " + std::to_string(m_s.kvHeads) + " KV heads do not divide the "
            + std::to_string(m_s.heads) + " query heads");
    m_scores.resize(static_cast<std::size_t>(m_s.chunk) * m_s.chunk);
    m_dScores.resize(m_scores.size());
}

std::vector<std::int64_t> RingAttention::localPositions(int cpRank, int cpSize, std::int64_t seqLen)
{
    const std::int64_t c = seqLen / (2 * cpSize);
    std::vector<std::int64_t> out;
    out.reserve(static_cast<std::size_t>(2 * c));
    for (const std::int64_t chunk : { std::int64_t(cpRank), std::int64_t(2 * cpSize - 1 - cpRank) })
        for (std::int64_t j = 0; j < c; ++j)
            out.push_back(chunk * c + j);
    return out;
}

std::size_t RingAttention::blockFloats() const
{
    return static_cast<std::size_t>(m_s.sequences) * 2 * m_s.chunk * 2 * m_s.kvHeads * m_s.headDim;
}

std::uint64_t RingAttention::forwardSendBytes() const
{
    return std::uint64_t(m_size - 1) * blockFloats() * 4;
}

std::uint64_t RingAttention::backwardSendBytes() const
{
    return m_size > 1 ? (std::uint64_t(m_size - 1) + std::uint64_t(m_size)) * blockFloats() * 4 : 0;
}

void RingAttention::pack(const float* k, const float* v, int kvStride, std::vector<float>& kv) const
{
    const int kvd = m_s.kvHeads * m_s.headDim, rows = m_s.sequences * 2 * m_s.chunk;
    kv.resize(blockFloats());
    for (int r = 0; r < rows; ++r) {
        float* dst = kv.data() + static_cast<std::size_t>(r) * 2 * kvd;
        std::copy(k + static_cast<std::size_t>(r) * kvStride, k + static_cast<std::size_t>(r) * kvStride + kvd, dst);
        std::copy(
            v + static_cast<std::size_t>(r) * kvStride, v + static_cast<std::size_t>(r) * kvStride + kvd, dst + kvd);
    }
}

void RingAttention::attendBlock(
    const float* q, int qStride, const float* kv, int src, float* acc, float* rowMax, float* rowSum)
{
    const int c = m_s.chunk, d = m_s.headDim, H = m_s.heads, L = 2 * c, hd = H * d;
    const int kvd = m_s.kvHeads * d, kvWidth = 2 * kvd, group = H / m_s.kvHeads;
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    float* S = m_scores.data();
    forEachBlockPair(src, [&](int b, int h, int a, int e, bool diagonal) {
        const float* Q = q + static_cast<std::size_t>(b * L + a * c) * qStride + h * d;
        const float* K = kv + static_cast<std::size_t>(b * L + e * c) * kvWidth + (h / group) * d;
        const float* V = K + kvd;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c, c, d, scale, Q, qStride, K, kvWidth, 0.0f, S, c);
        for (int i = 0; i < c; ++i) {
            float* row = S + static_cast<std::size_t>(i) * c;
            const int limit = diagonal ? i + 1 : c; // the diagonal chunk is causal inside
            float blockMax = -INFINITY;
            for (int j = 0; j < limit; ++j)
                blockMax = std::max(blockMax, row[j]);
            const std::size_t idx = static_cast<std::size_t>((b * H + h) * L + a * c + i);
            const float next = std::max(rowMax[idx], blockMax);
            const float alpha = std::exp(rowMax[idx] - next); // 0 while the row is empty
            float sum = 0;
            for (int j = 0; j < limit; ++j) {
                row[j] = std::exp(row[j] - next);
                sum += row[j];
            }
            std::fill(row + limit, row + c, 0.0f);
            rowSum[idx] = rowSum[idx] * alpha + sum;
            rowMax[idx] = next;
            float* o = acc + static_cast<std::size_t>(b * L + a * c + i) * hd + h * d;
            for (int x = 0; x < d; ++x)
                o[x] *= alpha;
        }
        float* O = acc + static_cast<std::size_t>(b * L + a * c) * hd + h * d;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, c, d, c, 1.0f, S, c, V, kvWidth, 1.0f, O, hd);
    });
}

void RingAttention::forward(
    const float* q, int qStride, const float* k, const float* v, int kvStride, float* out, int outStride, float* lse)
{
    const int c = m_s.chunk, d = m_s.headDim, H = m_s.heads, L = 2 * c, hd = H * d, B = m_s.sequences;
    std::vector<float> acc(static_cast<std::size_t>(B) * L * hd, 0.0f);
    std::vector<float> rowMax(static_cast<std::size_t>(B) * H * L, -INFINITY), rowSum(rowMax.size(), 0.0f);
    std::vector<float> cur, next(blockFloats());
    pack(k, v, kvStride, cur);
    const int to = (m_rank + 1) % m_size, from = (m_rank - 1 + m_size) % m_size;
    for (int t = 0; t < m_size; ++t) {
        const int src = (m_rank - t + m_size) % m_size;
        comm::WorkPtr exchange;
        if (t < m_size - 1) // the next block arrives while this one is used
            exchange = m_cp->sendRecv(cur.data(), to, next.data(), from, cur.size(), comm::DType::F32, kTagKv);
        attendBlock(q, qStride, cur.data(), src, acc.data(), rowMax.data(), rowSum.data());
        if (exchange) {
            exchange->wait();
            cur.swap(next);
        }
    }
    for (int b = 0; b < B; ++b)
        for (int j = 0; j < L; ++j)
            for (int h = 0; h < H; ++h) {
                const std::size_t idx = static_cast<std::size_t>((b * H + h) * L + j);
                const float inv = 1.0f / rowSum[idx];
                const float* a = acc.data() + static_cast<std::size_t>(b * L + j) * hd + h * d;
                float* o = out + static_cast<std::size_t>(b * L + j) * outStride + h * d;
                for (int x = 0; x < d; ++x)
                    o[x] = a[x] * inv;
                lse[idx] = rowMax[idx] + std::log(rowSum[idx]);
            }
}

void RingAttention::backwardBlock(const float* q, int qStride, const float* kv, int src, const float* dOut,
    int outStride, const float* lse, const float* delta, float* dq, int dqStride, float* dkv)
{
    const int c = m_s.chunk, d = m_s.headDim, H = m_s.heads, L = 2 * c;
    const int kvd = m_s.kvHeads * d, kvWidth = 2 * kvd, group = H / m_s.kvHeads;
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    float* P = m_scores.data();
    float* dS = m_dScores.data();
    forEachBlockPair(src, [&](int b, int h, int a, int e, bool diagonal) {
        const std::size_t qRow = static_cast<std::size_t>(b * L + a * c);
        const std::size_t kRow = static_cast<std::size_t>(b * L + e * c);
        const int col = (h / group) * d;
        const float* Q = q + qRow * qStride + h * d;
        const float* K = kv + kRow * kvWidth + col;
        const float* V = K + kvd;
        const float* dO = dOut + qRow * outStride + h * d;
        float* dK = dkv + kRow * kvWidth + col;
        float* dV = dK + kvd;
        // P = exp(S - lse) recomputed from the kept log-sum-exp; dP = dO·Vᵀ.
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c, c, d, scale, Q, qStride, K, kvWidth, 0.0f, P, c);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c, c, d, 1.0f, dO, outStride, V, kvWidth, 0.0f, dS, c);
        for (int i = 0; i < c; ++i) {
            const std::size_t idx = static_cast<std::size_t>((b * H + h) * L + a * c + i);
            const int limit = diagonal ? i + 1 : c;
            float* p = P + static_cast<std::size_t>(i) * c;
            float* g = dS + static_cast<std::size_t>(i) * c;
            for (int j = 0; j < limit; ++j) {
                p[j] = std::exp(p[j] - lse[idx]);
                g[j] = p[j] * (g[j] - delta[idx]) * scale; // softmax backward
            }
            std::fill(p + limit, p + c, 0.0f);
            std::fill(g + limit, g + c, 0.0f);
        }
        // dV += Pᵀ·dO ; dQ += dS·K ; dK += dSᵀ·Q
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c, d, c, 1.0f, P, c, dO, outStride, 1.0f, dV, kvWidth);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, c, d, c, 1.0f, dS, c, K, kvWidth, 1.0f,
            dq + qRow * dqStride + h * d, dqStride);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c, d, c, 1.0f, dS, c, Q, qStride, 1.0f, dK, kvWidth);
    });
}

void RingAttention::backward(const float* q, int qStride, const float* k, const float* v, int kvStride,
    const float* out, int outStride, const float* dOut, const float* lse, float* dq, float* dk, float* dv)
{
    const int c = m_s.chunk, d = m_s.headDim, H = m_s.heads, L = 2 * c, hd = H * d, B = m_s.sequences;
    const int kvd = m_s.kvHeads * d;
    // delta = Σ dO ⊙ O per row and head: the softmax backward's inner product, the same for every block.
    std::vector<float> delta(static_cast<std::size_t>(B) * H * L);
    for (int b = 0; b < B; ++b)
        for (int j = 0; j < L; ++j) {
            const std::size_t row = static_cast<std::size_t>(b * L + j);
            std::fill(dq + row * qStride, dq + row * qStride + hd, 0.0f);
            for (int h = 0; h < H; ++h) {
                float s = 0;
                for (int x = 0; x < d; ++x)
                    s += dOut[row * outStride + h * d + x] * out[row * outStride + h * d + x];
                delta[static_cast<std::size_t>((b * H + h) * L + j)] = s;
            }
        }
    std::vector<float> cur, next(blockFloats()), dkv(blockFloats()), outgoing(blockFloats()), incoming(blockFloats());
    pack(k, v, kvStride, cur);
    const int to = (m_rank + 1) % m_size, from = (m_rank - 1 + m_size) % m_size;
    comm::WorkPtr carried; // the dK/dV accumulator of the block this rank holds next, coming from `from`
    for (int t = 0; t < m_size; ++t) {
        const int src = (m_rank - t + m_size) % m_size;
        comm::WorkPtr exchange;
        if (t < m_size - 1)
            exchange = m_cp->sendRecv(cur.data(), to, next.data(), from, cur.size(), comm::DType::F32, kTagKv);
        std::fill(dkv.begin(), dkv.end(), 0.0f);
        backwardBlock(q, qStride, cur.data(), src, dOut, outStride, lse, delta.data(), dq, qStride, dkv.data());
        if (carried) { // what the ranks before added to this block's gradient
            carried->wait();
            for (std::size_t i = 0; i < dkv.size(); ++i)
                dkv[i] += incoming[i];
        }
        if (m_cp) { // on to the next rank; after cp steps each accumulator is back with its block's owner
            outgoing.swap(dkv);
            carried = m_cp->sendRecv(
                outgoing.data(), to, incoming.data(), from, outgoing.size(), comm::DType::F32, kTagDkv);
        }
        if (exchange) {
            exchange->wait();
            cur.swap(next);
        }
    }
    const std::vector<float>* mine = &dkv;
    if (carried) {
        carried->wait();
        mine = &incoming;
    }
    for (int r = 0; r < B * L; ++r) {
        const float* src = mine->data() + static_cast<std::size_t>(r) * 2 * kvd;
        std::copy(src, src + kvd, dk + static_cast<std::size_t>(r) * kvStride);
        std::copy(src + kvd, src + 2 * kvd, dv + static_cast<std::size_t>(r) * kvStride);
    }
}

} // namespace loom::train
