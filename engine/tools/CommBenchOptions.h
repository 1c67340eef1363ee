#pragma once

#include "engine/comm/Communicator.h"
#include "engine/trace/TraceEvent.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom::tools {

enum class BenchOp { AllReduce, AllGather, ReduceScatter, Broadcast, SendRecv, AllToAll };

// One collective as loom-commbench runs it, like nccl-tests' one file per collective: its --op word, how
// its buffers are sized from the per-rank element count, where its result lands and how its bus bandwidth
// is counted. `bytes` (nccl-tests' size) is the whole gathered array when perRank, else the buffer.
struct CollectiveDescriptor {
    BenchOp op;
    std::string_view name;
    bool perRank; // each rank holds bytes / ranks
    int inputBlocks; // the input is count elements times this (0: times the ranks)
    int outputBlocks; // the output buffer likewise; -1: none (the result is in place, in the input)
    trace::EventKind busKind; // what trace::busBandwidthFactor counts for it
};

inline constexpr CollectiveDescriptor kCollectives[] = {
    { BenchOp::AllReduce, "allreduce", false, 1, -1, trace::EventKind::AllReduce },
    { BenchOp::AllGather, "allgather", true, 1, 0, trace::EventKind::AllGather },
    { BenchOp::ReduceScatter, "reducescatter", true, 0, 1, trace::EventKind::ReduceScatter },
    { BenchOp::Broadcast, "broadcast", false, 1, -1, trace::EventKind::Send },
    { BenchOp::SendRecv, "sendrecv", false, 1, 1, trace::EventKind::Send },
    { BenchOp::AllToAll, "alltoall", true, 0, 0, trace::EventKind::AllToAll },
};

// The descriptor of an --op word; nullptr when there is none.
const CollectiveDescriptor* findCollective(std::string_view name);
// The --op words, "allreduce, allgather, ... or alltoall".
std::string collectiveNames(std::string_view lastSeparator = " or ");

// loom-commbench's command line, in the manner of nccl-tests.
struct CommBenchOptions {
    std::string op = "allreduce"; // allreduce | allgather | reducescatter | broadcast | sendrecv | alltoall
    comm::CollectiveAlgorithm algorithm = comm::CollectiveAlgorithm::Library;
    bool autoAlgorithm = false; // --algo auto: the tuning table's choice per size (comm/AlgorithmTuner.h)
    plan::Codec codec;
    comm::DType type = comm::DType::F32;
    std::uint64_t minBytes = 8;
    std::uint64_t maxBytes = 64ull << 20;
    double factor = 2;
    int iters = 20;
    int warmup = 5;
    bool check = false;
    bool json = false;
    bool agreementCheck = true;
    std::size_t chunkBytes = 1 << 20;
    std::size_t codecBlock = 256;
    int ranksPerNode = 0; // 0: detect from shared memory
    std::string backend = "mpi"; // mpi | gloo | nccl
    std::string reference; // "mpi": time MPI's run of each size too (with --backend gloo)
};

// Parses argv (without the program name). On a bad argument returns nullopt and sets `error` to a sentence
// that names it and the accepted values. "--help" sets `error` to the usage text and `help` to true.
std::optional<CommBenchOptions> parseCommBenchOptions(
    const std::vector<std::string>& args, std::string& error, bool& help);
// "64M" -> 67108864, "1K" -> 1024, "300" -> 300; nullopt when not a size.
std::optional<std::uint64_t> parseSize(const std::string& text);
std::string commBenchUsage();

} // namespace loom::tools
