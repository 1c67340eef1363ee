#pragma once

#include "engine/plan/Layout.h"

#include <cstdint>
#include <string>

namespace loom::plan {

// A plain-text description of a layout for terminals and logs: model, cluster, degrees, stages and the
// rank grid (every rank up to `maxRanks`, then a count of the rest).
std::string describeLayout(const Layout& layout, std::int64_t maxRanks = 32);

// "124.4 M", "6.74 B", "1.01 T".
std::string humanCount(double value);

} // namespace loom::plan
