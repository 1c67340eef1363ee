// PyTorch profiler traces -> Loom's trace events: steps, compute, communication, one clock.
#include "engine/bridges/TorchTrace.h"
#include "engine/bridges/TorchTraceDetail.h"

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
using torch::Span;
using torch::StepRange;

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

bool inside(const std::vector<Span>& spans, std::int64_t start, std::int64_t end)
{
    return std::any_of(spans.begin(), spans.end(), [&](const Span& s) { return start >= s.startNs && end <= s.endNs; });
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
        [](auto* a, auto* b) { return a->startNs < b->startNs || (a->startNs == b->startNs && a->endNs > b->endNs); });
    std::vector<Span> spans;
    for (const auto* e : cpu)
        if (const auto kind = annotationKind(t.nameOf(*e)); kind && !inside(spans, e->startNs, e->endNs))
            spans.push_back({ *kind, e->startNs, e->endNs, microBatchOf(t.nameOf(*e)) });
    for (const auto* e : cpu)
        if (t.nameOf(*e).ends_with(".forward") && t.nameOf(*e).find("::") == std::string::npos
            && !inside(spans, e->startNs, e->endNs))
            spans.push_back({ EventKind::Forward, e->startNs, e->endNs, -1 });
    std::vector<Span> optimizer;
    for (const auto* e : cpu)
        if (t.nameOf(*e).rfind("Optimizer.step#", 0) == 0 && !inside(spans, e->startNs, e->endNs))
            optimizer.push_back({ EventKind::Optimizer, e->startNs, e->endNs, -1 });
    // Backward functions, merged per thread while no forward or optimizer step starts in between.
    std::map<std::uint32_t, std::vector<Span>> pieces;
    for (const auto* e : cpu)
        if (t.nameOf(*e).rfind("autograd::engine::evaluate_function:", 0) == 0 && !inside(spans, e->startNs, e->endNs))
            pieces[e->thread].push_back({ EventKind::Backward, e->startNs, e->endNs, -1 });
    std::vector<std::int64_t> breaks;
    for (const auto& s : spans)
        if (s.kind == EventKind::Forward)
            breaks.push_back(s.startNs);
    for (const auto& s : optimizer)
        breaks.push_back(s.startNs);
    std::sort(breaks.begin(), breaks.end());
    for (auto& [thread, list] : pieces) {
        std::vector<Span> merged;
        for (const auto& p : list) {
            if (!merged.empty() && p.startNs < merged.back().endNs) {
                merged.back().endNs = std::max(merged.back().endNs, p.endNs); // nested backward functions
                continue;
            }
            const bool broken = !merged.empty()
                && std::upper_bound(breaks.begin(), breaks.end(), merged.back().endNs)
                    != std::lower_bound(breaks.begin(), breaks.end(), p.startNs);
            if (merged.empty() || broken)
                merged.push_back(p);
            else
                merged.back().endNs = p.endNs;
        }
        spans.insert(spans.end(), merged.begin(), merged.end());
    }
    spans.insert(spans.end(), optimizer.begin(), optimizer.end());
    return spans;
}

// ProfilerStep#N ranges as HTA reads them (N: digits); other ProfilerStep names ("ProfilerStep#-5") are
// recorded in `bad` and are no step.
std::vector<StepRange> stepWindows(const RankTrace& t, std::vector<std::string>& bad)
{
    std::vector<StepRange> w;
    for (const auto& e : t.events) {
        const std::string& name = t.nameOf(e);
        if (e.gpu || name.rfind("ProfilerStep#", 0) != 0)
            continue;
        const std::string digits = name.substr(13, name.find_first_not_of("0123456789", 13) - 13);
        if (digits.empty() || digits.size() > 9) {
            bad.push_back(t.file + ": \"" + name.substr(0, 40) + "\"");
            continue;
        }
        w.push_back({ static_cast<std::int32_t>(std::stol(digits)), e.startNs, e.endNs });
    }
    std::sort(w.begin(), w.end(), [](const auto& a, const auto& b) { return a.startNs < b.startNs; });
    return w;
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
        for (auto& st : out.profilerSteps) // the rank's ProfilerStep ranges move with its events
            if (st.rank == rank) {
                st.startNs += shift;
                st.endNs += shift;
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
        out.lacks.push_back("message sizes: not recorded (no record_param_comms arguments, no sizes on the op "
                            "around the launch), so bandwidths read 0");
    if (comm && !groups)
        out.lacks.push_back("process groups: not recorded, so collectives carry no group and bus bandwidth is "
                            "the algorithm bandwidth");
    if (p2p && !peers)
        out.lacks.push_back("peers of send and receive: not recorded");
    if (options.stageOfRank.empty() && p2p)
        out.lacks.push_back("pipeline stages: a trace does not say which stage its rank ran; give the layout "
                            "(--layout) to have the bubble per stage");
    if (sources.count("GPU kernels"))
        out.notes.push_back("GPU: the device streams' kernels, copies and sets, each linked to its launch by "
                            "correlation (the launches kept on each rank's host row); compute is the compute "
                            "kernels' time, communication the NCCL/RCCL kernels'");
}

} // namespace

namespace {

// Checks across files: one world, ranks within it, time ranges that meet (Kineto's clocks are absolute).
void checkTogether(const std::vector<RankTrace>& traces, TorchImport& out)
{
    const RankTrace* sized = nullptr;
    for (const auto& t : traces) {
        if (t.worldSize <= 0)
            continue;
        if (sized && sized->worldSize != t.worldSize)
            throw TorchTraceError(t.file + ": distributedInfo.world_size: " + std::to_string(t.worldSize) + ", but "
                + sized->file + " says " + std::to_string(sized->worldSize)
                + "; expected the traces of one job (one world size)");
        if (t.rank >= t.worldSize)
            throw TorchTraceError(t.file + ": distributedInfo.rank: " + std::to_string(t.rank)
                + "; expected a rank below world_size " + std::to_string(t.worldSize));
        sized = &t;
    }
    if (sized && static_cast<std::int32_t>(traces.size()) < sized->worldSize)
        out.lacks.push_back("ranks: " + std::to_string(traces.size()) + " of the job's "
            + std::to_string(sized->worldSize)
            + " (distributedInfo.world_size) were given; figures are for those only");
    std::vector<std::pair<std::int64_t, std::int64_t>> ranges(traces.size(), { INT64_MAX, INT64_MIN });
    for (std::size_t i = 0; i < traces.size(); ++i)
        for (const auto& e : traces[i].events)
            ranges[i] = { std::min(ranges[i].first, e.startNs), std::max(ranges[i].second, e.endNs) };
    for (std::size_t i = 0; i < traces.size(); ++i)
        for (std::size_t k = 0; k < i; ++k) {
            if (!traces[i].kineto || !traces[k].kineto || ranges[i].first > ranges[i].second
                || ranges[k].first > ranges[k].second)
                continue;
            if (ranges[i].first > ranges[k].second || ranges[k].first > ranges[i].second)
                throw TorchTraceError(traces[i].file + ": its events (" + std::to_string(ranges[i].first / 1000000000)
                    + " s to " + std::to_string(ranges[i].second / 1000000000) + " s on the host clock) do not overlap "
                    + traces[k].file + "'s (" + std::to_string(ranges[k].first / 1000000000) + " s to "
                    + std::to_string(ranges[k].second / 1000000000)
                    + " s); expected the traces of one run, recorded together");
        }
}

std::int32_t groupId(const torch::CommArgs& c, TorchImport& out, std::map<std::string, std::int32_t>& ids)
{
    if (c.groupName.empty() && c.groupRanks.empty())
        return -1;
    const std::string key = c.groupName + "|" + std::to_string(c.groupRanks.size());
    auto [it, fresh] = ids.emplace(key, static_cast<std::int32_t>(out.groups.size()));
    if (fresh) {
        GroupInfo g;
        g.id = it->second;
        g.ranks = c.groupRanks;
        const bool world = static_cast<std::int32_t>(g.ranks.size()) == out.ranks;
        g.kind = world ? GroupKind::World : GroupKind::Other;
        g.name = std::string(world ? "world" : "group") + " " + (c.groupName.empty() ? "?" : c.groupName);
        out.groups.push_back(g);
    }
    return it->second;
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
    checkTogether(traces, out);

    struct Pending {
        std::vector<TraceEvent> events;
    };
    std::map<std::int32_t, Pending> perRank;
    std::set<std::int32_t> steps;
    std::vector<std::string> skipped, badSteps;
    std::set<std::string> sources;
    bool stepless = false, noCompute = false;
    std::int64_t unlinked = 0, groupOfOne = 0;
    std::map<std::string, std::int64_t> unknownKinds;
    std::map<std::string, std::int32_t> groupIds;
    for (auto& t : traces) {
        const auto windows = stepWindows(t, badSteps);
        stepless = stepless || windows.empty();
        for (const auto& w : windows)
            out.profilerSteps.push_back({ t.rank, w.step, w.startNs, w.endNs });
        auto& p = perRank[t.rank];
        const auto spans = computeSpans(t);
        const std::int32_t stage
            = t.rank < static_cast<std::int32_t>(options.stageOfRank.size()) ? options.stageOfRank[t.rank] : -1;
        const bool device
            = std::any_of(t.events.begin(), t.events.end(), [](const RawEvent& e) { return e.gpu && e.stream >= 0; });
        if (device) {
            auto d = torch::deviceEvents(t, windows, spans);
            sources.insert("GPU kernels");
            unlinked += d.unlinked;
            groupOfOne += d.groupOfOne;
            for (const auto& [name, n] : d.unknownKinds)
                unknownKinds[name] += n;
            for (std::size_t k = 0; k < d.events.size(); ++k) {
                auto& e = d.events[k];
                e.stage = stage;
                if (e.lane == Lane::Comm)
                    e.group = groupId(d.comm[k], out, groupIds);
                p.events.push_back(e);
            }
        } else {
            noCompute = noCompute || std::none_of(spans.begin(), spans.end(), [](const Span& s) {
                return s.kind != EventKind::Optimizer;
            });
            for (const auto& s : spans) {
                TraceEvent e;
                e.rank = t.rank;
                e.lane = Lane::Compute;
                e.kind = s.kind;
                e.microBatch = s.microBatch;
                e.stage = stage;
                e.step = torch::stepAt(windows, s.startNs);
                e.startNs = s.startNs;
                e.endNs = s.endNs;
                p.events.push_back(e);
            }
            for (const auto& c : torch::communication(t, skipped)) {
                sources.insert(c.source);
                TraceEvent e;
                e.rank = t.rank;
                e.lane = Lane::Comm;
                e.kind = c.kind;
                e.stage = stage;
                e.step = torch::stepAt(windows, c.startNs);
                e.startNs = c.startNs;
                e.endNs = c.endNs;
                e.bytes = c.args.bytes;
                e.peer = c.args.peer;
                e.algorithm = collective(c.kind) ? Algorithm::Library : Algorithm::None;
                e.group = groupId(c.args, out, groupIds);
                e.groupSize
                    = c.args.groupSize > 0 ? c.args.groupSize : static_cast<std::int32_t>(c.args.groupRanks.size());
                p.events.push_back(e);
            }
        }
        for (const auto& e : p.events)
            if (e.step >= 0)
                steps.insert(e.step);
        for (const auto& w : windows)
            steps.insert(w.step);
        t.events = {}; // the raw events are no longer needed: give their memory back before the next file
        t.names = {};
    }
    out.steps = static_cast<std::int32_t>(steps.size());
    alignClocks(perRank, anyList, out);

    // One clock starting at 0 (the earliest event of any rank), in integer nanoseconds.
    std::int64_t origin = INT64_MAX;
    for (const auto& [rank, p] : perRank)
        for (const auto& e : p.events)
            origin = std::min(origin, e.startNs);
    for (const auto& s : out.profilerSteps)
        origin = std::min(origin, s.startNs);
    if (origin == INT64_MAX)
        origin = 0;
    for (auto& [rank, p] : perRank)
        for (auto& e : p.events) {
            e.startNs -= origin;
            e.endNs -= origin;
            out.events.push_back(e);
        }
    for (auto& s : out.profilerSteps) {
        s.startNs -= origin;
        s.endNs -= origin;
    }
    std::sort(out.events.begin(), out.events.end(),
        [](const auto& a, const auto& b) { return a.rank != b.rank ? a.rank < b.rank : a.startNs < b.startNs; });
    describe(out, stepless, noCompute, sources, skipped, options);
    for (const auto& b : badSteps)
        out.lacks.push_back("step: " + b + " is not ProfilerStep#N with N a step number; not read as a step");
    if (unlinked > 0)
        out.notes.push_back(std::to_string(unlinked)
            + " device events have no launch in the trace (their correlation leads to no host call; launched "
              "before the profiler started): step -1");
    for (const auto& [name, n] : unknownKinds)
        out.lacks.push_back(std::to_string(n) + " communication kernel" + (n == 1 ? "" : "s") + " \"" + name
            + "\" of a collective no op around the launch names: counted as communication of kind \"collective\"");
    if (groupOfOne > 0)
        out.notes.push_back(std::to_string(groupOfOne)
            + " collectives ran on a group of one rank: nothing is transferred, so their bytes are 0");
    return out;
}

} // namespace loom::trace
