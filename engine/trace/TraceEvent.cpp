#include "engine/trace/TraceEvent.h"

#include <chrono>

namespace loom::trace {

std::string_view toString(EventKind kind)
{
    switch (kind) {
    case EventKind::Forward:
        return "forward";
    case EventKind::Backward:
        return "backward";
    case EventKind::Recompute:
        return "recompute";
    case EventKind::Optimizer:
        return "optimizer";
    case EventKind::DataLoad:
        return "data";
    case EventKind::Checkpoint:
        return "checkpoint";
    case EventKind::Wait:
        return "wait";
    case EventKind::AllReduce:
        return "all-reduce";
    case EventKind::ReduceScatter:
        return "reduce-scatter";
    case EventKind::AllGather:
        return "all-gather";
    case EventKind::Broadcast:
        return "broadcast";
    case EventKind::Send:
        return "send";
    case EventKind::Recv:
        return "recv";
    case EventKind::Barrier:
        return "barrier";
    case EventKind::AllToAll:
        return "all-to-all";
    case EventKind::Kernel:
        return "kernel";
    case EventKind::Memcpy:
        return "memcpy";
    case EventKind::Memset:
        return "memset";
    case EventKind::Collective:
        return "collective";
    case EventKind::Weight:
        return "weight";
    case EventKind::Launch:
        return "launch";
    }
    return "unknown";
}

bool isPass(EventKind kind)
{
    return kind == EventKind::Forward || kind == EventKind::Backward || kind == EventKind::Weight
        || kind == EventKind::Recompute;
}

std::string_view toString(Lane lane)
{
    return lane == Lane::Compute ? "compute" : "comm";
}

std::string_view toString(GroupKind kind)
{
    switch (kind) {
    case GroupKind::World:
        return "world";
    case GroupKind::Tensor:
        return "TP";
    case GroupKind::Pipeline:
        return "PP";
    case GroupKind::Data:
        return "DP";
    case GroupKind::Node:
        return "node";
    case GroupKind::CrossNode:
        return "cross-node";
    case GroupKind::Other:
        return "group";
    case GroupKind::Context:
        return "CP";
    case GroupKind::Expert:
        return "EP";
    case GroupKind::ExpertData:
        return "EDP";
    }
    return "group";
}

GroupKind groupKindFromName(std::string_view name)
{
    const std::string_view first = name.substr(0, name.find(' '));
    for (auto k : { GroupKind::World, GroupKind::Tensor, GroupKind::Pipeline, GroupKind::Data, GroupKind::Node,
             GroupKind::CrossNode, GroupKind::Context, GroupKind::Expert, GroupKind::ExpertData })
        if (first == toString(k))
            return k;
    return GroupKind::Other;
}

double busBandwidthFactor(EventKind kind, std::int32_t members)
{
    const double n = members;
    if (members <= 1)
        return 1.0;
    if (kind == EventKind::AllReduce)
        return 2.0 * (n - 1) / n;
    if (kind == EventKind::AllGather || kind == EventKind::ReduceScatter || kind == EventKind::AllToAll)
        return (n - 1) / n;
    return 1.0;
}

std::string_view toString(Algorithm algorithm)
{
    switch (algorithm) {
    case Algorithm::None:
        return "none";
    case Algorithm::Library:
        return "library";
    case Algorithm::Ring:
        return "ring";
    case Algorithm::ChunkedRing:
        return "chunked";
    case Algorithm::Hierarchical:
        return "hierarchical";
    case Algorithm::TwoPhaseCompressed:
        return "two-phase-compressed";
    case Algorithm::SparseAllGather:
        return "sparse-allgather";
    case Algorithm::Auto:
        return "auto";
    case Algorithm::SharedMemory:
        return "shm";
    }
    return "none";
}

Lane laneOf(EventKind kind)
{
    switch (kind) {
    case EventKind::AllReduce:
    case EventKind::ReduceScatter:
    case EventKind::AllGather:
    case EventKind::Broadcast:
    case EventKind::Send:
    case EventKind::Recv:
    case EventKind::Barrier:
    case EventKind::AllToAll:
    case EventKind::Collective:
        return Lane::Comm;
    default:
        return Lane::Compute;
    }
}

std::int64_t nowNs()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

} // namespace loom::trace
