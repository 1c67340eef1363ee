#include "engine/trace/StepRanges.h"

#include <algorithm>
#include <map>

namespace loom::trace {

std::vector<StepRange> stepRanges(const std::vector<TraceEvent>& events)
{
    std::map<std::int32_t, StepRange> steps;
    for (const auto& e : events) {
        if (e.step < 0)
            continue;
        auto [it, fresh] = steps.try_emplace(e.step, StepRange { e.step, e.startNs, e.endNs });
        if (!fresh) {
            it->second.startNs = std::min(it->second.startNs, e.startNs);
            it->second.endNs = std::max(it->second.endNs, e.endNs);
        }
    }
    std::vector<StepRange> out;
    out.reserve(steps.size());
    for (const auto& [step, r] : steps)
        out.push_back(r);
    return out;
}

std::vector<StepRange> stepsIn(const std::vector<StepRange>& steps, std::int64_t t0, std::int64_t t1)
{
    std::vector<StepRange> out;
    for (const auto& s : steps)
        if (s.endNs > t0 && s.startNs < t1)
            out.push_back(s);
    return out;
}

} // namespace loom::trace
