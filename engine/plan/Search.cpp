#include "engine/plan/Search.h"

#include "engine/plan/LayoutValidator.h"
#include "engine/plan/TextUtil.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <tuple>

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

SearchResult search(const SearchRequest& r)
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
    const std::int64_t devices = r.nodes * r.cluster.devicesPerNode;
    const ModelSpec& m = r.model;
    SearchResult out;
    std::vector<SearchCandidate> fitting;
    Layout base;
    base.name = "search";
    base.model = m;
    base.modelProfile = r.modelProfile;
    base.cluster = r.cluster;
    base.clusterProfile = r.clusterProfile;
    base.nodes = r.nodes;
    base.precision = r.precision;
    base.parallel.globalBatch = r.globalBatch;
    const auto degrees = validTensorParallelDegrees(m);
    Layout work = base;
    struct Choice {
        ParallelSpec parallel;
        MemorySpec memory;
        Estimate estimate;
    };
    std::vector<Choice> choices;
    auto report = [&](double fraction) {
        if (!out.cancelled && r.progress && !r.progress(fraction))
            out.cancelled = true;
        return !out.cancelled;
    };
    const std::vector<std::int64_t> cps = contextParallelDegrees(m);
    for (std::size_t ti = 0; ti < degrees.size() && !out.cancelled; ++ti)
        for (const std::int64_t cp : cps) {
            const std::int64_t tp = degrees[ti];
            if (devices % (tp * cp))
                continue;
            const std::int64_t maxPp = std::min(m.layers, devices / (tp * cp));
            for (std::int64_t pp = 1; pp <= maxPp; ++pp) {
                if ((devices / (tp * cp)) % pp)
                    continue;
                if (!report(0.7 * (double(ti) + double(pp) / double(maxPp)) / double(degrees.size())))
                    break;
                const std::int64_t dp = devices / (tp * cp * pp);
                // MoE: every ep that divides both the experts and dp (expert groups are carved out of dp).
                std::vector<std::int64_t> eps { 1 };
                for (std::int64_t ep = 2; m.isMoe() && ep <= std::min(m.experts, dp); ++ep)
                    if (m.experts % ep == 0 && dp % ep == 0)
                        eps.push_back(ep);
                for (std::int64_t mb = 1; mb <= 64; mb *= 2) {
                    if (r.globalBatch % (mb * dp))
                        continue;
                    const std::int64_t micro = r.globalBatch / (mb * dp);
                    // (schedule, vpp, stages: empty for the even split, else Llama 3's split that counts the
                    // embedding and the LM head as a layer each, so the first and last chunk hold one fewer)
                    std::vector<std::tuple<ScheduleKind, std::int64_t, std::vector<StageRange>>> schedules;
                    schedules.emplace_back(ScheduleKind::GPipe, 1, std::vector<StageRange> {});
                    schedules.emplace_back(ScheduleKind::OneFOneB, 1, std::vector<StageRange> {});
                    if (pp > 1 && micro % pp == 0)
                        for (std::int64_t v : { 2, 3, 4, 6, 8 }) {
                            if (m.layers % (pp * v) == 0)
                                schedules.emplace_back(ScheduleKind::Interleaved, v, std::vector<StageRange> {});
                            else if (auto split = accountedStageSplit(m.layers, pp * v); !split.empty())
                                schedules.emplace_back(ScheduleKind::Interleaved, v, std::move(split));
                        }
                    // The zero-bubble schedules: ZB-H1 and ZB-H2 on one chunk a rank, ZB-V and DualPipe on two
                    // in a V (layers over 2·pp; DualPipe with at least 2·pp micro-batches).
                    if (pp > 1) {
                        schedules.emplace_back(ScheduleKind::ZbH1, 1, std::vector<StageRange> {});
                        schedules.emplace_back(ScheduleKind::ZbH2, 1, std::vector<StageRange> {});
                        if (m.layers % (2 * pp) == 0) {
                            schedules.emplace_back(ScheduleKind::ZbV, 2, std::vector<StageRange> {});
                            if (micro >= 2 * pp)
                                schedules.emplace_back(ScheduleKind::DualPipe, 2, std::vector<StageRange> {});
                        }
                    }
                    for (const auto& [schedule, vpp, stages] : schedules) {
                        work.parallel.stages = stages; // the same for every candidate below
                        for (int zero = 0; zero <= 3; ++zero) {
                            if (zero >= 1 && dp * cp == 1)
                                continue;
                            for (bool sp : { false, true }) {
                                if (sp && tp == 1)
                                    continue;
                                for (Attention attention : { Attention::Flash, Attention::Materialized })
                                    for (Recompute rc : { Recompute::None, Recompute::Selective, Recompute::Full }) {
                                        // selective recomputation of flash attention recomputes nothing more;
                                        // ring attention (cp > 1) never materialises the scores
                                        if (attention == Attention::Flash && rc == Recompute::Selective)
                                            continue;
                                        if (cp > 1 && attention == Attention::Materialized)
                                            continue;
                                        Layout& l = work; // one layout, changed in place: no copy per candidate
                                        l.parallel.tp = tp;
                                        l.parallel.cp = cp;
                                        l.parallel.pp = pp;
                                        l.parallel.dp = dp;
                                        l.parallel.vpp = vpp;
                                        l.parallel.microBatch = mb;
                                        l.parallel.schedule = schedule;
                                        l.parallel.sp = sp;
                                        l.memory.zero = zero;
                                        l.memory.recompute = rc;
                                        l.memory.attention = attention;
                                        for (std::int64_t ep : eps) { // expert parallelism: 1 for dense models
                                            l.parallel.ep = ep;
                                            l.memory.efficientNorm = false;
                                            ++out.evaluated;
                                            Estimate e = estimate(l);
                                            // Memory-efficient norms cost no time in the model, so they are
                                            // tried only where the layout does not fit without them.
                                            if (!e.fits && rc != Recompute::Full) {
                                                l.memory.efficientNorm = true;
                                                ++out.evaluated;
                                                e = estimate(l);
                                            }
                                            if (e.fits)
                                                choices.push_back({ l.parallel, l.memory, e });
                                        }
                                    }
                            }
                        }
                    }
                }
            }
        }
    out.fitting = choices.size();
    if (choices.empty() || out.cancelled)
        return out;
    // Layouts the planner cannot replay have no prediction to rank by: leave them out, and count them so
    // the advice can name the cause.
    Layout probe = base; // one layout changed in place: no copy per candidate
    const auto replayable = std::partition(choices.begin(), choices.end(), [&probe](const Choice& c) {
        probe.parallel = c.parallel;
        probe.memory = c.memory;
        return simulatable(probe);
    });
    out.unsimulatable = static_cast<std::size_t>(choices.end() - replayable);
    choices.erase(replayable, choices.end());
    if (choices.empty())
        return out;
    // Replay the best few in full; the estimate's closed-form pipeline can misorder close ones.
    const std::size_t keep = std::min<std::size_t>(choices.size(), static_cast<std::size_t>(std::max(r.top, 2)) * 3);
    std::partial_sort(choices.begin(), choices.begin() + static_cast<std::ptrdiff_t>(keep), choices.end(),
        [](const Choice& a, const Choice& b) { return a.estimate.tokensPerSecond > b.estimate.tokensPerSecond; });
    for (std::size_t i = 0; i < keep; ++i) {
        Layout l = base;
        l.parallel = choices[i].parallel;
        l.memory = choices[i].memory;
        fitting.push_back({ std::move(l), choices[i].estimate, {} });
    }
    for (std::size_t i = 0; i < fitting.size(); ++i) {
        auto& c = fitting[i];
        if (!report(0.7 + 0.3 * double(i) / double(fitting.size())))
            break;
        if (simulatable(c.layout)) {
            c.prediction = predict(c.layout, false);
        } else {
            c.prediction.fits = false; // not timed: left out below rather than ranked with a zero step time
        }
    }
    if (out.cancelled)
        return out;
    std::sort(fitting.begin(), fitting.end(), [](const SearchCandidate& a, const SearchCandidate& b) {
        return a.prediction.tokensPerSecond > b.prediction.tokensPerSecond;
    });
    fitting.erase(
        std::remove_if(fitting.begin(), fitting.end(), [](const SearchCandidate& c) { return !c.prediction.fits; }),
        fitting.end());
    if (fitting.size() >= 2)
        out.why = explain(fitting[0], fitting[1]);
    if (fitting.size() > static_cast<std::size_t>(r.top))
        fitting.resize(static_cast<std::size_t>(r.top));
    out.ranked = std::move(fitting);
    report(1.0);
    return out;
}

} // namespace loom::plan
