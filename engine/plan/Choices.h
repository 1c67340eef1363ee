#pragma once

#include "engine/plan/Layout.h"
#include "engine/plan/Precision.h"

#include <array>
#include <string_view>

namespace loom::plan {

// Every value of a layout's enumerated choices, in the order the workbench offers them. Their toString()
// is the layout file's word for each, so a list built from these is the file format's list; a value added
// to an enum goes here too (tst_strategychoices checks that each one round-trips through a layout file).

constexpr std::array<ScheduleKind, 7> allScheduleKinds()
{
    return { ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved, ScheduleKind::ZbH1,
        ScheduleKind::ZbH2, ScheduleKind::ZbV, ScheduleKind::DualPipe };
}

constexpr std::array<Recompute, 3> allRecomputes()
{
    return { Recompute::None, Recompute::Selective, Recompute::Full };
}

constexpr std::array<AllreduceAlgorithm, 5> allAllreduceAlgorithms()
{
    return { AllreduceAlgorithm::Auto, AllreduceAlgorithm::Library, AllreduceAlgorithm::Ring,
        AllreduceAlgorithm::Hierarchical, AllreduceAlgorithm::SharedMemory };
}

constexpr std::array<RankOrder, 2> allRankOrders()
{
    return { RankOrder::TpPpDp, RankOrder::TpDpPp };
}

constexpr std::array<Precision, 3> allPrecisions()
{
    return { Precision::Fp32, Precision::Fp16, Precision::Bf16 };
}

constexpr std::array<Codec::Kind, 7> allCodecKinds()
{
    using K = Codec::Kind;
    return { K::None, K::Fp16, K::Bf16, K::Int8, K::Int4, K::TopK, K::Lz4 };
}

// A codec kind's word: "none", "fp16", "bf16", "int8", "int4", "topk" (whose layout text adds
// ":<fraction>"), "lz4".
constexpr std::string_view toString(Codec::Kind kind)
{
    switch (kind) {
    case Codec::Kind::None:
        return "none";
    case Codec::Kind::Fp16:
        return "fp16";
    case Codec::Kind::Bf16:
        return "bf16";
    case Codec::Kind::Int8:
        return "int8";
    case Codec::Kind::Int4:
        return "int4";
    case Codec::Kind::TopK:
        return "topk";
    case Codec::Kind::Lz4:
        return "lz4";
    }
    return "none";
}

} // namespace loom::plan
