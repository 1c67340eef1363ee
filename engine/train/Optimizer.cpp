#include "engine/train/Optimizer.h"

#include <algorithm>
#include <cmath>

namespace loom::train {

double LearningRate::at(std::int64_t step) const
{
    if (step < warmup)
        return maxLr * static_cast<double>(step + 1) / static_cast<double>(warmup);
    if (total <= warmup)
        return maxLr;
    const double progress = std::min(1.0, static_cast<double>(step - warmup) / static_cast<double>(total - warmup));
    return minLr + 0.5 * (maxLr - minLr) * (1.0 + std::cos(3.141592653589793 * progress));
}

AdamW::AdamW(std::size_t begin, std::size_t end, double beta1, double beta2, double eps, double weightDecay)
    : m_begin(begin), m_end(end), m_beta1(beta1), m_beta2(beta2), m_eps(eps), m_weightDecay(weightDecay),
      m_m(end - begin, 0.0f), m_v(end - begin, 0.0f)
{
}

void AdamW::step(float* params, const float* grads, const std::vector<std::uint8_t>& decayMask, double lr, float gradScale)
{
    ++m_t;
    const double c1 = 1.0 - std::pow(m_beta1, static_cast<double>(m_t));
    const double c2 = 1.0 - std::pow(m_beta2, static_cast<double>(m_t));
    for (std::size_t i = m_begin; i < m_end; ++i) {
        const float g = grads[i] * gradScale;
        float& m = m_m[i - m_begin];
        float& v = m_v[i - m_begin];
        m = static_cast<float>(m_beta1 * m + (1 - m_beta1) * g);
        v = static_cast<float>(m_beta2 * v + (1 - m_beta2) * g * g);
        const double update = (m / c1) / (std::sqrt(v / c2) + m_eps);
        double p = params[i];
        if (decayMask[i])
            p -= lr * m_weightDecay * p;
        params[i] = static_cast<float>(p - lr * update);
    }
}

}  // namespace loom::train
