#pragma once

#include "engine/trace/TraceEvent.h"

#include <cstdint>
#include <string>
#include <vector>

namespace loom::trace {

// The planner's simulated step against one measured step, kind by kind: what the "predicted against
// measured" table shows and how the overlay is scaled. Times are the mean per rank over the ranks that have
// events of the step (the simulated schedule holds one rank per stage, a run every rank), in seconds.
struct KindComparison {
    std::string kind; // "forward", "backward", "recompute", "optimizer", "TP", "PP", "DP", "CP", "all-to-all",
                      // "bubble", "step"
    double predicted = 0, measured = 0;
    double ratio = 0; // measured ÷ predicted, 0 when nothing was predicted
};

struct StepComparison {
    std::int32_t step = -1; // the measured step compared
    std::int64_t measuredStartNs = 0, measuredEndNs = 0;
    std::int64_t predictedStartNs = 0, predictedEndNs = 0;
    double scale = 1; // measured step ÷ predicted step: the overlay's time scale
    std::vector<KindComparison> kinds; // in the order of the list above, "step" last
};

// The last step every rank of `measured` has finished (its optimizer events), else the last step; -1 when
// the events carry no step.
std::int32_t lastCompleteStep(const std::vector<TraceEvent>& measured);

// Compares the simulated step (all of `predicted`) with step `step` of `measured`.
StepComparison compareStep(const std::vector<TraceEvent>& predicted, const std::vector<GroupInfo>& predictedGroups,
    const std::vector<TraceEvent>& measured, const std::vector<GroupInfo>& measuredGroups, std::int32_t step);

} // namespace loom::trace
