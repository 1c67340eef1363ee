// Reading one PyTorch profiler trace and finding its communication.
#include "engine/bridges/TorchTraceDetail.h"

#include "engine/json/JsonLimits.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <deque>
#include <map>

namespace loom::trace::torch {

namespace {

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
    // record_param_comms writes c10's names ("Float"), ops' Input type the C++ ones ("float", "c10::Half").
    static const std::map<std::string, int> sizes
        = { { "Float", 4 }, { "Half", 2 }, { "BFloat16", 2 }, { "Double", 8 }, { "Long", 8 }, { "Int", 4 },
              { "Short", 2 }, { "Char", 1 }, { "Byte", 1 }, { "Bool", 1 }, { "Float8_e4m3fn", 1 }, { "Float8_e5m2", 1 },
              { "float", 4 }, { "double", 8 }, { "c10::Half", 2 }, { "c10::BFloat16", 2 }, { "long int", 8 },
              { "long", 8 }, { "int", 4 }, { "short int", 2 }, { "short", 2 }, { "signed char", 1 },
              { "unsigned char", 1 }, { "bool", 1 }, { "c10::Float8_e4m3fn", 1 }, { "c10::Float8_e5m2", 1 } };
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

// Bytes of an op's tensors from Input Dims × Input type (the first tensor argument: what a collective sends).
std::uint64_t tensorBytes(const nlohmann::json& args)
{
    const auto dims = args.find("Input Dims"), types = args.find("Input type");
    if (dims == args.end() || types == args.end() || !dims->is_array() || !types->is_array())
        return 0;
    for (std::size_t i = 0; i < dims->size() && i < types->size(); ++i) {
        const auto& d = (*dims)[i];
        const int size = (*types)[i].is_string() ? dtypeBytes((*types)[i].get<std::string>()) : 0;
        if (!d.is_array() || d.empty() || size == 0)
            continue;
        std::uint64_t n = 1;
        for (const auto& x : d) {
            if (!x.is_number_integer() || x.get<std::int64_t>() < 0 || x.get<std::int64_t>() > (std::int64_t(1) << 40))
                return 0;
            n *= static_cast<std::uint64_t>(x.get<std::int64_t>());
            if (n > (std::uint64_t(1) << 50))
                return 0;
        }
        return n * static_cast<std::uint64_t>(size);
    }
    return 0;
}

} // namespace

// What an event's args say about a collective: record_param_comms' own fields, else for a c10d:: / nccl: /
// gloo: op its name and the size of its first tensor.
CommArgs commArgsOf(const nlohmann::json& args, const std::string& name)
{
    CommArgs c;
    if (!args.is_object())
        return c;
    if (args.contains("Collective name")) {
        c.present = true;
        c.collective = text(args, "Collective name");
        const std::int64_t in = integer(args, "In msg nelems", 0), out = integer(args, "Out msg nelems", 0);
        c.dtype = text(args, "dtype");
        c.bytes = static_cast<std::uint64_t>(std::max<std::int64_t>({ in, out, 0 })) * dtypeBytes(c.dtype);
        c.groupSize = static_cast<std::int32_t>(std::clamp<std::int64_t>(integer(args, "Group size", 0), 0, 1 << 24));
        c.groupRanks = rankList(text(args, "Process Group Ranks"));
        c.groupName = text(args, "Process Group Name");
        const std::string desc = text(args, "Process Group Description");
        if (!desc.empty() && desc != "undefined")
            c.groupName += (c.groupName.empty() ? "" : ":") + desc;
        const std::int64_t src = integer(args, "Src Rank", -1), dst = integer(args, "Dst Rank", -1);
        c.peer = static_cast<std::int32_t>(std::clamp<std::int64_t>(dst >= 0 ? dst : src, -1, 1 << 24));
        return c;
    }
    const auto colon = name.find(':');
    if (name.rfind("c10d::", 0) == 0)
        c.collective = name.substr(6);
    else if (colon != std::string::npos && name.find("::") == std::string::npos
        && (name.rfind("nccl:", 0) == 0 || name.rfind("gloo:", 0) == 0 || name.rfind("mpi:", 0) == 0
            || name.rfind("ucc:", 0) == 0))
        c.collective = name.substr(colon + 1);
    if (!c.collective.empty()) {
        while (!c.collective.empty() && c.collective.back() == '_') // c10d::allreduce_
            c.collective.pop_back();
        c.bytes = tensorBytes(args);
        const auto types = args.find("Input type");
        if (types != args.end() && types->is_array() && !types->empty() && (*types)[0].is_string())
            c.dtype = (*types)[0].get<std::string>();
    }
    return c;
}

std::optional<EventKind> collectiveKind(const std::string& name)
{
    static const std::map<std::string, EventKind> kinds
        = { { "allreduce", EventKind::AllReduce }, { "reducescatter", EventKind::ReduceScatter },
              { "allgather", EventKind::AllGather }, { "broadcast", EventKind::Broadcast }, { "send", EventKind::Send },
              { "recv", EventKind::Recv }, { "recvanysource", EventKind::Recv }, { "barrier", EventKind::Barrier },
              { "alltoall", EventKind::AllToAll }, { "alltoallv", EventKind::AllToAll } };
    const auto it = kinds.find(normalised(name));
    return it == kinds.end() ? std::nullopt : std::optional(it->second);
}

std::string ncclKernelCollective(const std::string& name)
{
    if (name.rfind("nccl", 0) != 0)
        return {};
    std::string kind;
    if (const auto at = name.find("Kernel_");
        name.rfind("ncclKernel_", 0) == 0 || name.rfind("ncclDevKernel_", 0) == 0) {
        const auto from = at + 7;
        kind = name.substr(from, name.find_first_of("_(", from) - from);
    } else { // NCCL before 2.8: ncclAllReduceRingLLKernel_sum_f32, ncclBroadcastTreeLLKernel_copy_i8
        std::size_t end = 4;
        while (end < name.size() && std::isalpha(static_cast<unsigned char>(name[end])))
            ++end;
        kind = name.substr(4, end - 4);
        for (const char* tail : { "Kernel", "LL128", "LL", "Simple", "Ring", "Tree", "CollNet", "NVLS" })
            for (auto at = kind.find(tail); at != std::string::npos && at > 0; at = kind.find(tail))
                kind.erase(at);
    }
    return kind == "SendRecv" || kind == "Generic" ? std::string() : kind;
}

namespace {

bool startsWith(const std::string& s, const char* p)
{
    return s.rfind(p, 0) == 0;
}
bool contains(const std::string& s, const char* p)
{
    return s.find(p) != std::string::npos;
}

} // namespace

KernelType kernelType(const std::string& n)
{
    // hta/common/types.py: CommunicateKernelGroupingPattern, MemoryKernelGroupingPattern and the inverse of
    // ComputeKernelGroupingPattern, in that order (Python's re.match: anchored at the start).
    if (startsWith(n, "nccl") || startsWith(n, "hip") || startsWith(n, "hccl") || contains(n, "ncclKernel"))
        return KernelType::Communication;
    if (startsWith(n, "Memcpy") || startsWith(n, "Memset") || startsWith(n, "hipMemcpy") || startsWith(n, "hipMemset")
        || startsWith(n, "dma"))
        return KernelType::Memory;
    const bool launch = startsWith(n, "cuda") && n.find("LaunchKernel", 4) != std::string::npos;
    const bool excluded = contains(n, "Memcpy") || contains(n, "Memset") || contains(n, "dma") || contains(n, "Sync")
        || startsWith(n, "Stream Wait Event") || launch || startsWith(n, "runFunction") || startsWith(n, "job_exe")
        || startsWith(n, "packet") || startsWith(n, "pe_exe") || startsWith(n, "cpum_exe_subgraph")
        || startsWith(n, "collective_subgraph_execution");
    return excluded ? KernelType::Other : KernelType::Computation;
}

std::vector<CommEvent> communication(const RankTrace& trace, std::vector<std::string>& skipped)
{
    // Host-only traces (gloo, mpi): the backend's own ops time the transfer; record_param_comms, around or
    // inside the op on the same thread, gives its sizes and group.
    std::vector<CommEvent> ops, params;
    std::vector<std::uint32_t> opThread, paramThread;
    for (const auto& e : trace.events) {
        if (e.gpu || e.comm < 0)
            continue;
        const CommArgs& c = trace.comms[static_cast<std::size_t>(e.comm)];
        const std::string& name = trace.nameOf(e);
        const bool backend = !c.present && name.find("::") == std::string::npos && name.find(':') != std::string::npos;
        if (!backend && !c.present)
            continue;
        const auto kind = collectiveKind(c.collective);
        if (!kind) {
            if (backend)
                skipped.push_back(c.collective);
            else
                params.push_back({ EventKind::Barrier, e.startNs, e.endNs, c, "" }), paramThread.push_back(~0u);
            continue;
        }
        (backend ? ops : params)
            .push_back({ *kind, e.startNs, e.endNs, c,
                backend ? name.substr(0, name.find(':')) + " ops" : std::string("record_param_comms") });
        (backend ? opThread : paramThread).push_back(e.thread);
    }
    if (ops.empty()) {
        std::vector<CommEvent> out;
        for (std::size_t i = 0; i < params.size(); ++i)
            if (paramThread[i] != ~0u)
                out.push_back(params[i]);
        std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.startNs < b.startNs; });
        return out;
    }
    for (std::size_t i = 0; i < ops.size(); ++i) {
        for (std::size_t k = 0; k < params.size(); ++k) {
            const auto& p = params[k];
            const bool around = p.startNs <= ops[i].startNs && p.endNs >= ops[i].endNs;
            const bool within = p.startNs >= ops[i].startNs && p.endNs <= ops[i].endNs;
            if (paramThread[k] == opThread[i] && p.kind == ops[i].kind && (around || within)) {
                ops[i].args = p.args;
                break;
            }
        }
    }
    std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.startNs < b.startNs; });
    return ops;
}

} // namespace loom::trace::torch
