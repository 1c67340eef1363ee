// Sequence parallelism (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
// Models"): the TP all-reduce after a row-parallel product becomes a reduce-scatter along the sequence and
// the input of a column-parallel product an all-gather, so the norms, residuals and biases between them
// hold s/tp positions per rank. Rank j holds positions [j·s/tp, (j+1)·s/tp) of each of the B sequences,
// rows ordered [B][s/tp]; the communicator's blocks are ordered by rank, [tp][B][s/tp], hence the copies.
#include "engine/train/GptStage.h"

#include <algorithm>

namespace loom::train {

int GptStage::localTokens(int microBatch) const
{
    return microBatch * static_cast<int>(m_sp ? m_seq / m_tpSize : m_seq);
}

std::int64_t GptStage::localPosition(std::int64_t row) const
{
    if (!m_sp)
        return positionOf(static_cast<int>(row % m_seq));
    const std::int64_t part = m_seq / m_tpSize;
    return positionOf(static_cast<int>(m_tpRank * part + row % part));
}

const float* GptStage::gatherTokens(const float* local, std::vector<float>& full, int B)
{
    if (!m_sp)
        return local;
    const std::size_t part = static_cast<std::size_t>(m_seq / m_tpSize) * static_cast<std::size_t>(m_h);
    const std::size_t tp = static_cast<std::size_t>(m_tpSize), b = static_cast<std::size_t>(B);
    std::vector<float> blocks(tp * b * part);
    m_tp->allGather(local, blocks.data(), b * part, comm::DType::F32)->wait();
    full.resize(tp * b * part);
    for (std::size_t r = 0; r < tp; ++r)
        for (std::size_t s = 0; s < b; ++s) {
            const auto from = blocks.begin() + static_cast<std::ptrdiff_t>((r * b + s) * part);
            std::copy(from, from + static_cast<std::ptrdiff_t>(part),
                full.begin() + static_cast<std::ptrdiff_t>((s * tp + r) * part));
        }
    return full.data();
}

void GptStage::reduceTokens(float* full, float* local, int B)
{
    const std::size_t n = static_cast<std::size_t>(B) * static_cast<std::size_t>(m_seq * m_h);
    if (!m_sp) {
        allReduce(full, n);
        if (full != local)
            std::copy(full, full + n, local);
        return;
    }
    const std::size_t part = static_cast<std::size_t>(m_seq / m_tpSize) * static_cast<std::size_t>(m_h);
    const std::size_t tp = static_cast<std::size_t>(m_tpSize), b = static_cast<std::size_t>(B);
    std::vector<float> blocks(n);
    for (std::size_t s = 0; s < b; ++s)
        for (std::size_t r = 0; r < tp; ++r)
            std::copy(full + (s * tp + r) * part, full + (s * tp + r + 1) * part,
                blocks.begin() + static_cast<std::ptrdiff_t>((r * b + s) * part));
    m_tp->reduceScatter(blocks.data(), local, b * part, comm::DType::F32, comm::ReduceOp::Sum)->wait();
}

void GptStage::sumSequenceParallelGrads(const std::vector<int>& indices)
{
    if (!m_sp)
        return;
    std::vector<int> replicated;
    std::size_t total = 0;
    for (int i : indices)
        if (m_params.spec(i).shard == Shard::Replicated) {
            replicated.push_back(i);
            total += m_params.spec(i).size();
        }
    if (replicated.empty())
        return;
    std::vector<float> packed(total);
    std::size_t at = 0;
    for (int i : replicated) {
        std::copy(m_params.grad(i), m_params.grad(i) + m_params.spec(i).size(), packed.begin() + static_cast<long>(at));
        at += m_params.spec(i).size();
    }
    allReduce(packed.data(), total);
    at = 0;
    for (int i : replicated) {
        std::copy(packed.begin() + static_cast<long>(at),
            packed.begin() + static_cast<long>(at + m_params.spec(i).size()), m_params.grad(i));
        at += m_params.spec(i).size();
    }
}

std::vector<int> GptStage::outerParams() const
{
    std::vector<int> out;
    for (int i : { m_lmHead, m_lnfg, m_lnfb, m_wte, m_wpe })
        if (i >= 0)
            out.push_back(i);
    return out;
}

} // namespace loom::train
