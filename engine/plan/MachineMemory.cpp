#include "engine/plan/MachineMemory.h"

#include "engine/plan/CostModel.h"
#include "engine/plan/TextUtil.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace loom::plan {

double hostMemoryPerRankGB(const Layout& layout)
{
    const double reserve = 0.05 * layout.cluster.device.memoryGB; // CostModel's device reserve
    return std::max(0.0, estimate(layout).memoryGB - reserve);
}

double machineMemoryGB()
{
    const long pages = ::sysconf(_SC_PHYS_PAGES), size = ::sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? double(pages) * double(size) / 1e9 : 0.0;
}

std::string machineMemoryProblem(const Layout& layout, std::int64_t ranksHere, double machineGB)
{
    if (machineGB <= 0 || ranksHere < 1)
        return {};
    const double perRank = hostMemoryPerRankGB(layout), all = perRank * double(ranksHere);
    if (!(all > machineGB)) // NaN never refuses: the estimate is advice here, not a gate on nonsense
        return {};
    auto gb = [](double x) { return text::number(std::round(x * 10) / 10); };
    return "the layout needs about " + gb(perRank) + " GB per rank by the planner's estimate, " + gb(all)
        + " GB for its " + std::to_string(ranksHere) + " rank(s) on this machine, which has " + gb(machineGB)
        + " GB: every rank would fail to allocate; use a smaller model, raise tp or pp, use memory.zero, or "
          "pass --ignore-memory to start it anyway";
}

} // namespace loom::plan
