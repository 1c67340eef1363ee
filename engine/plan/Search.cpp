#include "engine/plan/Search.h"

#include "engine/plan/LayoutValidator.h"
#include "engine/plan/SearchCandidates.h"
#include "engine/plan/TextUtil.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace loom::plan {

std::string describeCandidate(const Layout& l)
{
    const auto& p = l.parallel;
    std::string s = "tp=" + std::to_string(p.tp) + (p.cp > 1 ? " cp=" + std::to_string(p.cp) : std::string())
        + " pp=" + std::to_string(p.pp) + " dp=" + std::to_string(p.dp) + " " + std::string(toString(p.schedule));
    if (p.schedule == ScheduleKind::Interleaved)
        s += " vpp=" + std::to_string(p.vpp);
    if (!p.stages.empty())
        s += " stages=embedding+head-as-layers"; // accountedStageSplit
    s += " mb=" + std::to_string(p.microBatch) + " zero=" + std::to_string(l.memory.zero)
        + " recompute=" + std::string(toString(l.memory.recompute));
    if (p.sp)
        s += " sp";
    if (p.ep > 1)
        s += " ep=" + std::to_string(p.ep);
    if (p.expertTp > 0)
        s += " expert_tp=" + std::to_string(p.expertTp); // Megatron-Core's expert grid
    if (l.memory.attention != Attention::Flash)
        s += " attention=" + std::string(toString(l.memory.attention));
    if (l.memory.efficientNorm)
        s += " efficient-norm";
    return s;
}

namespace {

std::string seconds(double s)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f s", s);
    return buf;
}

// Why `a` beats `b`: the part of the step where they differ most.
std::string explain(const SearchCandidate& a, const SearchCandidate& b)
{
    const Prediction &x = a.prediction, &y = b.prediction;
    struct Part {
        const char* what;
        double a, b;
    };
    const Part parts[]
        = { { "compute", x.compute, y.compute }, { "exposed TP communication", x.tpExposed, y.tpExposed },
              { "exposed CP (ring attention) communication", x.cpExposed, y.cpExposed },
              { "exposed PP communication", x.ppExposed, y.ppExposed }, { "pipeline bubble", x.bubble, y.bubble },
              { "exposed DP communication", x.dpExposed, y.dpExposed }, { "optimizer step", x.optimizer, y.optimizer },
              { "expert all-to-all", x.epExposed, y.epExposed } };
    const Part* best = &parts[0];
    for (const Part& p : parts)
        if (p.b - p.a > best->b - best->a)
            best = &p;
    char gain[32];
    std::snprintf(gain, sizeof gain, "%.1f %%", 100.0 * (x.tokensPerSecond / y.tokensPerSecond - 1.0));
    return describeCandidate(a.layout) + " is " + gain + " faster than " + describeCandidate(b.layout)
        + " mainly because its " + best->what + " takes " + seconds(best->a) + " against " + seconds(best->b)
        + " per step";
}

} // namespace

std::vector<std::int64_t> contextParallelDegrees(const ModelSpec& m)
{
    std::vector<std::int64_t> out { 1 };
    if (m.seqLen < kLongSequence)
        return out;
    for (std::int64_t cp = 2; cp <= 32; cp *= 2)
        if (m.seqLen % (2 * cp) == 0)
            out.push_back(cp);
    return out;
}

namespace {

void checkRequest(const SearchRequest& r)
{
    if (r.cluster.autoDevices())
        throw std::invalid_argument("cluster " + r.cluster.name
            + " has no fixed number of devices per node; search needs a "
              "cluster profile with devices_per_node");
    // The same bound as validation: no layout of more ranks is valid, so none is enumerated or reported (a
    // million nodes used to run for minutes and rank 67 M-device layouts).
    if (r.nodes < 1 || r.nodes > kMaxRanks || r.nodes * r.cluster.devicesPerNode > kMaxRanks)
        throw std::invalid_argument(std::to_string(r.nodes) + " nodes of " + std::to_string(r.cluster.devicesPerNode)
            + " devices is more than Loom's limit of " + std::to_string(kMaxRanks)
            + " ranks, which no valid layout exceeds; search at most "
            + std::to_string(std::max<std::int64_t>(1, kMaxRanks / r.cluster.devicesPerNode)) + " nodes of "
            + r.cluster.name);
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

struct Choice {
    ParallelSpec parallel;
    MemorySpec memory;
    Estimate estimate;
};

// The candidate generator: every valid layout, estimated, those that fit kept. Families whose memory floor
// (model states alone) exceeds the device are skipped whole, before any estimate.
class Enumeration {
public:
    Enumeration(const SearchRequest& r, SearchResult& out)
        : m_request(r)
        , m_out(out)
        , m_work(baseLayout(r))
    {
    }

    std::vector<Choice> run()
    {
        const ModelSpec& m = m_request.model;
        const std::int64_t devices = m_request.nodes * m_request.cluster.devicesPerNode;
        const auto grids = searching::gridChoices(m, devices, contextParallelDegrees(m));
        for (std::size_t i = 0; i < grids.size() && !m_out.cancelled; ++i) {
            if (!report(0.7 * double(i) / double(grids.size())))
                break;
            grid(grids[i]);
        }
        return std::move(m_choices);
    }

    bool report(double fraction)
    {
        if (!m_out.cancelled && m_request.progress && !m_request.progress(fraction))
            m_out.cancelled = true;
        return !m_out.cancelled;
    }

private:
    void grid(const searching::GridChoice& g)
    {
        const auto experts = searching::expertChoices(m_request.model, g);
        const auto memories = searching::memoryChoices(g.tp, g.cp);
        bool fitsAtAll[4];
        for (int zero = 0; zero <= 3; ++zero)
            fitsAtAll[zero] = searching::memoryFloorGB(m_work, g, zero) <= m_request.cluster.device.memoryGB;
        for (std::int64_t mb = 1; mb <= 64; mb *= 2) {
            if (m_request.globalBatch % (mb * g.dp))
                continue;
            const auto schedules
                = searching::scheduleChoices(m_request.model, g.pp, m_request.globalBatch / (mb * g.dp));
            for (const auto& schedule : schedules)
                for (int zero = 0; zero <= 3; ++zero) {
                    if (zero >= 1 && g.dp * g.cp == 1)
                        continue;
                    const std::size_t family = memories.size() * experts.size();
                    if (!fitsAtAll[zero]) {
                        m_out.pruned += family;
                        continue;
                    }
                    place(g, mb, schedule, zero);
                    for (const auto& expert : experts) {
                        if (!lightestFits(expert)) {
                            m_out.pruned += memories.size();
                            continue;
                        }
                        for (const auto& memory : memories)
                            evaluate(memory, expert);
                    }
                }
        }
    }

    void place(const searching::GridChoice& g, std::int64_t mb, const searching::ScheduleChoice& s, int zero)
    {
        ParallelSpec& p = m_work.parallel; // one layout, changed in place: no copy per candidate
        p.tp = g.tp;
        p.cp = g.cp;
        p.pp = g.pp;
        p.dp = g.dp;
        p.microBatch = mb;
        p.schedule = s.kind;
        p.vpp = s.vpp;
        p.stages = s.stages;
        m_work.memory.zero = zero;
    }

    // Whether the lightest memory choice of the family fits: sequence parallel (tp > 1), flash attention and
    // memory-efficient norms, with no recomputation or full (either can be the lighter, full keeping one
    // layer whole for its backward). Every other choice holds at least as much (Formulas.cpp,
    // layerActivationBytes), so if neither fits, none of the family does.
    bool lightestFits(const searching::ExpertChoice& expert)
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

    void evaluate(const searching::MemoryChoice& memory, const searching::ExpertChoice& expert)
    {
        Layout& l = m_work;
        // Megatron-Core's expert grid needs sequence parallelism with tensor parallelism.
        if (expert.expertTp > 0 && l.parallel.tp > 1 && !memory.sp)
            return;
        l.parallel.sp = memory.sp;
        l.memory.attention = memory.attention;
        l.memory.recompute = memory.recompute;
        l.parallel.ep = expert.ep;
        l.parallel.expertTp = expert.expertTp;
        l.memory.efficientNorm = false;
        ++m_out.evaluated;
        Estimate e = estimate(l);
        // Memory-efficient norms cost no time in the model, so they are tried only where the layout does not
        // fit without them.
        if (!e.fits && memory.recompute != Recompute::Full) {
            l.memory.efficientNorm = true;
            ++m_out.evaluated;
            e = estimate(l);
        }
        if (e.fits)
            m_choices.push_back({ l.parallel, l.memory, e });
    }

    const SearchRequest& m_request;
    SearchResult& m_out;
    Layout m_work;
    std::vector<Choice> m_choices;
};

// Layouts the planner cannot replay have no prediction to rank by: left out and counted, so the advice can
// name the cause.
void dropUnsimulatable(const Layout& base, std::vector<Choice>& choices, SearchResult& out)
{
    Layout probe = base; // one layout changed in place: no copy per candidate
    const auto replayable = std::partition(choices.begin(), choices.end(), [&probe](const Choice& c) {
        probe.parallel = c.parallel;
        probe.memory = c.memory;
        return simulatable(probe);
    });
    out.unsimulatable = static_cast<std::size_t>(choices.end() - replayable);
    choices.erase(replayable, choices.end());
}

// The ranking: the best few by estimate replayed in full (the estimate's closed-form pipeline can misorder
// close ones), then ordered by the replay's tokens/s.
std::vector<SearchCandidate> rank(
    const SearchRequest& r, const Layout& base, std::vector<Choice>& choices, Enumeration& progress)
{
    const std::size_t keep = std::min<std::size_t>(choices.size(), static_cast<std::size_t>(std::max(r.top, 2)) * 3);
    std::partial_sort(choices.begin(), choices.begin() + static_cast<std::ptrdiff_t>(keep), choices.end(),
        [](const Choice& a, const Choice& b) { return a.estimate.tokensPerSecond > b.estimate.tokensPerSecond; });
    std::vector<SearchCandidate> fitting;
    for (std::size_t i = 0; i < keep; ++i) {
        Layout l = base;
        l.parallel = choices[i].parallel;
        l.memory = choices[i].memory;
        fitting.push_back({ std::move(l), choices[i].estimate, {} });
    }
    for (std::size_t i = 0; i < fitting.size(); ++i) {
        auto& c = fitting[i];
        if (!progress.report(0.7 + 0.3 * double(i) / double(fitting.size())))
            return {};
        if (simulatable(c.layout))
            c.prediction = predict(c.layout, false);
        else
            c.prediction.fits = false; // not timed: left out below rather than ranked with a zero step time
    }
    std::sort(fitting.begin(), fitting.end(), [](const SearchCandidate& a, const SearchCandidate& b) {
        return a.prediction.tokensPerSecond > b.prediction.tokensPerSecond;
    });
    fitting.erase(
        std::remove_if(fitting.begin(), fitting.end(), [](const SearchCandidate& c) { return !c.prediction.fits; }),
        fitting.end());
    return fitting;
}

} // namespace

SearchResult search(const SearchRequest& r)
{
    checkRequest(r);
    SearchResult out;
    Enumeration enumeration(r, out);
    std::vector<Choice> choices = enumeration.run();
    out.fitting = choices.size();
    if (choices.empty() || out.cancelled)
        return out;
    const Layout base = baseLayout(r);
    dropUnsimulatable(base, choices, out);
    if (choices.empty())
        return out;
    std::vector<SearchCandidate> fitting = rank(r, base, choices, enumeration);
    if (out.cancelled)
        return out;
    if (fitting.size() >= 2)
        out.why = explain(fitting[0], fitting[1]);
    if (fitting.size() > static_cast<std::size_t>(r.top))
        fitting.resize(static_cast<std::size_t>(r.top));
    out.ranked = std::move(fitting);
    enumeration.report(1.0);
    return out;
}

} // namespace loom::plan
