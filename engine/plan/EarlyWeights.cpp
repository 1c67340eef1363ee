#include "engine/plan/EarlyWeights.h"

#include <map>
#include <utility>

namespace loom::plan {

EarlyWeights::EarlyWeights(const Schedule& schedule, std::int64_t pipelineRank)
    : m_on(schedule.fillsIdleWithWeight())
{
    const auto& ops = schedule.opsOf(pipelineRank);
    m_weightOf.assign(ops.size(), -1);
    m_anchored.assign(ops.size(), 0);
    m_ran.assign(ops.size(), 0);
    if (!m_on)
        return;
    std::map<std::pair<std::int32_t, std::int32_t>, std::size_t> backwardAt; // (chunk, micro-batch) -> B
    std::map<std::int32_t, std::size_t> lastWeight; // chunk -> its last listed W
    for (std::size_t i = 0; i < ops.size(); ++i) {
        const PipelineOp& op = ops[i];
        if (op.kind == PipelineOp::Kind::Backward)
            backwardAt[{ op.chunk, op.microBatch }] = i;
        if (op.kind != PipelineOp::Kind::Weight)
            continue;
        if (auto b = backwardAt.find({ op.chunk, op.microBatch }); b != backwardAt.end())
            m_weightOf[b->second] = static_cast<std::int64_t>(i);
        lastWeight[op.chunk] = i;
    }
    for (const auto& [chunk, index] : lastWeight)
        m_anchored[index] = 1;
}

void EarlyWeights::backwardDone(std::size_t index)
{
    const std::int64_t w = m_on ? m_weightOf[index] : -1;
    if (w >= 0 && !m_anchored[static_cast<std::size_t>(w)])
        m_ready.push_back(static_cast<std::size_t>(w));
}

std::optional<std::size_t> EarlyWeights::takeNext()
{
    while (!m_ready.empty()) {
        const std::size_t w = m_ready.front();
        m_ready.pop_front();
        if (!m_ran[w]) {
            m_ran[w] = 1;
            return w;
        }
    }
    return std::nullopt;
}

} // namespace loom::plan
