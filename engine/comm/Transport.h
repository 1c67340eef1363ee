#pragma once

#include "engine/comm/DType.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace loom::comm {

// The point-to-point layer Loom's own collectives are written on (ring, chunked ring, hierarchical,
// compressed). A backend provides it over its memory space: MPI and Gloo over host buffers, NCCL over
// device buffers.
//
// Requests complete in any order; wait() blocks until one is done and throws CommError naming the peer
// when it does not finish within the backend's timeout. Messages between a pair of ranks are matched in
// the order they were posted (MPI's non-overtaking rule; NCCL's stream order).
class Transport {
public:
    using Request = std::size_t;

    virtual ~Transport() = default;
    virtual int rank() const = 0;
    virtual int size() const = 0;

    virtual Request isend(const void* data, std::size_t bytes, int peer) = 0;
    virtual Request irecv(void* data, std::size_t bytes, int peer) = 0;
    virtual void wait(Request request) = 0;
    // Waits for every request posted so far.
    virtual void waitAll() = 0;

    // dst[i] = dst[i] op src[i] in the transport's memory space.
    virtual void reduce(void* dst, const void* src, std::size_t count, DType type, ReduceOp op) = 0;
    virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;
    // Temporary memory in the transport's space, valid until the next call with the same slot.
    virtual void* scratch(std::size_t bytes, int slot) = 0;

    // Cancels what is still outstanding after a failure, so the library holds no pointer into buffers that
    // are about to be freed. The transport is not used again afterwards.
    virtual void abandon() { }

    // Bytes this rank has sent through the transport since construction.
    std::uint64_t bytesSent() const { return m_bytesSent; }
    // What the current operation is, for messages ("all-reduce #3 on DP group [0, 4]").
    void setContext(std::string context) { m_context = std::move(context); }
    const std::string& context() const { return m_context; }

protected:
    std::uint64_t m_bytesSent = 0;
    std::string m_context;
};

} // namespace loom::comm
