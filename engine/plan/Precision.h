#pragma once

#include "engine/plan/WordTable.h"

#include <optional>
#include <string_view>

namespace loom::plan {

enum class Precision { Fp32, Fp16, Bf16 };

// The layout's words for precision ("fp32", "fp16", "bf16"), in the order the workbench offers them.
inline constexpr WordTable<Precision, 3> kPrecisionWords { { { Precision::Fp32, "fp32" }, { Precision::Fp16, "fp16" },
    { Precision::Bf16, "bf16" } } };

constexpr std::string_view toString(Precision p)
{
    return wordOf(kPrecisionWords, p);
}

constexpr std::optional<Precision> precisionFromString(std::string_view s)
{
    return valueOf(kPrecisionWords, s);
}

// FP8 training (Transformer Engine): the block's linear layers run their GEMMs in FP8 while the rest of the
// model keeps `precision` (bf16/fp16). Delayed scaling takes each tensor's scale from an amax history of
// earlier steps; current (per-tensor, "tensorwise") scaling measures the tensor first; MXFP8 (Blackwell)
// scales each block of 32 values; blockwise scales 128×128 weight and 1×128 activation tiles (DeepSeek-V3's
// recipe on Hopper). Layout key "fp8"; absent: none.
enum class Fp8Recipe { None, Delayed, Current, Mxfp8, Blockwise };

// The layout's words for the fp8 key.
inline constexpr WordTable<Fp8Recipe, 5> kFp8RecipeWords { { { Fp8Recipe::None, "none" },
    { Fp8Recipe::Delayed, "delayed" }, { Fp8Recipe::Current, "current" }, { Fp8Recipe::Mxfp8, "mxfp8" },
    { Fp8Recipe::Blockwise, "blockwise" } } };

constexpr std::string_view toString(Fp8Recipe r)
{
    return wordOf(kFp8RecipeWords, r);
}

constexpr std::optional<Fp8Recipe> fp8RecipeFromString(std::string_view s)
{
    return valueOf(kFp8RecipeWords, s);
}

// Bytes per element of a tensor held in this precision.
constexpr int bytesPerElement(Precision p)
{
    return p == Precision::Fp32 ? 4 : 2;
}

} // namespace loom::plan
