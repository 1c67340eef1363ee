// Each data-parallel member completes its own rows of a weight's gradient (GptStage.h,
// shareEmbeddingGradient and shareWeightGradient). With ZeRO-1 a member needs only the rows it updates:
// instead of each member writing the whole K × N gradient Xᵀ·dY from its own tokens and the members then
// reduce-scattering it, each member writes its K/n rows from every member's tokens. The products do the same
// arithmetic in total; what goes is the reduction of K·N floats and half of the gradient's memory traffic per
// member, for T·(K/n + N) floats received from each member per micro-batch. The tied token embedding is the
// largest such gradient of a small model (GPT-2 124M: V·h = 38.6 M of its 124 M parameters).
#include "engine/train/GptStage.h"

#include <algorithm>
#include <exception>
#include <stdexcept>

namespace loom::train {

namespace {

void checkRows(
    const char* what, comm::Communicator* group, const std::vector<GptStage::RowRange>& rows, std::int64_t height)
{
    if (!group || static_cast<int>(rows.size()) != group->size())
        throw std::invalid_argument(std::string(what) + ": one row range per member of the group");
    for (const auto& [first, end] : rows)
        if (first < 0 || end < first || end > height)
            throw std::invalid_argument(std::string(what) + ": a row range outside the tensor");
}

} // namespace

void GptStage::shareEmbeddingGradient(comm::Communicator* group, std::vector<RowRange> rows)
{
    checkRows("shareEmbeddingGradient", group, rows, m_paddedVocab);
    if (m_tpSize != 1 || m_cpSize != 1 || m_lmHead >= 0)
        throw std::invalid_argument("shareEmbeddingGradient: only with tp = cp = 1 and tied embeddings");
    if (m_paddedVocab >= (std::int64_t(1) << 24))
        throw std::invalid_argument("shareEmbeddingGradient: token ids travel as floats (vocab under 2^24)");
    if (m_rowGroup && m_rowGroup != group)
        throw std::invalid_argument("shareEmbeddingGradient: shared rows use one group");
    m_rowGroup = group;
    m_rowsOf = std::move(rows);
}

std::vector<int> GptStage::sharedRowWeights() const
{
    std::vector<int> out;
    if (!m_gpt2 || !m_moe.empty() || m_tpSize != 1 || m_cpSize != 1)
        return out;
    for (const auto& [layer, p] : m_block)
        for (int w : { p.wqkv, p.wo, p.wfc, p.wpr })
            out.push_back(w);
    return out;
}

void GptStage::shareWeightGradient(int index, comm::Communicator* group, std::vector<RowRange> rows)
{
    checkRows("shareWeightGradient", group, rows, m_params.spec(index).localRows);
    const auto shared = sharedRowWeights();
    if (std::find(shared.begin(), shared.end(), index) == shared.end())
        throw std::invalid_argument(
            "shareWeightGradient: " + m_params.spec(index).name + " is not a shared-row weight");
    if (m_rowGroup && m_rowGroup != group)
        throw std::invalid_argument("shareWeightGradient: shared rows use one group");
    m_rowGroup = group;
    m_weightRows[index] = std::move(rows);
}

GptStage::RowProduct GptStage::startRowProduct(
    const std::vector<RowRange>& rowsOf, const float* X, int K, const float* dY, int N, int T, float* grad)
{
    comm::Communicator& g = *m_rowGroup;
    const auto n = static_cast<std::size_t>(g.size()), tokens = static_cast<std::size_t>(T);
    const auto cols = static_cast<std::size_t>(K), width = static_cast<std::size_t>(N);
    const auto [first, end] = rowsOf[static_cast<std::size_t>(g.rank())];
    RowProduct p;
    p.width = static_cast<int>(end - first);
    p.N = N;
    p.tokens = static_cast<int>(n) * T;
    p.grad = grad + static_cast<std::size_t>(first) * width;
    // Member j's columns of X (the rows of the gradient it owns), packed one member after another.
    std::vector<std::size_t> sendCounts(n), recvCounts(n, tokens * static_cast<std::size_t>(p.width));
    std::size_t packed = 0;
    for (std::size_t j = 0; j < n; ++j)
        packed += sendCounts[j] = tokens * static_cast<std::size_t>(rowsOf[j].second - rowsOf[j].first);
    p.send.resize(packed);
    p.columns.resize(n * tokens * static_cast<std::size_t>(p.width));
    p.dY.assign(dY, dY + tokens * width);
    p.dYAll.resize(n * tokens * width);
    float* out = p.send.data();
    for (const auto& [a, b] : rowsOf)
        for (std::size_t t = 0; t < tokens; ++t, out += b - a)
            std::copy(X + t * cols + a, X + t * cols + b, out);
    p.traded = g.allToAllV(p.send.data(), sendCounts, p.columns.data(), recvCounts, comm::DType::F32);
    p.gathered = g.allGather(p.dY.data(), p.dYAll.data(), tokens * width, comm::DType::F32);
    return p;
}

void GptStage::finishRowProducts(std::vector<RowProduct>& products)
{
    // Every exchange is waited for before the buffers go, even when one failed (the first error is thrown).
    std::exception_ptr failed;
    for (RowProduct& p : products)
        for (const auto& work : { p.traded, p.gathered })
            try {
                work->wait();
            } catch (...) {
                if (!failed)
                    failed = std::current_exception();
            }
    if (failed) {
        products.clear();
        std::rethrow_exception(failed);
    }
    // Rows [first, end) of Xᵀ · dY over every member's tokens, in member order.
    for (RowProduct& p : products)
        if (p.width > 0)
            m_k.gemm(true, false, p.width, p.N, p.tokens, p.columns.data(), p.dYAll.data(), p.grad, true);
    products.clear();
}

void GptStage::weightGradient(int index, int K, int N, int T, const float* X, const float* dY)
{
    auto shared = m_weightRows.find(index);
    if (shared == m_weightRows.end()) {
        m_wgrad.add(m_k, m_params.grad(index), index, K, N, T, X, dY, m_weightGradientDone);
        return;
    }
    m_started.push_back(startRowProduct(shared->second, X, K, dY, N, T, m_params.grad(index)));
}

void GptStage::sharedHeadGradient(const float* dLogits, const float* lnf, int T)
{
    // The head's weight gradient dLogitsᵀ · lnf: X is dLogits (T × V), dY the final norm's output (T × h).
    std::vector<RowProduct> head;
    head.push_back(startRowProduct(
        m_rowsOf, dLogits, static_cast<int>(m_paddedVocab), lnf, static_cast<int>(m_h), T, m_params.grad(m_wte)));
    finishRowProducts(head);
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
