#include "engine/train/WeightGradQueue.h"

namespace loom::train {

std::size_t WeightGradQueue::Work::floats() const
{
    std::size_t n = 0;
    for (const Product& p : products)
        n += p.X.size() + p.dY.size();
    return n;
}

void WeightGradQueue::add(Kernels& k, float* grad, int tensor, int K, int N, int T, const float* X, const float* dY,
    const std::function<void(int)>& done)
{
    if (!m_deferring) {
        k.gemm(true, false, K, N, T, X, dY, grad, true);
        if (done)
            done(tensor);
        return;
    }
    Product p;
    p.grad = grad;
    p.K = K;
    p.N = N;
    p.T = T;
    p.tensor = tensor;
    p.X.assign(X, X + static_cast<std::size_t>(T) * static_cast<std::size_t>(K));
    p.dY.assign(dY, dY + static_cast<std::size_t>(T) * static_cast<std::size_t>(N));
    m_work.products.push_back(std::move(p));
}

void WeightGradQueue::endBlock(std::int64_t layer)
{
    if (m_deferring)
        m_work.blockEnds.emplace_back(m_work.products.size(), layer);
}

WeightGradQueue::Work WeightGradQueue::take()
{
    Work out = std::move(m_work);
    m_work = Work {};
    return out;
}

void WeightGradQueue::run(
    Kernels& k, Work& work, const std::function<void(int)>& done, const std::function<void(std::int64_t)>& blockDone)
{
    std::size_t next = 0;
    auto closeBlocks = [&](std::size_t upTo) {
        for (; next < work.blockEnds.size() && work.blockEnds[next].first <= upTo; ++next)
            if (blockDone && work.blockEnds[next].second >= 0)
                blockDone(work.blockEnds[next].second);
    };
    for (std::size_t i = 0; i < work.products.size(); ++i) {
        closeBlocks(i);
        Product& p = work.products[i];
        k.gemm(true, false, p.K, p.N, p.T, p.X.data(), p.dY.data(), p.grad, true);
        if (done)
            done(p.tensor);
        p.X = {}; // freed as W goes
        p.dY = {};
    }
    closeBlocks(work.products.size());
}

} // namespace loom::train
