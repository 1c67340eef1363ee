#include "engine/train/GradientSync.h"

#include <algorithm>

namespace loom::train {

GradientSync::GradientSync(ParamSet& params, comm::Communicator* dp, std::size_t bucketBytes, bool overlap,
                           comm::CollectiveOptions options, bool errorFeedback, const std::vector<int>& groups)
    : m_params(params), m_dp(dp), m_overlap(overlap), m_errorFeedback(errorFeedback), m_codec(options.codec), m_options(options)
{
    const auto& specs = params.specs();
    m_bucketOf.assign(specs.size(), -1);
    for (int i = 0; i < static_cast<int>(specs.size()); ++i) {
        const auto& s = specs[static_cast<std::size_t>(i)];
        const bool otherGroup = !groups.empty() && i > 0 && groups[static_cast<std::size_t>(i)] != groups[static_cast<std::size_t>(i) - 1];
        const bool startNew = m_buckets.empty() || otherGroup || (m_buckets.back().end - m_buckets.back().begin) * 4 >= bucketBytes;
        if (startNew)
            m_buckets.push_back({s.offset, s.offset, 0, 0, nullptr, {}});
        m_buckets.back().end = s.offset + s.size();
        ++m_buckets.back().size;
        m_bucketOf[static_cast<std::size_t>(i)] = static_cast<int>(m_buckets.size()) - 1;
    }
    reset();
}

void GradientSync::reset()
{
    for (auto& b : m_buckets) {
        b.waiting = b.size;
        b.work.reset();
    }
}

void GradientSync::launch(Bucket& b)
{
    if (b.work || !m_enabled || !m_dp || m_dp->size() == 1)
        return;
    comm::CollectiveOptions o = m_options;
    o.feedback = m_errorFeedback ? &b.feedback : nullptr;
    b.work = m_dp->allReduce(m_params.grads.data() + b.begin, b.end - b.begin, comm::DType::F32, comm::ReduceOp::Sum, o);
}

std::vector<std::pair<std::size_t, std::size_t>> GradientSync::bucketRanges() const
{
    std::vector<std::pair<std::size_t, std::size_t>> out;
    for (const auto& b : m_buckets)
        out.emplace_back(b.begin, b.end);
    return out;
}

void GradientSync::markReady(int index)
{
    const int b = m_bucketOf[static_cast<std::size_t>(index)];
    Bucket& bucket = m_buckets[static_cast<std::size_t>(b)];
    if (--bucket.waiting == 0 && m_overlap)
        launch(bucket);
}

void GradientSync::finish()
{
    for (auto& b : m_buckets)
        launch(b);
    for (auto& b : m_buckets)
        if (b.work)
            b.work->wait();
}

}  // namespace loom::train
