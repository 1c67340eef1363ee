// PyTorch profiler traces -> Loom's trace events: steps, compute, communication, one clock.
#include "engine/trace/TorchTrace.h"
#include "engine/trace/TorchTraceDetail.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <map>
#include <set>

namespace loom::trace {

namespace {

using torch::RankTrace;
using torch::RawEvent;

struct Span {
    EventKind kind;
    double startUs, endUs;
    std::int32_t microBatch = -1;
};

std::string lower(std::string s)
{
    for (auto& c : s)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// "forward", "forward mb 3", "backward_mb_2", "## forward ##" (a record_function annotation).
std::optional<EventKind> annotationKind(const std::string& name)
{
    std::string n = lower(name);
    n.erase(0, n.find_first_not_of("# "));
    for (auto [word, kind] : { std::pair { "forward", EventKind::Forward }, { "backward", EventKind::Backward } })
        if (n.rfind(word, 0) == 0
            && (n.size() == std::string(word).size()
                || std::string(" _#:").find(n[std::string(word).size()]) != std::string::npos))
            return kind;
    return std::nullopt;
}

std::int32_t microBatchOf(const std::string& name)
{
    const std::string n = lower(name);
    for (const char* key : { "mb", "microbatch", "micro_batch" }) {
        for (auto at = n.find(key); at != std::string::npos; at = n.find(key, at + 1)) {
            auto i = at + std::string(key).size();
            while (i < n.size() && (n[i] == ' ' || n[i] == '_' || n[i] == '=' || n[i] == '#'))
                ++i;
            std::string digits;
            while (i < n.size() && std::isdigit(static_cast<unsigned char>(n[i])))
                digits += n[i++];
            if (!digits.empty() && digits.size() < 9)
                return static_cast<std::int32_t>(std::stol(digits));
        }
    }
    return -1;
}

bool inside(const std::vector<Span>& spans, double start, double end)
{
    return std::any_of(spans.begin(), spans.end(), [&](const Span& s) { return start >= s.startUs && end <= s.endUs; });
}

// Forward and backward ranges and optimizer steps of one rank, in the order of precedence: annotations, module
// forwards, the autograd engine's backward functions (merged into one range per backward pass), optimizer steps.
std::vector<Span> computeSpans(const RankTrace& t)
{
    std::vector<const RawEvent*> cpu;
    for (const auto& e : t.events)
        if (!e.gpu)
            cpu.push_back(&e);
    std::sort(cpu.begin(), cpu.end(),
        [](auto* a, auto* b) { return a->startUs < b->startUs || (a->startUs == b->startUs && a->endUs > b->endUs); });
    std::vector<Span> spans;
    for (const auto* e : cpu)
        if (const auto kind = annotationKind(e->name); kind && !inside(spans, e->startUs, e->endUs))
            spans.push_back({ *kind, e->startUs, e->endUs, microBatchOf(e->name) });
    for (const auto* e : cpu)
        if (e->name.ends_with(".forward") && e->name.find("::") == std::string::npos
            && !inside(spans, e->startUs, e->endUs))
            spans.push_back({ EventKind::Forward, e->startUs, e->endUs, -1 });
    std::vector<Span> optimizer;
    for (const auto* e : cpu)
        if (e->name.rfind("Optimizer.step#", 0) == 0 && !inside(spans, e->startUs, e->endUs))
            optimizer.push_back({ EventKind::Optimizer, e->startUs, e->endUs, -1 });
    // Backward functions, merged per thread while no forward or optimizer step starts in between.
    std::map<std::string, std::vector<Span>> pieces;
    for (const auto* e : cpu)
        if (e->name.rfind("autograd::engine::evaluate_function:", 0) == 0 && !inside(spans, e->startUs, e->endUs))
            pieces[e->thread].push_back({ EventKind::Backward, e->startUs, e->endUs, -1 });
    std::vector<double> breaks;
    for (const auto& s : spans)
        if (s.kind == EventKind::Forward)
            breaks.push_back(s.startUs);
    for (const auto& s : optimizer)
        breaks.push_back(s.startUs);
    std::sort(breaks.begin(), breaks.end());
    for (auto& [thread, list] : pieces) {
        std::vector<Span> merged;
        for (const auto& p : list) {
            if (!merged.empty() && p.startUs < merged.back().endUs) {
                merged.back().endUs = std::max(merged.back().endUs, p.endUs); // nested backward functions
                continue;
            }
            const bool broken = !merged.empty()
                && std::upper_bound(breaks.begin(), breaks.end(), merged.back().endUs)
                    != std::lower_bound(breaks.begin(), breaks.end(), p.startUs);
            if (merged.empty() || broken)
                merged.push_back(p);
            else
                merged.back().endUs = p.endUs;
        }
        spans.insert(spans.end(), merged.begin(), merged.end());
    }
    spans.insert(spans.end(), optimizer.begin(), optimizer.end());
    return spans;
}

struct StepWindow {
    double startUs, endUs;
    std::int32_t step;
};

std::vector<StepWindow> stepWindows(const RankTrace& t)
{
    std::vector<StepWindow> w;
    for (const auto& e : t.events) {
        if (e.gpu || e.name.rfind("ProfilerStep#", 0) != 0)
            continue;
        try {
            w.push_back({ e.startUs, e.endUs, static_cast<std::int32_t>(std::stol(e.name.substr(13))) });
        } catch (...) {
        }
    }
    std::sort(w.begin(), w.end(), [](const auto& a, const auto& b) { return a.startUs < b.startUs; });
    return w;
}

// The step whose window holds `us`: the last one starting at or before it (work that a step's worker threads
// finish just after the step's range closes still belongs to it); the first step for earlier times.
std::int32_t stepAt(const std::vector<StepWindow>& w, double us)
{
    if (w.empty())
        return 0;
    auto it = std::upper_bound(w.begin(), w.end(), us, [](double t, const StepWindow& s) { return t < s.startUs; });
    return it == w.begin() ? w.front().step : std::prev(it)->step;
}

bool collective(EventKind k)
{
    return k == EventKind::AllReduce || k == EventKind::AllGather || k == EventKind::ReduceScatter
        || k == EventKind::Broadcast || k == EventKind::Barrier || k == EventKind::AllToAll;
}

// Event-list traces start their clock at each process's profiler start: shift every rank onto rank 0's clock
// so that the collectives every rank ran end together (the median over them, per rank).
template <typename PerRank> void alignClocks(PerRank& perRank, bool needed, TorchImport& out)
{
    if (!needed) {
        out.notes.push_back("clocks: as recorded (Kineto's host clock; ranks on different hosts are as far apart "
                            "as their clocks are)");
        return;
    }
    std::map<std::int32_t, std::map<EventKind, std::vector<std::int64_t>>> ends;
    for (const auto& [rank, p] : perRank)
        for (const auto& e : p.events)
            if (e.lane == Lane::Comm && collective(e.kind))
                ends[rank][e.kind].push_back(e.endNs);
    const auto first = perRank.begin()->first;
    bool aligned = true;
    for (auto& [rank, p] : perRank) {
        if (rank == first)
            continue;
        std::vector<std::int64_t> offsets;
        for (const auto& [kind, mine] : ends[rank]) {
            const auto& theirs = ends[first][kind];
            if (theirs.size() != mine.size())
                continue;
            for (std::size_t k = 0; k < mine.size(); ++k)
                offsets.push_back(theirs[k] - mine[k]);
        }
        if (offsets.empty()) {
            aligned = false;
            continue;
        }
        std::nth_element(offsets.begin(), offsets.begin() + offsets.size() / 2, offsets.end());
        const std::int64_t shift = offsets[offsets.size() / 2];
        for (auto& e : p.events) {
            e.startNs += shift;
            e.endNs += shift;
        }
    }
    if (aligned)
        out.notes.push_back("clocks: each process's trace starts at its own profiler start; ranks were put on rank "
            + std::to_string(first) + "'s clock so that the collectives they all ran end together");
    else
        out.lacks.push_back("a common clock: these traces start at each process's profiler start and some ranks "
                            "share no collective with rank "
            + std::to_string(first) + " to align on, so times across ranks (step time, bubble) are not comparable");
}

void describe(TorchImport& out, bool stepless, bool noCompute, const std::set<std::string>& sources,
    const std::vector<std::string>& skipped, const TorchImportOptions& options)
{
    if (stepless)
        out.lacks.push_back("steps: no ProfilerStep#N ranges (profile with a schedule and call step()); events "
                            "outside them count as one step");
    if (noCompute)
        out.lacks.push_back("compute: no forward or backward ranges on some ranks (no record_function(\"forward\"), "
                            "module forward or autograd backward functions)");
    std::string from;
    for (const auto& s : sources)
        from += (from.empty() ? "" : ", ") + s;
    if (!from.empty())
        out.notes.push_back("communication: from " + from);
    std::map<std::string, int> counts;
    for (const auto& s : skipped)
        ++counts[s];
    for (const auto& [name, n] : counts)
        out.lacks.push_back(std::to_string(n) + " " + name + " operation" + (n == 1 ? "" : "s")
            + " of a kind Loom's traces have no name for, left out");
    bool comm = false, bytes = false, groups = false, peers = false, p2p = false;
    for (const auto& e : out.events) {
        if (e.lane != Lane::Comm)
            continue;
        comm = true;
        bytes = bytes || e.bytes > 0;
        groups = groups || e.group >= 0;
        const bool pointToPoint = e.kind == EventKind::Send || e.kind == EventKind::Recv;
        p2p = p2p || pointToPoint;
        peers = peers || (pointToPoint && e.peer >= 0);
    }
    if (comm && !bytes)
        out.lacks.push_back("message sizes: not recorded (no record_param_comms arguments), so bandwidths read 0");
    if (comm && !groups)
        out.lacks.push_back("process groups: not recorded, so collectives carry no group and bus bandwidth is "
                            "the algorithm bandwidth");
    if (p2p && !peers)
        out.lacks.push_back("peers of send and receive: not recorded");
    if (options.stageOfRank.empty() && p2p)
        out.lacks.push_back("pipeline stages: a trace does not say which stage its rank ran; give the layout "
                            "(--layout) to have the bubble per stage");
    if (sources.count("NCCL kernels"))
        out.notes.push_back("GPU: communication times are the NCCL kernels' on the device streams; compute times "
                            "are the CPU's forward and backward ranges (which launch the kernels)");
}

} // namespace

TorchImport importTorchTraces(const std::vector<TorchTraceFile>& files, const TorchImportOptions& options)
{
    if (files.empty())
        throw TorchTraceError("no trace files given");
    std::vector<RankTrace> traces;
    std::map<std::int32_t, std::string> fileOfRank;
    bool anyKineto = false, anyList = false;
    for (std::size_t i = 0; i < files.size(); ++i) {
        auto t = torch::readRankTrace(files[i]);
        if (t.rank < 0)
            t.rank = static_cast<std::int32_t>(i);
        if (const auto [it, fresh] = fileOfRank.emplace(t.rank, t.file); !fresh)
            throw TorchTraceError(t.file + ": rank " + std::to_string(t.rank) + ": " + it->second
                + " is the same rank; expected one trace per rank");
        (t.kineto ? anyKineto : anyList) = true;
        traces.push_back(std::move(t));
    }
    TorchImport out;
    out.form = anyKineto && anyList ? "mixed" : anyKineto ? "kineto" : "event list";
    out.ranks = static_cast<std::int32_t>(traces.size());
    if (!anyKineto)
        out.notes.push_back("ranks: from the order of the files (event-list traces do not record their rank)");

    // Per rank: events on its own clock (microseconds), with steps.
    struct Pending {
        std::vector<TraceEvent> events;
        std::vector<torch::CommEvent> comm;
    };
    std::map<std::int32_t, Pending> perRank;
    std::set<std::int32_t> steps;
    std::vector<std::string> skipped;
    std::set<std::string> sources;
    bool stepless = false, noCompute = false;
    std::map<std::string, std::int32_t> groupIds;
    for (const auto& t : traces) {
        const auto windows = stepWindows(t);
        stepless = stepless || windows.empty();
        auto& p = perRank[t.rank];
        const auto spans = computeSpans(t);
        noCompute = noCompute
            || std::none_of(spans.begin(), spans.end(), [](const Span& s) { return s.kind != EventKind::Optimizer; });
        const std::int32_t stage
            = t.rank < static_cast<std::int32_t>(options.stageOfRank.size()) ? options.stageOfRank[t.rank] : -1;
        for (const auto& s : spans) {
            TraceEvent e;
            e.rank = t.rank;
            e.lane = Lane::Compute;
            e.kind = s.kind;
            e.microBatch = s.microBatch;
            e.stage = stage;
            e.step = stepAt(windows, s.startUs);
            e.startNs = std::llround(s.startUs * 1000.0);
            e.endNs = std::llround(s.endUs * 1000.0);
            p.events.push_back(e);
        }
        p.comm = torch::communication(t, skipped);
        for (const auto& c : p.comm) {
            sources.insert(c.source);
            TraceEvent e;
            e.rank = t.rank;
            e.lane = Lane::Comm;
            e.kind = c.kind;
            e.stage = stage;
            e.step = stepAt(windows, c.startUs);
            e.startNs = std::llround(c.startUs * 1000.0);
            e.endNs = std::llround(c.endUs * 1000.0);
            e.bytes = c.args.bytes;
            e.peer = c.args.peer;
            e.algorithm = collective(c.kind) ? Algorithm::Library : Algorithm::None;
            if (!c.args.groupName.empty() || !c.args.groupRanks.empty()) {
                const std::string key = c.args.groupName + "|" + std::to_string(c.args.groupRanks.size());
                auto [it, fresh] = groupIds.emplace(key, static_cast<std::int32_t>(out.groups.size()));
                if (fresh) {
                    GroupInfo g;
                    g.id = it->second;
                    g.ranks = c.args.groupRanks;
                    const bool world = static_cast<std::int32_t>(g.ranks.size()) == out.ranks;
                    g.kind = world ? GroupKind::World : GroupKind::Other;
                    g.name = std::string(world ? "world" : "group") + " "
                        + (c.args.groupName.empty() ? "?" : c.args.groupName);
                    out.groups.push_back(g);
                }
                e.group = it->second;
            }
            e.groupSize = c.args.groupSize > 0 ? c.args.groupSize : static_cast<std::int32_t>(c.args.groupRanks.size());
            p.events.push_back(e);
        }
        for (const auto& e : p.events)
            steps.insert(e.step);
    }
    out.steps = static_cast<std::int32_t>(steps.size());
    alignClocks(perRank, anyList, out);

    // One clock starting at 0.
    std::int64_t origin = INT64_MAX;
    for (const auto& [rank, p] : perRank)
        for (const auto& e : p.events)
            origin = std::min(origin, e.startNs);
    for (auto& [rank, p] : perRank)
        for (auto& e : p.events) {
            e.startNs -= origin;
            e.endNs -= origin;
            out.events.push_back(e);
        }
    std::sort(out.events.begin(), out.events.end(),
        [](const auto& a, const auto& b) { return a.rank != b.rank ? a.rank < b.rank : a.startNs < b.startNs; });
    describe(out, stepless, noCompute, sources, skipped, options);
    return out;
}

} // namespace loom::trace
