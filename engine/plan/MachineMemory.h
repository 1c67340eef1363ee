#pragma once

#include "engine/plan/Layout.h"

#include <cstdint>
#include <string>

namespace loom::plan {

// What one rank of `layout` allocates on its host, by the planner's memory estimate (parameters,
// gradients, optimizer state, activations, the CPU engine's buffers), in GB; the 5 % that the estimate keeps
// back on a GPU for its runtime is not host memory and is left out.
double hostMemoryPerRankGB(const Layout& layout);

// This machine's physical memory in GB (0 when the system does not say).
double machineMemoryGB();

// Empty when `ranksHere` ranks of `layout` fit in `machineGB`; else one sentence saying how much they
// need and what to change. Checked before any rank starts (loom run) and before any tensor is allocated
// (loom-train), so a layout far too large fails with this sentence, not with every rank's std::bad_alloc.
std::string machineMemoryProblem(const Layout& layout, std::int64_t ranksHere, double machineGB);

} // namespace loom::plan
