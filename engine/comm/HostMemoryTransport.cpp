#include "engine/comm/HostMemoryTransport.h"

#include <cstring>

namespace loom::comm {

void HostMemoryTransport::reduce(void* dst, const void* src, std::size_t count, DType type, ReduceOp op)
{
    reduceHost(dst, src, count, type, op);
}

void HostMemoryTransport::copy(void* dst, const void* src, std::size_t bytes)
{
    if (bytes)
        std::memmove(dst, src, bytes);
}

void* HostMemoryTransport::scratch(std::size_t bytes, int slot)
{
    const auto s = static_cast<std::size_t>(slot);
    if (m_scratch.size() <= s)
        m_scratch.resize(s + 1);
    if (m_scratch[s].size() < bytes)
        m_scratch[s].resize(bytes);
    return m_scratch[s].data();
}

} // namespace loom::comm
