#pragma once

#include "engine/comm/Communicator.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace loom::tools {

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
