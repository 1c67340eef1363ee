#include "engine/train/SparseAdam.h"

#include <algorithm>
#include <cmath>

namespace loom::train {

SparseAdam::SparseAdam(
    std::vector<std::pair<std::size_t, std::size_t>> buckets, comm::Communicator& dp, comm::CollectiveOptions options)
    : m_buckets(std::move(buckets))
    , m_dp(dp)
    , m_options(options)
    , m_feedback(m_buckets.size())
{
}

void SparseAdam::step(AdamW& adam, float* params, const float* grads, float gradScale,
    const std::vector<std::uint8_t>& decayMask, double lr, std::int64_t frozenAtStep)
{
    const std::size_t n = m_buckets.empty() ? 0 : m_buckets.back().second;
    const double b1 = adam.beta1();
    const float dp = static_cast<float>(m_dp.size());
    if (m_momentum.size() != n) {
        // AdamW's moments over the whole buffer (all-gathered from the DP group's shards under ZeRO-1),
        // with the variance as it was after `frozenAtStep` Adam steps and that step's bias correction.
        // Read on the host: the sparse update computes on the CPU (AdamW::step refuses other devices first).
        std::vector<float> m(adam.firstMoment().begin(), adam.firstMoment().end()),
            v(adam.secondMoment().begin(), adam.secondMoment().end());
        if (adam.end() - adam.begin() != n) {
            const std::size_t shard = (n + m_dp.size() - 1) / static_cast<std::size_t>(m_dp.size());
            for (std::vector<float>* moment : { &m, &v }) {
                std::vector<float> mine(shard, 0.0f), all(shard * static_cast<std::size_t>(m_dp.size()));
                std::copy(moment->begin(), moment->end(), mine.begin());
                m_dp.allGather(mine.data(), all.data(), shard, comm::DType::F32)->wait();
                all.resize(n);
                *moment = std::move(all);
            }
        }
        const double c2 = 1.0 - std::pow(adam.beta2(), static_cast<double>(std::max<std::int64_t>(frozenAtStep, 1)));
        m_denominator.resize(n);
        m_momentum.resize(n);
        for (std::size_t i = 0; i < n; ++i) {
            m_denominator[i] = static_cast<float>(std::sqrt(v[i] / c2) + adam.eps());
            m_momentum[i] = m[i] / dp;
        }
        m_update.resize(n);
    }
    adam.setSteps(adam.steps() + 1);
    const double c1 = 1.0 - std::pow(b1, static_cast<double>(adam.steps()));
    const float scale = static_cast<float>(lr / c1);
    for (std::size_t i = 0; i < n; ++i) {
        float& u = m_momentum[i];
        u = static_cast<float>(b1 * u + (1 - b1) * (grads[i] * gradScale));
        m_update[i] = scale * u / m_denominator[i];
    }
    comm::CollectiveOptions o = m_options;
    std::vector<comm::WorkPtr> works;
    for (std::size_t b = 0; b < m_buckets.size(); ++b) {
        o.feedback = &m_feedback[b];
        works.push_back(m_dp.allReduce(m_update.data() + m_buckets[b].first, m_buckets[b].second - m_buckets[b].first,
            comm::DType::F32, comm::ReduceOp::Sum, o));
    }
    for (auto& w : works)
        w->wait();
    // Momentum factor masking: where this rank sent its accumulated update, its residual is exactly zero
    // (top-k sends those values as they are); clear the momentum there too, so a coordinate just sent does
    // not stay on top and crowd the others out.
    for (std::size_t b = 0; b < m_buckets.size(); ++b) {
        const auto& residual = m_feedback[b].worker;
        float* u = m_momentum.data() + m_buckets[b].first;
        for (std::size_t i = 0; i < residual.size(); ++i)
            if (residual[i] == 0.0f)
                u[i] = 0.0f;
    }
    // AdamW's own first moment (this rank's shard) holds dp·u_r, this rank's estimate of the global
    // momentum, so that a checkpoint has one.
    auto& own = adam.firstMoment();
    for (std::size_t i = adam.begin(); i < adam.end(); ++i)
        own[i - adam.begin()] = m_momentum[i] * dp;
    const double decay = lr * adam.weightDecay();
    for (std::size_t i = 0; i < n; ++i) {
        double p = params[i];
        if (decayMask[i])
            p -= decay * p;
        params[i] = static_cast<float>(p - m_update[i]);
    }
}

} // namespace loom::train
