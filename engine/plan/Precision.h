#pragma once

#include <optional>
#include <string_view>

namespace loom::plan {

enum class Precision { Fp32, Fp16, Bf16 };

constexpr std::string_view toString(Precision p)
{
    switch (p) {
    case Precision::Fp32:
        return "fp32";
    case Precision::Fp16:
        return "fp16";
    case Precision::Bf16:
        return "bf16";
    }
    return "fp32";
}

constexpr std::optional<Precision> precisionFromString(std::string_view s)
{
    if (s == "fp32")
        return Precision::Fp32;
    if (s == "fp16")
        return Precision::Fp16;
    if (s == "bf16")
        return Precision::Bf16;
    return std::nullopt;
}

// Bytes per element of a tensor held in this precision.
constexpr int bytesPerElement(Precision p)
{
    return p == Precision::Fp32 ? 4 : 2;
}

} // namespace loom::plan
