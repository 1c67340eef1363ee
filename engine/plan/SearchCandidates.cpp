#include "engine/plan/SearchCandidates.h"

#include "engine/plan/Formulas.h"
#include "engine/plan/LayoutValidator.h"

#include <algorithm>

namespace loom::plan::searching {

std::vector<GridChoice> gridChoices(const ModelSpec& m, std::int64_t devices, const std::vector<std::int64_t>& cps)
{
    std::vector<GridChoice> out;
    for (const std::int64_t tp : validTensorParallelDegrees(m))
        for (const std::int64_t cp : cps) {
            if (devices % (tp * cp))
                continue;
            const std::int64_t rest = devices / (tp * cp);
            for (std::int64_t pp = 1; pp <= std::min(m.layers, rest); ++pp)
                if (rest % pp == 0)
                    out.push_back({ tp, cp, pp, rest / pp });
        }
    return out;
}

std::vector<ScheduleChoice> scheduleChoices(const ModelSpec& m, std::int64_t pp, std::int64_t micro)
{
    std::vector<ScheduleChoice> out;
    out.push_back({ ScheduleKind::GPipe, 1, {} });
    out.push_back({ ScheduleKind::OneFOneB, 1, {} });
    if (pp > 1 && micro % pp == 0)
        for (std::int64_t v : { 2, 3, 4, 6, 8 }) {
            if (m.layers % (pp * v) == 0)
                out.push_back({ ScheduleKind::Interleaved, v, {} });
            else if (auto split = accountedStageSplit(m.layers, pp * v); !split.empty())
                out.push_back({ ScheduleKind::Interleaved, v, std::move(split) });
        }
    // The zero-bubble schedules: ZB-H1 and ZB-H2 on one chunk a rank, ZB-V and DualPipe on two in a V
    // (layers over 2·pp; DualPipe with at least 2·pp micro-batches).
    if (pp > 1) {
        out.push_back({ ScheduleKind::ZbH1, 1, {} });
        out.push_back({ ScheduleKind::ZbH2, 1, {} });
        if (m.layers % (2 * pp) == 0) {
            out.push_back({ ScheduleKind::ZbV, 2, {} });
            if (micro >= 2 * pp)
                out.push_back({ ScheduleKind::DualPipe, 2, {} });
        }
    }
    return out;
}

std::vector<MemoryChoice> memoryChoices(std::int64_t tp, std::int64_t cp)
{
    std::vector<MemoryChoice> out;
    for (bool sp : { false, true }) {
        if (sp && tp == 1)
            continue;
        for (Attention attention : { Attention::Flash, Attention::Materialized })
            for (Recompute rc : { Recompute::None, Recompute::Selective, Recompute::Full }) {
                // selective recomputation of flash attention recomputes nothing more; ring attention (cp > 1)
                // never materialises the scores
                if (attention == Attention::Flash && rc == Recompute::Selective)
                    continue;
                if (cp > 1 && attention == Attention::Materialized)
                    continue;
                out.push_back({ sp, attention, rc });
            }
    }
    return out;
}

std::vector<ExpertChoice> expertChoices(const ModelSpec& m, const GridChoice& g)
{
    std::vector<ExpertChoice> out { { 1, 0 } };
    if (!m.isMoe())
        return out;
    const std::int64_t ranks = g.tp * g.cp * g.dp; // a stage's ranks, which Megatron-Core's grid carves
    for (std::int64_t ep = 2; ep <= std::min(m.experts, ranks); ++ep) {
        if (m.experts % ep != 0)
            continue;
        if (g.dp % ep == 0)
            out.push_back({ ep, 0 });
        else if (ranks % ep == 0)
            out.push_back({ ep, 1 });
    }
    return out;
}

double memoryFloorGB(const Layout& base, const GridChoice& g, int zero)
{
    const ModelSpec& m = base.model;
    const double experts = m.isMoe() ? double(m.moeLayerCount() * m.experts * m.expertParameters()) : 0.0;
    const double perDevice = (double(m.parameterCount()) - experts) / double(g.tp * g.pp);
    const ModelStateBytes state = modelStateBytesPerParameter(base.precision, base.optimizer, zero, g.dp * g.cp);
    return perDevice * state.total() / 1e9 + 0.05 * base.cluster.device.memoryGB;
}

} // namespace loom::plan::searching
