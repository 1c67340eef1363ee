#pragma once

#include "engine/plan/Layout.h"
#include "engine/plan/Precision.h"

#include <array>
#include <string_view>

namespace loom::plan {

// Every value of a layout's enumerated choices, in the order the workbench offers them: the values of each
// enum's word table (Layout.h, Precision.h), so a value added to a table is offered here too
// (tst_strategychoices and tst_words check that each one round-trips through a layout file).

constexpr std::array<ScheduleKind, kScheduleWords.size()> allScheduleKinds()
{
    return valuesOf(kScheduleWords);
}

constexpr std::array<Recompute, kRecomputeWords.size()> allRecomputes()
{
    return valuesOf(kRecomputeWords);
}

constexpr std::array<AllreduceAlgorithm, kAllreduceWords.size()> allAllreduceAlgorithms()
{
    return valuesOf(kAllreduceWords);
}

constexpr std::array<RankOrder, kRankOrderWords.size()> allRankOrders()
{
    return valuesOf(kRankOrderWords);
}

constexpr std::array<Precision, kPrecisionWords.size()> allPrecisions()
{
    return valuesOf(kPrecisionWords);
}

constexpr std::array<Codec::Kind, kCodecWords.size()> allCodecKinds()
{
    return valuesOf(kCodecWords);
}

// A codec kind's word: "none", "fp16", "bf16", "int8", "int4", "topk" (whose layout text adds
// ":<fraction>"), "lz4".
constexpr std::string_view toString(Codec::Kind kind)
{
    return wordOf(kCodecWords, kind);
}

} // namespace loom::plan
