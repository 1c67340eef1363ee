// The device side of a GPU trace: kernels, copies and sets on their streams, each linked to the host call
// that launched it by `correlation`, as HTA links them (hta/common/trace.py: add_iteration and the kernel filter).
#include "engine/bridges/TorchTraceDetail.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace loom::trace::torch {

namespace {

bool isCollective(EventKind k)
{
    return k == EventKind::AllReduce || k == EventKind::AllGather || k == EventKind::ReduceScatter
        || k == EventKind::Broadcast || k == EventKind::Barrier || k == EventKind::AllToAll;
}

// The host ops that can name a collective (record_param_comms, nccl:*, c10d::*), per thread, by start.
class CommOps {
public:
    explicit CommOps(const RankTrace& t)
        : m_t(t)
    {
        for (std::uint32_t i = 0; i < t.events.size(); ++i)
            if (!t.events[i].gpu && t.events[i].comm >= 0)
                m_byThread[t.events[i].thread].push_back(i);
        for (auto& [thread, list] : m_byThread)
            std::sort(
                list.begin(), list.end(), [&](auto a, auto b) { return t.events[a].startNs < t.events[b].startNs; });
    }
    // The op around a launch at `ns` on `thread`: record_param_comms with its arguments first, else the
    // innermost op whose name is a known collective; nullptr when none.
    const CommArgs* around(std::uint32_t thread, std::int64_t ns) const
    {
        const auto it = m_byThread.find(thread);
        if (it == m_byThread.end())
            return nullptr;
        const auto& list = it->second;
        auto at = std::upper_bound(
            list.begin(), list.end(), ns, [&](std::int64_t t, std::uint32_t i) { return t < m_t.events[i].startNs; });
        const CommArgs* named = nullptr;
        for (int looked = 0; at != list.begin() && looked < 64; ++looked) {
            const RawEvent& e = m_t.events[*--at];
            if (e.endNs < ns)
                continue;
            const CommArgs& c = m_t.comms[static_cast<std::size_t>(e.comm)];
            if (c.present && collectiveKind(c.collective))
                return &c;
            if (!named && collectiveKind(c.collective))
                named = &c;
        }
        return named;
    }

private:
    const RankTrace& m_t;
    std::unordered_map<std::uint32_t, std::vector<std::uint32_t>> m_byThread;
};

EventKind spanKind(const std::vector<Span>& spans, std::int64_t ns, std::int32_t& microBatch)
{
    auto at
        = std::upper_bound(spans.begin(), spans.end(), ns, [](std::int64_t t, const Span& s) { return t < s.startNs; });
    for (int looked = 0; at != spans.begin() && looked < 8; ++looked)
        if (const Span& s = *--at; s.endNs >= ns) {
            microBatch = s.microBatch;
            return s.kind;
        }
    return EventKind::Kernel;
}

// A group's ranks from distributedInfo.pg_config when the op names the group but not its members.
void fillGroup(const RankTrace& t, CommArgs& c)
{
    if (!c.groupRanks.empty() || c.groupName.empty())
        return;
    const std::string name = c.groupName.substr(0, c.groupName.find(':'));
    for (const auto& g : t.groups)
        if (g.name == name && !g.ranks.empty()) {
            c.groupRanks = g.ranks;
            c.groupSize = c.groupSize > 0 ? c.groupSize : static_cast<std::int32_t>(g.ranks.size());
        }
}

std::string shortName(const std::string& name)
{
    return name.substr(0, std::min(name.find('('), std::size_t(80)));
}

} // namespace

std::int32_t stepAt(const std::vector<StepRange>& steps, std::int64_t ns)
{
    if (steps.empty())
        return 0;
    auto it = std::upper_bound(
        steps.begin(), steps.end(), ns, [](std::int64_t t, const StepRange& s) { return t < s.startNs; });
    return it == steps.begin() ? steps.front().step : std::prev(it)->step;
}

DeviceImport deviceEvents(const RankTrace& t, const std::vector<StepRange>& steps, const std::vector<Span>& spansIn)
{
    std::vector<Span> spans = spansIn;
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.startNs < b.startNs; });
    std::unordered_map<std::int64_t, std::uint32_t> launch; // correlation -> the host call
    for (std::uint32_t i = 0; i < t.events.size(); ++i)
        if (!t.events[i].gpu && t.events[i].correlation >= 0)
            launch.emplace(t.events[i].correlation, i);
    const CommOps ops(t);
    DeviceImport out;
    std::unordered_set<std::uint32_t> launched; // host calls already kept as Launch events
    for (const auto& raw : t.events) {
        if (!raw.gpu || raw.stream < 0 || raw.cat == Category::GpuAnnotation)
            continue;
        const std::string& name = t.nameOf(raw);
        const auto l = raw.correlation >= 0 ? launch.find(raw.correlation) : launch.end();
        const RawEvent* host = l == launch.end() ? nullptr : &t.events[l->second];
        TraceEvent e;
        e.rank = t.rank;
        e.stream = raw.stream;
        e.startNs = raw.startNs;
        e.endNs = raw.endNs;
        e.step = host ? stepAt(steps, host->startNs) : -1;
        e.correlation = host ? raw.correlation : -1;
        out.unlinked += host ? 0 : 1;
        if (host && launched.insert(l->second).second) { // the launch itself, on the host row, once
            TraceEvent call;
            call.rank = t.rank;
            call.kind = EventKind::Launch;
            call.step = e.step;
            call.startNs = host->startNs;
            call.endNs = host->endNs;
            call.correlation = raw.correlation;
            out.events.push_back(call);
            out.comm.emplace_back();
            ++out.launches;
        }
        CommArgs args;
        const KernelType type = raw.cat == Category::Memcpy || raw.cat == Category::Memset ? KernelType::Memory
            : raw.cat == Category::Sync                                                    ? KernelType::Other
                                                                                           : kernelType(name);
        switch (type) {
        case KernelType::Communication: {
            e.lane = Lane::Comm;
            if (const CommArgs* c = host ? ops.around(host->thread, host->startNs) : nullptr)
                args = *c;
            auto kind = collectiveKind(args.collective);
            if (!kind)
                kind = collectiveKind(ncclKernelCollective(name));
            if (!kind)
                ++out.unknownKinds[shortName(name)];
            e.kind = kind.value_or(EventKind::Collective);
            fillGroup(t, args);
            e.bytes = args.bytes;
            e.peer = args.peer;
            e.groupSize = args.groupSize > 0 ? args.groupSize : static_cast<std::int32_t>(args.groupRanks.size());
            if (e.groupSize == 1 && e.bytes > 0) { // nothing leaves the rank: no transfer to price
                e.bytes = 0;
                ++out.groupOfOne;
            }
            e.algorithm
                = isCollective(e.kind) || e.kind == EventKind::Collective ? Algorithm::Library : Algorithm::None;
            break;
        }
        case KernelType::Memory:
            e.kind = raw.cat == Category::Memset || name.rfind("Memset", 0) == 0 || name.rfind("hipMemset", 0) == 0
                ? EventKind::Memset
                : EventKind::Memcpy;
            break;
        case KernelType::Computation:
            e.kind = host ? spanKind(spans, host->startNs, e.microBatch) : EventKind::Kernel;
            break;
        case KernelType::Other:
            e.kind = EventKind::Wait;
            break;
        }
        out.events.push_back(e);
        out.comm.push_back(std::move(args));
    }
    return out;
}

} // namespace loom::trace::torch
