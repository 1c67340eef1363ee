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

// FP8 training (Transformer Engine): the block's linear layers run their GEMMs in FP8 while the rest of the
// model keeps `precision` (bf16/fp16). Delayed scaling takes each tensor's scale from an amax history of
// earlier steps; current (per-tensor, "tensorwise") scaling measures the tensor first; MXFP8 (Blackwell)
// scales each block of 32 values; blockwise scales 128×128 weight and 1×128 activation tiles (DeepSeek-V3's
// recipe on Hopper). Layout key "fp8"; absent: none.
enum class Fp8Recipe { None, Delayed, Current, Mxfp8, Blockwise };

constexpr std::string_view toString(Fp8Recipe r)
{
    switch (r) {
    case Fp8Recipe::None:
        return "none";
    case Fp8Recipe::Delayed:
        return "delayed";
    case Fp8Recipe::Current:
        return "current";
    case Fp8Recipe::Mxfp8:
        return "mxfp8";
    case Fp8Recipe::Blockwise:
        return "blockwise";
    }
    return "none";
}

constexpr std::optional<Fp8Recipe> fp8RecipeFromString(std::string_view s)
{
    for (Fp8Recipe r :
        { Fp8Recipe::None, Fp8Recipe::Delayed, Fp8Recipe::Current, Fp8Recipe::Mxfp8, Fp8Recipe::Blockwise })
        if (toString(r) == s)
            return r;
    return std::nullopt;
}

// Bytes per element of a tensor held in this precision.
constexpr int bytesPerElement(Precision p)
{
    return p == Precision::Fp32 ? 4 : 2;
}

} // namespace loom::plan
