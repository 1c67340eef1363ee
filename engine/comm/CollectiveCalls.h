#pragma once

#include "engine/comm/Collectives.h"

#include <cstddef>
#include <string>
#include <vector>

namespace loom::comm {

// The CollectiveCall of each Communicator collective, built once for every backend. Codecs apply to
// all-reduces only; the others drop them. broadcastCall and allToAllVCall check their arguments against
// the group (`size` members, `groupName` for the message) and throw CommError.
CollectiveCall allReduceCall(void* data, std::size_t count, DType type, ReduceOp op, const CollectiveOptions& options);
CollectiveCall reduceScatterCall(
    const void* send, void* recv, std::size_t recvCount, DType type, ReduceOp op, const CollectiveOptions& options);
CollectiveCall allGatherCall(
    const void* send, void* recv, std::size_t sendCount, DType type, const CollectiveOptions& options);
CollectiveCall broadcastCall(
    void* data, std::size_t count, DType type, int root, int size, const std::string& groupName);
CollectiveCall barrierCall();
CollectiveCall allToAllCall(
    const void* send, void* recv, std::size_t count, DType type, const CollectiveOptions& options);
CollectiveCall allToAllVCall(const void* send, const std::vector<std::size_t>& sendCounts, void* recv,
    const std::vector<std::size_t>& recvCounts, DType type, const CollectiveOptions& options, int size,
    const std::string& groupName);

} // namespace loom::comm
