// Reading one PyTorch profiler trace and finding its communication.
#include "engine/trace/TorchTraceDetail.h"

#include "engine/trace/JsonLimits.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <deque>
#include <map>

namespace loom::trace::torch {

namespace {

[[noreturn]] void fail(const std::string& file, const std::string& field, const std::string& expected)
{
    throw TorchTraceError(file + ": " + field + ": " + expected);
}

std::string text(const nlohmann::json& j, const char* key)
{
    const auto it = j.find(key);
    if (it == j.end())
        return {};
    if (it->is_string())
        return it->get<std::string>();
    if (it->is_number())
        return it->dump();
    return {};
}

std::int64_t integer(const nlohmann::json& args, const char* key, std::int64_t fallback)
{
    const auto it = args.find(key);
    if (it == args.end())
        return fallback;
    if (it->is_number_integer())
        return it->get<std::int64_t>();
    if (it->is_string()) {
        try {
            return std::stoll(it->get<std::string>());
        } catch (...) {
        }
    }
    return fallback;
}

int dtypeBytes(const std::string& dtype)
{
    static const std::map<std::string, int> sizes = { { "Float", 4 }, { "Half", 2 }, { "BFloat16", 2 }, { "Double", 8 },
        { "Long", 8 }, { "Int", 4 }, { "Short", 2 }, { "Char", 1 }, { "Byte", 1 }, { "Bool", 1 },
        { "Float8_e4m3fn", 1 }, { "Float8_e5m2", 1 } };
    const auto it = sizes.find(dtype);
    return it == sizes.end() ? 0 : it->second;
}

// "[0, 1, 2, 3]" -> {0, 1, 2, 3}; empty when cut short ("...") or unreadable.
std::vector<std::int32_t> rankList(const std::string& s)
{
    std::vector<std::int32_t> ranks;
    if (s.find("...") != std::string::npos)
        return {};
    std::string digits;
    for (char c : s + ",") {
        if (std::isdigit(static_cast<unsigned char>(c)))
            digits += c;
        else if (!digits.empty()) {
            ranks.push_back(static_cast<std::int32_t>(std::stol(digits)));
            digits.clear();
        }
    }
    return ranks;
}

CommArgs commArgs(const nlohmann::json& args)
{
    CommArgs c;
    if (!args.is_object() || !args.contains("Collective name"))
        return c;
    c.present = true;
    c.collective = text(args, "Collective name");
    const std::int64_t in = integer(args, "In msg nelems", 0), out = integer(args, "Out msg nelems", 0);
    c.bytes = static_cast<std::uint64_t>(std::max<std::int64_t>({ in, out, 0 })) * dtypeBytes(text(args, "dtype"));
    c.groupSize = static_cast<std::int32_t>(integer(args, "Group size", 0));
    c.groupRanks = rankList(text(args, "Process Group Ranks"));
    c.groupName = text(args, "Process Group Name");
    const std::string desc = text(args, "Process Group Description");
    if (!desc.empty() && desc != "undefined")
        c.groupName += (c.groupName.empty() ? "" : ":") + desc;
    const std::int64_t src = integer(args, "Src Rank", -1), dst = integer(args, "Dst Rank", -1);
    c.peer = static_cast<std::int32_t>(dst >= 0 ? dst : src);
    return c;
}

std::string normalised(const std::string& name)
{
    std::string n;
    for (char c : name)
        if (std::isalnum(static_cast<unsigned char>(c)))
            n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const char* suffix : { "coalesced", "intotensor", "tensor", "base" })
        if (n.size() > std::string(suffix).size() && n.ends_with(suffix))
            n.erase(n.size() - std::string(suffix).size());
    return n;
}

// "ncclDevKernel_AllReduce_Sum_f32_RING_LL(...)" or "ncclKernel_AllGather_RING_LL_Sum_int8_t" -> "AllGather".
std::string ncclKernelCollective(const std::string& name)
{
    const auto at = name.find("Kernel_");
    if (name.rfind("nccl", 0) != 0 || at == std::string::npos)
        return {};
    const auto from = at + 7;
    return name.substr(from, name.find_first_of("_(", from) - from);
}

} // namespace

std::optional<EventKind> collectiveKind(const std::string& name)
{
    static const std::map<std::string, EventKind> kinds = { { "allreduce", EventKind::AllReduce },
        { "reducescatter", EventKind::ReduceScatter }, { "allgather", EventKind::AllGather },
        { "broadcast", EventKind::Broadcast }, { "send", EventKind::Send }, { "recv", EventKind::Recv },
        { "recvanysource", EventKind::Recv }, { "sendrecv", EventKind::Send }, { "barrier", EventKind::Barrier },
        { "alltoall", EventKind::AllToAll }, { "alltoallv", EventKind::AllToAll } };
    const auto it = kinds.find(normalised(name));
    return it == kinds.end() ? std::nullopt : std::optional(it->second);
}

RankTrace readRankTrace(const TorchTraceFile& file)
{
    RankTrace t;
    t.file = file.name;
    if (file.text.size() > kMaxTorchTraceBytes)
        fail(file.name, std::to_string(file.text.size()) + " bytes", "larger than the 1 GiB that Loom reads");
    if (!jsonNestingProblem(file.text, kMaxTorchTraceDepth).empty())
        fail(file.name, "nesting",
            "deeper than " + std::to_string(kMaxTorchTraceDepth)
                + " levels; a profiler trace is a list of flat events");
    const nlohmann::json doc = nlohmann::json::parse(file.text, nullptr, false);
    if (doc.is_discarded())
        fail(file.name, "the text",
            "not JSON; expected a PyTorch profiler trace (a list of events, or an object "
            "with \"traceEvents\")");
    const nlohmann::json* events = &doc;
    double baseUs = 0;
    if (doc.is_object()) {
        const auto other = doc.find("otherData");
        if (other != doc.end() && other->is_object() && other->contains("loom_trace"))
            fail(file.name, "otherData.loom_trace", "this is already a Loom trace; open it with loom trace stats");
        const auto list = doc.find("traceEvents");
        if (list == doc.end() || !list->is_array())
            fail(file.name, "traceEvents", "missing; expected the list of events of a PyTorch profiler trace");
        events = &*list;
        t.kineto = true;
        if (const auto d = doc.find("distributedInfo"); d != doc.end()) {
            if (!d->is_object())
                fail(file.name, "distributedInfo", "expected an object with \"rank\"");
            if (const auto r = d->find("rank"); r != d->end()) {
                if (!r->is_number_integer() || r->get<std::int64_t>() < 0 || r->get<std::int64_t>() > 1 << 24)
                    fail(file.name, "distributedInfo.rank", "expected a non-negative integer");
                t.rank = r->get<std::int32_t>();
            }
        }
        if (const auto b = doc.find("baseTimeNanoseconds"); b != doc.end() && b->is_number())
            baseUs = b->get<double>() / 1000.0;
    } else if (!doc.is_array()) {
        fail(file.name, "the document", "expected a list of events or an object with \"traceEvents\"");
    }
    bool pytorch = false;
    for (std::size_t i = 0; i < events->size(); ++i) {
        const auto& j = (*events)[i];
        const std::string where = (t.kineto ? "traceEvents[" : "[") + std::to_string(i) + "]";
        if (!j.is_object())
            fail(file.name, where, "expected an event object");
        const auto ph = j.find("ph");
        if (ph == j.end() || !ph->is_string())
            fail(file.name, where + ".ph", "expected the event's phase (a string such as \"X\")");
        if (*ph != "X")
            continue;
        RawEvent e;
        e.name = text(j, "name");
        const auto ts = j.find("ts"), dur = j.find("dur");
        if (ts == j.end() || !ts->is_number())
            fail(file.name, where + ".ts", "expected a number (microseconds)");
        if (dur == j.end() || !dur->is_number() || dur->get<double>() < 0)
            fail(file.name, where + ".dur", "expected a non-negative number (microseconds)");
        e.startUs = baseUs + ts->get<double>();
        e.endUs = e.startUs + dur->get<double>();
        const std::string cat = text(j, "cat");
        e.kernel = cat == "kernel";
        e.gpu = e.kernel || cat.rfind("gpu_", 0) == 0;
        e.thread = text(j, "pid") + "/" + text(j, "tid");
        if (const auto a = j.find("args"); a != j.end())
            e.comm = commArgs(*a);
        if (e.kernel && !e.comm.present)
            e.comm.collective = ncclKernelCollective(e.name); // the kind only; sizes from record_param_comms
        pytorch = pytorch || e.name.rfind("aten::", 0) == 0 || e.name.rfind("ProfilerStep#", 0) == 0 || cat == "cpu_op"
            || cat == "user_annotation" || e.kernel || e.comm.present;
        t.events.push_back(std::move(e));
    }
    if (!pytorch)
        fail(file.name, t.kineto ? "traceEvents" : "the event list",
            "no PyTorch profiler events (aten:: ops, ProfilerStep#N ranges, cpu_op or kernel events); expected a "
            "trace written by torch.profiler");
    return t;
}

std::vector<CommEvent> communication(const RankTrace& trace, std::vector<std::string>& skipped)
{
    enum Source { Kernels, Backend, Params };
    std::vector<CommEvent> found[3];
    std::vector<std::string> unknown[3];
    for (const auto& e : trace.events) {
        const auto colon = e.name.find(':');
        const std::string prefix = colon == std::string::npos ? "" : e.name.substr(0, colon);
        const bool backendOp = (prefix == "gloo" || prefix == "nccl" || prefix == "mpi" || prefix == "ucc")
            && e.name.find("::") == std::string::npos;
        Source source;
        std::string name;
        if (e.kernel && !e.comm.collective.empty())
            source = Kernels, name = e.comm.collective;
        else if (!e.gpu && backendOp)
            source = Backend, name = e.name.substr(colon + 1);
        else if (!e.gpu && e.name == "record_param_comms" && e.comm.present)
            source = Params, name = e.comm.collective;
        else
            continue;
        if (const auto kind = collectiveKind(name))
            found[source].push_back({ *kind, e.startUs, e.endUs, e.comm,
                source == Kernels       ? "NCCL kernels"
                    : source == Backend ? prefix + " ops"
                                        : "record_param_comms" });
        else
            unknown[source].push_back(name);
    }
    const Source chosen = !found[Kernels].empty() || !unknown[Kernels].empty() ? Kernels
        : !found[Backend].empty() || !unknown[Backend].empty()                 ? Backend
                                                                               : Params;
    std::vector<CommEvent> out = found[chosen];
    skipped.insert(skipped.end(), unknown[chosen].begin(), unknown[chosen].end());
    if (chosen != Params && !found[Params].empty()) {
        // Sizes and groups from record_param_comms, matched by order within each kind when the counts agree.
        std::map<EventKind, std::deque<const CommEvent*>> byKind;
        for (const auto& p : found[Params])
            byKind[p.kind].push_back(&p);
        std::map<EventKind, std::size_t> counts;
        for (const auto& c : out)
            ++counts[c.kind];
        for (auto& c : out) {
            auto& queue = byKind[c.kind];
            if (c.args.present || queue.size() != counts[c.kind])
                continue;
            c.args = queue.front()->args;
            queue.pop_front();
            --counts[c.kind];
        }
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.startUs < b.startUs; });
    return out;
}

} // namespace loom::trace::torch
