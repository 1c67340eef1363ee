// ZeRO-1 without TP, PP or CP: each data-parallel member completes its own rows of some gradients from
// every member's tokens (GptStage::shareEmbeddingGradient, GptStage::shareWeightGradient) instead of writing
// the whole gradient from its own tokens and reduce-scattering it; only where that moves fewer bytes.
// And with the DP group on one machine, its members keep one copy of the parameters (shareParameters).
#include "engine/train/Trainer.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace loom::train {

bool Trainer::rowsMayBeShared(const comm::Communicator& data) const
{
    // The distributed optimizer on one stage without TP or CP (GptStage.h), in host memory (the products pack
    // X's columns on the CPU).
    const auto& p = m_layout.parallel;
    return shardingKind(m_layout) == ShardingKind::DistributedOptimizer && !data.onDevice() && p.tp == 1 && p.pp == 1
        && p.cp == 1;
}

bool Trainer::embeddingRowsPay(const comm::Communicator& data) const
{
    // Tied embeddings, and a step trades m·T·(V/n + 2h + 1) floats with each other member (the dLogits
    // columns, the final norm's output, the lookup's tokens and gradients) against the V·h/n that the
    // reduce-scatter sends each (m micro-batches of T tokens, n members): small batches per rank.
    if (!rowsMayBeShared(data) || m_options.sharedRows == TrainOptions::SharedRows::None
        || m_stage->tokenEmbedding() < 0 || !m_stage->tiedHead())
        return false;
    const auto& p = m_layout.parallel;
    const double tokens = double(p.microBatches() * p.microBatch * m_layout.model.seqLen);
    const double V = double(m_layout.model.paddedVocab()), n = double(data.size()), h = double(m_stage->hidden());
    return tokens * (V + n * (2.0 * h + 1.0)) < V * h;
}

std::vector<int> Trainer::weightRowsThatPay(const comm::Communicator& data) const
{
    // A K × N weight: a step trades m·T·(K/n + N) floats with each other member (X's columns of its rows,
    // dY) against the K·N/n that the reduce-scatter sends each.
    std::vector<int> out;
    if (!rowsMayBeShared(data) || m_options.sharedRows != TrainOptions::SharedRows::All)
        return out;
    const auto& p = m_layout.parallel;
    const double tokens = double(p.microBatches() * p.microBatch * m_layout.model.seqLen), n = double(data.size());
    for (int w : m_stage->sharedRowWeights()) {
        const auto& s = m_stage->params().spec(w);
        const double K = double(s.localRows), N = double(s.localCols);
        if (tokens * (K + n * N) < K * N)
            out.push_back(w);
    }
    return out;
}

void Trainer::shareRows(comm::Communicator& data, bool embedding, const std::vector<int>& weights)
{
    // Each tensor's bucket (one of its own) is not reduced; this member completes the rows that hold its
    // piece. The other members' rows are never written here: they stay zero, and the step need not zero them.
    ParamSet& params = m_stage->params();
    std::vector<std::pair<std::size_t, std::size_t>> unwritten;
    auto share = [&](int index) -> bool {
        const auto pieces = m_sync->piecesOfTensor(index);
        if (pieces.empty()) // the bucket does not split evenly, or its reduce-scatter is the library's
            return false;
        const auto& spec = params.spec(index);
        const auto width = static_cast<std::size_t>(spec.localCols);
        std::vector<GptStage::RowRange> rows;
        for (const auto& [from, to] : pieces) // the rows holding [from, to): a row cut by two pieces goes to both
            rows.emplace_back(from / width, from < to ? (to + width - 1) / width : from / width);
        if (index == m_stage->tokenEmbedding())
            m_stage->shareEmbeddingGradient(&data, rows);
        else
            m_stage->shareWeightGradient(index, &data, rows);
        m_sync->skipReduction(index);
        const auto [first, end] = rows[static_cast<std::size_t>(data.rank())];
        unwritten.emplace_back(spec.offset, spec.offset + static_cast<std::size_t>(first) * width);
        unwritten.emplace_back(spec.offset + static_cast<std::size_t>(end) * width, spec.offset + spec.size());
        return true;
    };
    if (embedding)
        m_sharesEmbeddingRows = share(m_stage->tokenEmbedding());
    for (int w : weights)
        m_sharedWeightRows += share(w) ? 1 : 0;
    std::sort(unwritten.begin(), unwritten.end());
    params.setUnwrittenGrads(std::move(unwritten));
}

void Trainer::shareParameters(comm::Communicator& data)
{
    // Every member holds the same initial values: member 0's go into the shared memory, and the barrier
    // keeps the others from reading it before they are there.
    ParamSet& params = m_stage->params();
    if (!m_options.shareParameters || shardingKind(m_layout) != ShardingKind::DistributedOptimizer || data.onDevice())
        return;
    std::string why;
    std::shared_ptr<void> memory = data.sharedMemory(params.values.size() * sizeof(float), why);
    if (!memory) {
        if (data.rank() == 0 && why != comm::kMembersOnSeveralNodes)
            std::fprintf(stderr, "loom: the parameters of %s are not shared (%s); each rank keeps its own copy\n",
                data.group().name.c_str(), why.c_str());
        return;
    }
    params.values.share(std::move(memory), data.rank() == 0);
    data.barrier()->wait();
}

} // namespace loom::train
