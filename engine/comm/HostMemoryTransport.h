#pragma once

#include "engine/comm/Transport.h"

#include <cstddef>
#include <vector>

namespace loom::comm {

// The part of a Transport that is the same for every backend over host memory (MPI, and a host
// Communicator's point-to-point calls): reductions and copies on the CPU, scratch in host vectors. The
// backend supplies the messages.
class HostMemoryTransport : public Transport {
public:
    void reduce(void* dst, const void* src, std::size_t count, DType type, ReduceOp op) override;
    void copy(void* dst, const void* src, std::size_t bytes) override;
    void* scratch(std::size_t bytes, int slot) override;

private:
    std::vector<std::vector<std::byte>> m_scratch;
};

} // namespace loom::comm
