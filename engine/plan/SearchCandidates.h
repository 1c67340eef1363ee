#pragma once

// The candidates plan::search enumerates, one dimension at a time (engine/plan only): the device grid, the
// pipeline schedules a grid allows, the memory choices and the expert grids, and a floor under a grid's
// memory that rules out whole families of candidates before any estimate.
#include "engine/plan/Layout.h"

#include <cstdint>
#include <vector>

namespace loom::plan::searching {

struct GridChoice {
    std::int64_t tp = 1, cp = 1, pp = 1, dp = 1;
};
// Every (tp, cp, pp, dp) over `devices`: tp from the model's valid degrees, cp from `cps`, pp ≤ layers.
std::vector<GridChoice> gridChoices(const ModelSpec& model, std::int64_t devices, const std::vector<std::int64_t>& cps);

struct ScheduleChoice {
    ScheduleKind kind = ScheduleKind::OneFOneB;
    std::int64_t vpp = 1;
    std::vector<StageRange> stages; // empty: the even split; else Llama 3's (embedding and head as layers)
};
// GPipe and 1F1B; interleaved where the micro-batches fill the pipeline; the zero-bubble schedules.
std::vector<ScheduleChoice> scheduleChoices(const ModelSpec& model, std::int64_t pp, std::int64_t microBatches);

struct MemoryChoice {
    bool sp = false;
    Attention attention = Attention::Flash;
    Recompute recompute = Recompute::None;
};
// Sequence parallelism (tp > 1), attention and recomputation, less the pairs that mean the same layout
// (selective recomputation of flash attention) or none (materialised scores with ring attention).
std::vector<MemoryChoice> memoryChoices(std::int64_t tp, std::int64_t cp);

struct ExpertChoice {
    std::int64_t ep = 1, expertTp = 0; // expertTp 0: ep carved out of dp; 1: Megatron-Core's expert grid
};
// Dense models: ep 1. MoE: every ep dividing the experts and dp (Loom's carving), and every ep dividing the
// experts and tp·cp·dp but not dp on Megatron-Core's grid with the experts whole (expert_tp 1).
std::vector<ExpertChoice> expertChoices(const ModelSpec& model, const GridChoice& grid);

// A floor under the most loaded device's memory (GB) for any candidate of this grid and ZeRO stage: the
// model states of the non-expert parameters spread evenly over tp·pp, and the reserve. The busiest rank holds
// at least the mean, so a candidate whose floor exceeds the device cannot fit and need not be estimated.
double memoryFloorGB(const Layout& base, const GridChoice& grid, int zero);

} // namespace loom::plan::searching
