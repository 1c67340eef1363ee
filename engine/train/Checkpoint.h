#pragma once

#include "engine/comm/Communicator.h"
#include "engine/device/Device.h"
#include "engine/train/Optimizer.h"
#include "engine/train/Parameters.h"

#include <cstdint>
#include <optional>
#include <string>

namespace loom::train {

// Checkpoints that any layout can resume from. A checkpoint is a folder `DIR/step-N/` holding
//   checkpoint.json            {"loom_checkpoint": 1, "step", "adam_steps", "seed", "model", "layout"}
//   <tensor>.f32               each parameter as its global (unsharded) row-major fp32 array
//   <tensor>.adam_m.f32, .adam_v.f32   AdamW's moments, likewise
// Every rank writes the slices it owns at their global positions (pwrite), in parallel; a rank reads
// back whatever slices its own layout gives it, so tensor, pipeline and data-parallel degrees, ZeRO and
// stage ranges may all change between save and resume. The folder is written as step-N.partial and
// renamed when every rank has finished; `DIR/latest` names the newest complete one.
struct CheckpointInfo {
    std::int64_t step = 0; // steps completed
    std::int64_t adamSteps = 0;
    std::uint64_t seed = 0;
    std::string modelJson;
    std::string layoutJson;
};

// What this rank writes and reads: which tensors it is the writer of (the first copy of each element in
// the world), and its optimizer range.
struct CheckpointRole {
    bool writesParams = false; // data-parallel rank 0
    bool writesMoments = false; // data-parallel rank 0, or every rank of the DP group with ZeRO-1
    std::vector<bool> ownsTensor; // per tensor: TP-sharded, or replicated and TP rank 0; tied copies once
};

// A range [begin, end) of the flat parameter layout this rank writes or reads, with where its data lives:
// element `begin` of each array is the range's first element; a null array is neither written nor read.
// ZeRO-2/3 give one slice per unit piece (ShardedParams::slices).
struct CheckpointSlice {
    std::size_t begin = 0, end = 0;
    float* values = nullptr;
    float* m = nullptr;
    float* v = nullptr;
    // Where `values` lives (ParamSet::values.device()): written and read through a host copy. Null: host
    // memory, used in place.
    device::Device* device = nullptr;
    // Where `m` and `v` live (AdamW::device()), likewise.
    device::Device* momentDevice = nullptr;
};

// Collective over `world` (rank 0 writes the metadata and renames the folder; every rank learns whether
// every rank wrote its part). Throws std::runtime_error naming the folder and the problem.
void saveCheckpoint(const std::string& dir, const CheckpointInfo& info, ParamSet& params, const AdamW& adam,
    const CheckpointRole& role, comm::Communicator& world);
// The same from slices: tensor i is written where ownsTensor[i] is true (ZeRO-2/3: every DP rank its pieces).
void saveCheckpoint(const std::string& dir, const CheckpointInfo& info, ParamSet& params,
    const std::vector<CheckpointSlice>& slices, const std::vector<bool>& ownsTensor, comm::Communicator& world);
// The newest complete checkpoint under `dir`, or nullopt when there is none.
std::optional<std::string> latestCheckpoint(const std::string& dir);
CheckpointInfo readCheckpointInfo(const std::string& folder);
// Fills this rank's parameters and its optimizer range from `folder`.
void loadCheckpoint(const std::string& folder, ParamSet& params, AdamW& adam);
// Fills the slices' arrays from `folder`.
void loadCheckpoint(const std::string& folder, const ParamSet& params, const std::vector<CheckpointSlice>& slices);

} // namespace loom::train
