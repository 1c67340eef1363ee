#include "engine/comm/DType.h"

#include <algorithm>
#include <cmath>

namespace loom::comm {

std::string_view toString(DType t)
{
    switch (t) {
    case DType::F32:
        return "fp32";
    case DType::F16:
        return "fp16";
    case DType::BF16:
        return "bf16";
    case DType::F64:
        return "fp64";
    case DType::I64:
        return "int64";
    case DType::U8:
        return "uint8";
    }
    return "fp32";
}

std::string_view toString(ReduceOp op)
{
    switch (op) {
    case ReduceOp::Sum:
        return "sum";
    case ReduceOp::Max:
        return "max";
    case ReduceOp::Min:
        return "min";
    }
    return "sum";
}

std::uint16_t floatToHalf(float f)
{
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    const std::uint32_t sign = (u >> 16) & 0x8000u;
    std::uint32_t abs = u & 0x7fffffffu;
    if (abs >= 0x7f800000u) // inf or NaN
        return static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
    if (abs >= 0x477ff000u) // rounds to >= 65520: saturate to the largest finite half
        return static_cast<std::uint16_t>(sign | 0x7bffu);
    if (abs < 0x38800000u) { // below the smallest normal half: subnormal or zero
        if (abs < 0x33000000u)
            return static_cast<std::uint16_t>(sign);
        const std::uint32_t mantissa = (abs & 0x007fffffu) | 0x00800000u;
        const int shift = 126 - static_cast<int>(abs >> 23); // 14..24
        std::uint32_t half = mantissa >> shift;
        const std::uint32_t rest = mantissa & ((1u << shift) - 1);
        const std::uint32_t midway = 1u << (shift - 1);
        if (rest > midway || (rest == midway && (half & 1u)))
            ++half;
        return static_cast<std::uint16_t>(sign | half);
    }
    // normal: rebias the exponent (127 -> 15) and round the mantissa to 10 bits, nearest even
    std::uint32_t half = ((abs - 0x38000000u) >> 13);
    const std::uint32_t rest = abs & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u)))
        ++half;
    return static_cast<std::uint16_t>(sign | half);
}

float halfToFloat(std::uint16_t h)
{
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    const std::uint32_t exponent = (h >> 10) & 0x1fu;
    std::uint32_t mantissa = h & 0x3ffu;
    std::uint32_t u;
    if (exponent == 0) {
        if (mantissa == 0) {
            u = sign;
        } else { // subnormal: normalise
            int e = -1;
            do {
                ++e;
                mantissa <<= 1;
            } while (!(mantissa & 0x400u));
            u = sign | ((112u - static_cast<std::uint32_t>(e)) << 23) | ((mantissa & 0x3ffu) << 13);
        }
    } else if (exponent == 31) {
        u = sign | 0x7f800000u | (mantissa << 13);
    } else {
        u = sign | ((exponent + 112u) << 23) | (mantissa << 13);
    }
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

namespace {

template <typename Load, typename Store>
void reduce16(std::uint16_t* dst, const std::uint16_t* src, std::size_t count, ReduceOp op, Load load, Store store)
{
    for (std::size_t i = 0; i < count; ++i) {
        const float a = load(dst[i]), b = load(src[i]);
        const float r = op == ReduceOp::Sum ? a + b : op == ReduceOp::Max ? std::max(a, b) : std::min(a, b);
        dst[i] = store(r);
    }
}

template <typename T> void reducePlain(void* dstv, const void* srcv, std::size_t count, ReduceOp op)
{
    auto* dst = static_cast<T*>(dstv);
    const auto* src = static_cast<const T*>(srcv);
    for (std::size_t i = 0; i < count; ++i)
        dst[i] = op == ReduceOp::Sum ? static_cast<T>(dst[i] + src[i])
            : op == ReduceOp::Max    ? std::max(dst[i], src[i])
                                     : std::min(dst[i], src[i]);
}

} // namespace

void reduceHost(void* dstv, const void* srcv, std::size_t count, DType type, ReduceOp op)
{
    switch (type) {
    case DType::F64:
        return reducePlain<double>(dstv, srcv, count, op);
    case DType::I64:
        return reducePlain<std::int64_t>(dstv, srcv, count, op);
    case DType::U8:
        return reducePlain<std::uint8_t>(dstv, srcv, count, op);
    default:
        break;
    }
    if (type == DType::F32) {
        auto* dst = static_cast<float*>(dstv);
        const auto* src = static_cast<const float*>(srcv);
        switch (op) {
        case ReduceOp::Sum:
            for (std::size_t i = 0; i < count; ++i)
                dst[i] += src[i];
            break;
        case ReduceOp::Max:
            for (std::size_t i = 0; i < count; ++i)
                dst[i] = std::max(dst[i], src[i]);
            break;
        case ReduceOp::Min:
            for (std::size_t i = 0; i < count; ++i)
                dst[i] = std::min(dst[i], src[i]);
            break;
        }
        return;
    }
    auto* dst = static_cast<std::uint16_t*>(dstv);
    const auto* src = static_cast<const std::uint16_t*>(srcv);
    if (type == DType::F16)
        reduce16(dst, src, count, op, halfToFloat, floatToHalf);
    else
        reduce16(dst, src, count, op, bf16ToFloat, floatToBf16);
}

} // namespace loom::comm
