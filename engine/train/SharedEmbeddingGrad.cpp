// Each data-parallel member completes its own rows of the tied token embedding's gradient (GptStage.h,
// shareEmbeddingGradient). The embedding's gradient is the largest tensor of a small model (GPT-2 124M:
// V·h = 38.6 M of its 124 M parameters), and with ZeRO-1 a member needs only the rows it updates: instead of
// each member writing the whole V × h gradient from its own tokens and the members then reduce-scattering
// it, each member writes its V/n rows from every member's tokens. The products do the same arithmetic in
// total; what goes is the reduction of V·h floats and half of the gradient's memory traffic per member, for
// T·(V/n + h) floats traded per micro-batch.
#include "engine/train/GptStage.h"

#include <stdexcept>

namespace loom::train {

void GptStage::shareEmbeddingGradient(comm::Communicator* group, std::vector<RowRange> rows)
{
    if (!group || static_cast<int>(rows.size()) != group->size())
        throw std::invalid_argument("shareEmbeddingGradient: one row range per member of the group");
    if (m_tpSize != 1 || m_cpSize != 1 || m_lmHead >= 0)
        throw std::invalid_argument("shareEmbeddingGradient: only with tp = cp = 1 and tied embeddings");
    if (m_paddedVocab >= (std::int64_t(1) << 24))
        throw std::invalid_argument("shareEmbeddingGradient: token ids travel as floats (vocab under 2^24)");
    for (const auto& [first, end] : rows)
        if (first < 0 || end < first || end > m_paddedVocab)
            throw std::invalid_argument("shareEmbeddingGradient: a row range outside the embedding");
    m_rowGroup = group;
    m_rowsOf = std::move(rows);
}

void GptStage::sharedHeadGradient(const float* dLogits, const float* lnf, int T)
{
    comm::Communicator& g = *m_rowGroup;
    const int n = g.size();
    const auto V = static_cast<std::size_t>(m_paddedVocab), h = static_cast<std::size_t>(m_h);
    const auto tokens = static_cast<std::size_t>(T);
    const auto [first, end] = m_rowsOf[static_cast<std::size_t>(g.rank())];
    const auto width = static_cast<std::size_t>(end - first);
    // Member j's columns of dLogits (the rows of the gradient it owns), packed one member after another.
    std::vector<std::size_t> sendCounts(static_cast<std::size_t>(n)), recvCounts(static_cast<std::size_t>(n));
    std::size_t packed = 0;
    for (int j = 0; j < n; ++j) {
        const auto [a, b] = m_rowsOf[static_cast<std::size_t>(j)];
        sendCounts[static_cast<std::size_t>(j)] = tokens * static_cast<std::size_t>(b - a);
        recvCounts[static_cast<std::size_t>(j)] = tokens * width;
        packed += sendCounts[static_cast<std::size_t>(j)];
    }
    std::vector<float> send(packed), columns(static_cast<std::size_t>(n) * tokens * width),
        lnfAll(static_cast<std::size_t>(n) * tokens * h);
    float* out = send.data();
    for (int j = 0; j < n; ++j) {
        const auto [a, b] = m_rowsOf[static_cast<std::size_t>(j)];
        for (std::size_t t = 0; t < tokens; ++t, out += b - a)
            std::copy(dLogits + t * V + a, dLogits + t * V + b, out);
    }
    auto traded = g.allToAllV(send.data(), sendCounts, columns.data(), recvCounts, comm::DType::F32);
    auto gathered = g.allGather(lnf, lnfAll.data(), tokens * h, comm::DType::F32);
    traded->wait();
    gathered->wait();
    // Rows [first, end) of dLogitsᵀ · lnf over every member's tokens, in member order.
    if (width > 0)
        m_k.gemm(true, false, static_cast<int>(width), static_cast<int>(h), n * T, columns.data(), lnfAll.data(),
            m_params.grad(m_wte) + static_cast<std::size_t>(first) * h, true);
}

void GptStage::sharedLookupGradient(const float* dx, const std::int32_t* tokens, int T)
{
    comm::Communicator& g = *m_rowGroup;
    const int n = g.size();
    const auto h = static_cast<std::size_t>(m_h), row = h + 1, count = static_cast<std::size_t>(T);
    // Each token as (its id as a float, exact under 2^24; its input gradient), every member's gathered.
    std::vector<float> mine(count * row), all(static_cast<std::size_t>(n) * count * row);
    for (std::size_t t = 0; t < count; ++t) {
        mine[t * row] = static_cast<float>(tokens[t]);
        std::copy(dx + t * h, dx + (t + 1) * h, mine.data() + t * row + 1);
    }
    g.allGather(mine.data(), all.data(), count * row, comm::DType::F32)->wait();
    const auto [first, end] = m_rowsOf[static_cast<std::size_t>(g.rank())];
    float* dwte = m_params.grad(m_wte);
    for (std::size_t i = 0; i < static_cast<std::size_t>(n) * count; ++i) {
        const float* r = all.data() + i * row;
        const auto tok = static_cast<std::int64_t>(r[0]);
        if (tok >= first && tok < end)
            for (std::size_t c = 0; c < h; ++c)
                dwte[static_cast<std::size_t>(tok) * h + c] += r[1 + c];
    }
}

} // namespace loom::train
