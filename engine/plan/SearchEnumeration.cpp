#include "engine/plan/SearchEnumeration.h"

#include "engine/plan/CostModel.h"
#include "engine/plan/CostModelDetail.h"

#include <algorithm>
#include <functional>

namespace loom::plan::searching {

namespace {

// Floors and estimates add the same terms in a different order: a floor counts as slower than the K-th best only
// past this relative margin, far above rounding and far below any difference between layouts.
constexpr double kFloorMargin = 1e-9;

} // namespace

bool rankedBefore(const Choice& a, const Choice& b)
{
    if (a.estimate.tokensPerSecond != b.estimate.tokensPerSecond)
        return a.estimate.tokensPerSecond > b.estimate.tokensPerSecond;
    if (a.estimate.memoryGB != b.estimate.memoryGB)
        return a.estimate.memoryGB < b.estimate.memoryGB;
    return a.order < b.order;
}

std::size_t orderForReplay(std::vector<Choice>& choices, std::size_t keep)
{
    keep = std::min(keep, choices.size());
    if (keep == 0)
        return 0;
    const auto cut = choices.begin() + static_cast<std::ptrdiff_t>(keep);
    std::partial_sort(choices.begin(), cut, choices.end(), rankedBefore);
    const double last = choices[keep - 1].estimate.tokensPerSecond;
    const auto tied
        = std::partition(cut, choices.end(), [last](const Choice& c) { return c.estimate.tokensPerSecond == last; });
    std::sort(cut, tied, rankedBefore);
    return keep + std::min(static_cast<std::size_t>(tied - cut), keep);
}

std::size_t replayedCount(const SearchRequest& r)
{
    return static_cast<std::size_t>(std::max(r.top, 2)) * 3;
}

double wholeModelSeconds(Layout& work, std::int64_t microBatches)
{
    ParallelSpec& p = work.parallel;
    p.pp = 1;
    p.vpp = 1;
    p.schedule = ScheduleKind::OneFOneB;
    p.stages.clear();
    p.ep = 1;
    p.expertTp = 0;
    work.memory.zero = 0;
    // The spans estimate() gives the TP and CP groups under the default order: they do not depend on pp.
    const std::int64_t D = work.cluster.autoDevices() ? p.worldSize() : work.cluster.devicesPerNode;
    const std::int64_t tc = p.tp * p.cp;
    const std::int64_t tpSpan = (p.tp > D || D % p.tp != 0) ? 2 : 1;
    const std::int64_t cpSpan = tc > D ? std::min(p.cp, (tc + D - 1) / D) : 1;
    const cost::Costs c = cost::computeCosts(work, tpSpan, 1, 1, microBatches, 1, cpSpan, 1);
    const StageCost& s = c.stage.front();
    double seconds = s.forward + s.backward - s.forwardDp - s.backwardDp - s.forwardEp - s.backwardEp;
    if (work.comm.tpCommOverlap) // the overlapped part is not linear in a stage's layers: left out
        seconds -= s.forwardTp + s.backwardTp;
    return seconds;
}

double stepTimeFloor(double wholeModel, std::int64_t microBatches, std::int64_t pp, std::int64_t chunks)
{
    return (double(microBatches) + double(pp - 1) / double(chunks)) * wholeModel / double(pp);
}

Layout baseLayout(const SearchRequest& r)
{
    Layout base;
    base.name = "search";
    base.model = r.model;
    base.modelProfile = r.modelProfile;
    base.cluster = r.cluster;
    base.clusterProfile = r.clusterProfile;
    base.nodes = r.nodes;
    base.precision = r.precision;
    base.parallel.globalBatch = r.globalBatch;
    return base;
}

Enumeration::Enumeration(const SearchRequest& r, SearchResult& out)
    : m_request(r)
    , m_out(out)
    , m_work(baseLayout(r))
    , m_keep(replayedCount(r))
    , m_tokensPerStep(double(r.globalBatch) * double(r.model.seqLen))
{
}

bool Enumeration::report(double fraction)
{
    if (!m_out.cancelled && m_request.progress && !m_request.progress(fraction))
        m_out.cancelled = true;
    return !m_out.cancelled;
}

std::vector<Choice> Enumeration::run()
{
    enumerate();
    if (!m_out.cancelled)
        estimateAll();
    return std::move(m_choices);
}

void Enumeration::enumerate()
{
    const ModelSpec& m = m_request.model;
    const std::int64_t devices = m_request.nodes * m_request.cluster.devicesPerNode;
    for (const GridChoice& g : gridChoices(m, devices, contextParallelDegrees(m)))
        m_grids.push_back({ g, expertChoices(m, g), memoryChoices(g.tp, g.cp) });
    for (std::uint32_t i = 0; i < m_grids.size(); ++i) {
        if (!report(0.1 * double(i) / double(m_grids.size())))
            return;
        grid(i);
    }
}

// Every candidate of a grid, in the order the search always enumerated them, with its step-time floor. A ZeRO
// stage whose model states alone exceed the device is skipped whole (counted as pruned).
void Enumeration::grid(std::uint32_t index)
{
    const GridInfo& info = m_grids[index];
    const GridChoice& g = info.grid;
    bool fitsAtAll[4];
    for (int zero = 0; zero <= 3; ++zero)
        fitsAtAll[zero] = memoryFloorGB(m_work, g, zero) <= m_request.cluster.device.memoryGB;
    for (std::int64_t mb = 1; mb <= 64; mb *= 2) {
        if (m_request.globalBatch % (mb * g.dp))
            continue;
        const std::int64_t micro = m_request.globalBatch / (mb * g.dp);
        Batch batch { index, mb, scheduleChoices(m_request.model, g.pp, micro), {} };
        ParallelSpec& p = m_work.parallel;
        p.tp = g.tp;
        p.cp = g.cp;
        p.dp = g.dp;
        p.microBatch = mb;
        for (const MemoryChoice& memory : info.memories) {
            p.sp = memory.sp;
            m_work.memory.attention = memory.attention;
            m_work.memory.recompute = memory.recompute;
            m_work.memory.efficientNorm = false;
            batch.wholeModel.push_back(wholeModelSeconds(m_work, micro));
        }
        const auto batchIndex = static_cast<std::uint32_t>(m_batches.size());
        for (std::size_t s = 0; s < batch.schedules.size(); ++s) {
            const std::int64_t chunks = scheduleChunks(batch.schedules[s].kind, batch.schedules[s].vpp);
            for (int zero = 0; zero <= 3; ++zero) {
                if (zero >= 1 && g.dp * g.cp == 1)
                    continue;
                if (!fitsAtAll[zero]) {
                    m_out.pruned += info.memories.size() * info.experts.size();
                    continue;
                }
                for (std::size_t e = 0; e < info.experts.size(); ++e) {
                    const auto family = static_cast<std::uint32_t>(m_families.size());
                    m_families.push_back({ batchIndex, std::uint16_t(s), std::uint16_t(e), std::int8_t(zero), -1 });
                    for (std::size_t k = 0; k < info.memories.size(); ++k) {
                        // Megatron-Core's expert grid needs sequence parallelism with tensor parallelism.
                        if (info.experts[e].expertTp > 0 && g.tp > 1 && !info.memories[k].sp)
                            continue;
                        const double floor = stepTimeFloor(batch.wholeModel[k], micro, g.pp, chunks);
                        m_pending.push_back(
                            { floor, static_cast<std::uint32_t>(m_pending.size()), family, std::uint16_t(k) });
                    }
                }
            }
        }
        m_batches.push_back(std::move(batch));
    }
}

// Estimates the candidates: all of them in enumeration order (request.exhaustive), else by rising floor until
// the next floor is slower than the K-th best replayable estimate, which no candidate left can then beat.
void Enumeration::estimateAll()
{
    const auto byFloor
        = [](const Pending& a, const Pending& b) { return a.floor != b.floor ? a.floor < b.floor : a.order < b.order; };
    // Sorted a slice at a time (the search usually stops within its first few thousand floors): the next
    // slice's smallest floors are selected, then sorted.
    std::size_t sorted = m_request.exhaustive ? m_pending.size() : 0;
    for (std::size_t i = 0; i < m_pending.size(); ++i) {
        if (i % 1024 == 0 && !report(0.1 + 0.6 * double(i) / double(m_pending.size())))
            return;
        if (i == sorted) {
            const auto first = m_pending.begin() + static_cast<std::ptrdiff_t>(i);
            const auto last
                = first + static_cast<std::ptrdiff_t>(std::min(m_pending.size() - i, std::max<std::size_t>(4096, i)));
            std::nth_element(first, last - 1, m_pending.end(), byFloor);
            std::sort(first, last, byFloor);
            sorted = static_cast<std::size_t>(last - m_pending.begin());
        }
        if (!m_request.exhaustive && !beatsBest(m_pending[i].floor)) {
            for (std::size_t j = i; j < m_pending.size(); ++j)
                m_out.bounded += m_families[m_pending[j].family].lightest != 0 ? 1 : 0;
            return;
        }
        candidate(m_pending[i]);
    }
}

void Enumeration::candidate(const Pending& pending)
{
    Family& f = m_families[pending.family];
    if (f.lightest == 0)
        return; // already counted as pruned with its family
    const GridInfo& info = m_grids[m_batches[f.batch].grid];
    const ExpertChoice& expert = info.experts[f.expert];
    place(f);
    if (f.lightest < 0) {
        f.lightest = lightestFits(expert) ? 1 : 0;
        if (f.lightest == 0) {
            m_out.pruned += info.memories.size();
            return;
        }
    }
    evaluate(info.memories[pending.memory], expert, pending.order);
}

void Enumeration::place(const Family& f)
{
    const Batch& batch = m_batches[f.batch];
    const GridChoice& g = m_grids[batch.grid].grid;
    const ScheduleChoice& s = batch.schedules[f.schedule];
    ParallelSpec& p = m_work.parallel; // one layout, changed in place: no copy per candidate
    p.tp = g.tp;
    p.cp = g.cp;
    p.pp = g.pp;
    p.dp = g.dp;
    p.microBatch = batch.microBatch;
    p.schedule = s.kind;
    p.vpp = s.vpp;
    if (p.stages != s.stages)
        p.stages = s.stages;
    m_work.memory.zero = f.zero;
}

// Whether the lightest memory choice of the family fits: sequence parallel (tp > 1), flash attention and
// memory-efficient norms, with no recomputation or full (either can be the lighter, full keeping one layer whole
// for its backward). Every other choice holds at least as much (Formulas.cpp, layerActivationBytes), so if
// neither fits, none of the family does.
bool Enumeration::lightestFits(const ExpertChoice& expert)
{
    Layout& l = m_work;
    l.parallel.sp = l.parallel.tp > 1;
    l.parallel.ep = expert.ep;
    l.parallel.expertTp = expert.expertTp;
    l.memory.attention = Attention::Flash;
    l.memory.efficientNorm = true;
    for (Recompute rc : { Recompute::None, Recompute::Full }) {
        l.memory.recompute = rc;
        if (estimate(l).fits)
            return true;
    }
    return false;
}

void Enumeration::evaluate(const MemoryChoice& memory, const ExpertChoice& expert, std::uint32_t order)
{
    Layout& l = m_work;
    l.parallel.sp = memory.sp;
    l.memory.attention = memory.attention;
    l.memory.recompute = memory.recompute;
    l.parallel.ep = expert.ep;
    l.parallel.expertTp = expert.expertTp;
    l.memory.efficientNorm = false;
    ++m_out.evaluated;
    Estimate e = estimate(l);
    // Memory-efficient norms cost no time in the model, so they are tried only where the layout does not fit
    // without them.
    if (!e.fits && memory.recompute != Recompute::Full) {
        l.memory.efficientNorm = true;
        ++m_out.evaluated;
        e = estimate(l);
    }
    if (!e.fits)
        return;
    m_choices.push_back({ l.parallel, l.memory, e, order });
    if (simulatable(l)) // only the replayable ones are ranked, so only they set the bar
        keepBest(e.tokensPerSecond);
}

void Enumeration::keepBest(double tokensPerSecond)
{
    if (m_best.size() < m_keep) {
        m_best.push_back(tokensPerSecond);
        std::push_heap(m_best.begin(), m_best.end(), std::greater<>());
    } else if (tokensPerSecond > m_best.front()) {
        std::pop_heap(m_best.begin(), m_best.end(), std::greater<>());
        m_best.back() = tokensPerSecond;
        std::push_heap(m_best.begin(), m_best.end(), std::greater<>());
    }
}

// Whether a candidate whose step takes at least `floorSeconds` could still be among the best replayedCount: not
// once that many replayable candidates are faster than its floor allows.
bool Enumeration::beatsBest(double floorSeconds) const
{
    if (m_best.size() < m_keep || floorSeconds <= 0)
        return true;
    return m_tokensPerStep / floorSeconds >= m_best.front() * (1.0 - kFloorMargin);
}

} // namespace loom::plan::searching
