#include "engine/plan/Schedule.h"

#include "engine/plan/ZeroBubble.h"

#include <algorithm>

namespace loom::plan {

namespace {

using Kind = PipelineOp::Kind;

std::vector<PipelineOp> gpipe(std::int64_t m)
{
    std::vector<PipelineOp> ops;
    for (std::int64_t i = 0; i < m; ++i)
        ops.push_back({ Kind::Forward, static_cast<std::int32_t>(i), 0 });
    for (std::int64_t i = 0; i < m; ++i)
        ops.push_back({ Kind::Backward, static_cast<std::int32_t>(i), 0 });
    return ops;
}

std::vector<PipelineOp> oneFOneB(std::int64_t p, std::int64_t r, std::int64_t m)
{
    std::vector<PipelineOp> ops;
    const std::int64_t warmup = std::min(p - r - 1, m);
    std::int64_t nextF = 0, nextB = 0;
    for (; nextF < warmup; ++nextF)
        ops.push_back({ Kind::Forward, static_cast<std::int32_t>(nextF), 0 });
    while (nextF < m) {
        ops.push_back({ Kind::Forward, static_cast<std::int32_t>(nextF++), 0 });
        ops.push_back({ Kind::Backward, static_cast<std::int32_t>(nextB++), 0 });
    }
    while (nextB < m)
        ops.push_back({ Kind::Backward, static_cast<std::int32_t>(nextB++), 0 });
    return ops;
}

// Megatron-LM's interleaved schedule with micro-batch groups of N: the k-th forward of a rank is
// micro-batch (k / (N·v))·N + k mod N of chunk (k / N) mod v, except in the last group when N does not
// divide m, which runs its m mod N micro-batches through every chunk in turn; the k-th backward walks the
// chunks in reverse. N = p is the original schedule.
std::vector<PipelineOp> interleaved(std::int64_t p, std::int64_t v, std::int64_t r, std::int64_t m, std::int64_t n)
{
    const std::int64_t total = m * v, fullGroups = m / n;
    auto place = [&](std::int64_t k) { // (micro-batch, position of the chunk in the group's walk)
        if (k < fullGroups * n * v)
            return std::pair { (k / (n * v)) * n + k % n, (k / n) % v };
        const std::int64_t rest = m - fullGroups * n, j = k - fullGroups * n * v;
        return std::pair { fullGroups * n + j % rest, j / rest };
    };
    auto forward = [&](std::int64_t k) {
        const auto [mb, c] = place(k);
        return PipelineOp::of(Kind::Forward, mb, c);
    };
    auto backward = [&](std::int64_t k) {
        const auto [mb, c] = place(k);
        return PipelineOp::of(Kind::Backward, mb, v - 1 - c);
    };
    std::int64_t warmup = m == p ? total : std::min(total, (p - r - 1) * 2 + (v - 1) * n);
    std::vector<PipelineOp> ops;
    std::int64_t nextF = 0, nextB = 0;
    for (; nextF < warmup; ++nextF)
        ops.push_back(forward(nextF));
    while (nextF < total) {
        ops.push_back(forward(nextF++));
        ops.push_back(backward(nextB++));
    }
    while (nextB < total)
        ops.push_back(backward(nextB++));
    return ops;
}

} // namespace

Schedule::Schedule(ScheduleKind kind, std::int64_t pp, std::int64_t vpp, std::int64_t microBatches, std::int64_t group,
    const ScheduleCosts& costs)
    : m_kind(kind)
    , m_pp(std::max<std::int64_t>(pp, 1))
    , m_vpp(std::max<std::int64_t>(vpp, 1))
    , m_m(std::max<std::int64_t>(microBatches, 1))
    , m_group(std::clamp<std::int64_t>(group > 0 ? group : m_pp, 1, m_m))
{
    m_v = plan::vShaped(m_kind);
    if (m_v)
        m_vpp = 2;
    else if (m_kind != ScheduleKind::Interleaved)
        m_vpp = 1;
    if (m_kind == ScheduleKind::DualPipe) {
        m_ops = dualPipeOps(m_pp, m_m);
        return;
    }
    if (splitsBackward()) {
        m_ops = zeroBubbleOps(m_kind, m_pp, m_m, costs);
        return;
    }
    for (std::int64_t r = 0; r < m_pp; ++r) {
        switch (m_kind) {
        case ScheduleKind::GPipe:
            m_ops.push_back(gpipe(m_m));
            break;
        case ScheduleKind::OneFOneB:
            m_ops.push_back(oneFOneB(m_pp, r, m_m));
            break;
        case ScheduleKind::Interleaved:
            m_ops.push_back(interleaved(m_pp, m_vpp, r, m_m, m_group));
            break;
        default: // the split schedules above
            break;
        }
    }
}

Schedule Schedule::forLayout(const Layout& layout)
{
    const auto& p = layout.parallel;
    const bool timed = plan::splitsBackward(p.schedule) && p.schedule != ScheduleKind::DualPipe && p.pp > 1;
    Schedule s(
        p.schedule, p.pp, p.vpp, p.microBatches(), p.microbatchGroup, timed ? scheduleCosts(layout) : ScheduleCosts {});
    s.setWeightFill(p.weightFill);
    return s;
}

const std::vector<PipelineOp>& Schedule::opsOf(std::int64_t pipelineRank) const
{
    return m_ops.at(static_cast<std::size_t>(pipelineRank));
}

std::int64_t Schedule::peakInFlight(std::int64_t pipelineRank) const
{
    std::int64_t live = 0, peak = 0;
    const Kind frees = splitsBackward() ? Kind::Weight : Kind::Backward;
    for (const auto& op : opsOf(pipelineRank)) {
        live += op.kind == Kind::Forward ? 1 : op.kind == frees ? -1 : 0;
        peak = std::max(peak, live);
    }
    return peak;
}

double Schedule::peakInFlight(std::int64_t pipelineRank, const std::vector<double>& chunkWeight) const
{
    double live = 0, peak = 0;
    const Kind frees = splitsBackward() ? Kind::Weight : Kind::Backward;
    for (const auto& op : opsOf(pipelineRank)) {
        const double w = chunkWeight.at(static_cast<std::size_t>(op.chunk));
        live += op.kind == Kind::Forward ? w : op.kind == frees ? -w : 0;
        peak = std::max(peak, live);
    }
    return peak;
}

double Schedule::peakInFlight(
    std::int64_t pipelineRank, const std::vector<double>& chunkWeight, const std::vector<double>& chunkDeferred) const
{
    if (!splitsBackward())
        return peakInFlight(pipelineRank, chunkWeight);
    double live = 0, peak = 0;
    for (const auto& op : opsOf(pipelineRank)) {
        const auto c = static_cast<std::size_t>(op.chunk);
        if (op.kind == Kind::Forward) {
            live += chunkWeight.at(c);
        } else if (op.kind == Kind::Backward) {
            live += chunkDeferred.at(c);
            peak = std::max(peak, live);
            live -= chunkWeight.at(c);
        } else {
            live -= chunkDeferred.at(c);
        }
        peak = std::max(peak, live);
    }
    return peak;
}

std::string Schedule::toString() const
{
    std::string out;
    for (std::int64_t r = 0; r < m_pp; ++r) {
        out += "rank " + std::to_string(r) + ":";
        for (const auto& op : opsOf(r)) {
            out += op.kind == Kind::Forward ? " F" : op.kind == Kind::Backward ? " B" : " W";
            out += std::to_string(op.microBatch);
            if (m_vpp > 1)
                out += "." + std::to_string(op.chunk);
        }
        out += "\n";
    }
    return out;
}

} // namespace loom::plan
