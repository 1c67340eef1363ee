#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace loom::comm {

// Element types the communication layer moves. Reductions on fp16/bf16 accumulate in fp32 per element.
// F64, I64 and U8 carry control values (losses, clocks, flags, packed records) on the world communicator.
enum class DType : std::uint8_t { F32, F16, BF16, F64, I64, U8 };
enum class ReduceOp : std::uint8_t { Sum, Max, Min };

constexpr std::size_t sizeOf(DType t)
{
    return t == DType::F32 ? 4 : t == DType::F64 || t == DType::I64 ? 8 : t == DType::U8 ? 1 : 2;
}
std::string_view toString(DType t);
std::string_view toString(ReduceOp op);

// IEEE 754 binary16 and bfloat16 conversions, round to nearest even. fp16 overflow saturates to ±65504
// rather than becoming infinity, so a compressed gradient never turns into inf.
std::uint16_t floatToHalf(float f);
float halfToFloat(std::uint16_t h);
inline std::uint16_t floatToBf16(float f)
{
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) // NaN stays NaN
        return static_cast<std::uint16_t>((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<std::uint16_t>(u >> 16);
}
inline float bf16ToFloat(std::uint16_t h)
{
    std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// dst[i] = dst[i] op src[i] for `count` elements on host memory.
void reduceHost(void* dst, const void* src, std::size_t count, DType type, ReduceOp op);

} // namespace loom::comm
