#pragma once

#include "engine/plan/Diagnostics.h"
#include "engine/plan/Layout.h"

#include <cstdint>
#include <string>

namespace loom::plan {

// The interleaved schedule's micro-batch group N (parallel.microbatch_group): how many micro-batches run
// back to back through one model chunk before the next chunk. Megatron-LM's rule, which Loom shares: p ≤ N ≤ m,
// and m mod N is 0 or at least p. Returns an empty string when N fits, else a sentence naming the fix.
std::string microbatchGroupProblem(std::int64_t pp, std::int64_t microBatches, std::int64_t group);

// Checks parallel.microbatch_group against the schedule, pp and the micro-batches per step; a group on a
// schedule other than "interleaved" is a warning (it changes nothing there, as in Megatron-LM).
void validateMicrobatchGroup(const Layout& layout, const Diagnostics& known, Diagnostics& out);

} // namespace loom::plan
