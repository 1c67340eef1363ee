#include "engine/plan/Search.h"

#include "engine/plan/LayoutValidator.h"
#include "engine/plan/SearchEnumeration.h"
#include "engine/plan/TextUtil.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace loom::plan {

using searching::Choice;
using searching::Enumeration;

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
// close ones), with those that tie with the last of them, then ordered by the replay's tokens/s; of equally
// fast layouts, the one that needs less memory first, then the one first by estimate.
std::vector<SearchCandidate> rank(
    const SearchRequest& r, const Layout& base, std::vector<Choice>& choices, Enumeration& progress)
{
    const std::size_t keep = searching::orderForReplay(choices, searching::replayedCount(r));
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
    std::stable_sort(fitting.begin(), fitting.end(), [](const SearchCandidate& a, const SearchCandidate& b) {
        if (a.prediction.tokensPerSecond != b.prediction.tokensPerSecond)
            return a.prediction.tokensPerSecond > b.prediction.tokensPerSecond;
        return a.prediction.memory.total() < b.prediction.memory.total();
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
    const Layout base = searching::baseLayout(r);
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
