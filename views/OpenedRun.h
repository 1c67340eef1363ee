#pragma once

#include "engine/plan/CostModel.h"
#include "engine/plan/Layout.h"
#include "engine/trace/BandwidthSeries.h"
#include "engine/trace/TraceStats.h"
#include "profiles/RunStore.h"
#include "views/TimelineData.h"

#include <QString>

#include <optional>
#include <vector>

class QThread;

namespace loom::profiles {
class Store;
}

namespace loom::views {

// A stored run with everything the run view shows of it computed: its layout and prediction, the timeline's
// index over its events, the bandwidth series and the statistics. Built where the store is read (a worker
// thread for the workbench) and then moved, whole and unchanged, to the GUI thread: millions of events are
// sorted and summed there, never on the thread that paints.
struct OpenedRun {
    std::optional<profiles::RunRecord> record;
    std::vector<profiles::StepRecord> steps;
    std::optional<plan::Layout> layout; // none when the stored layout no longer reads (a profile removed)
    std::optional<plan::Prediction> prediction;
    TimelineData timeline;
    trace::BandwidthSeries bandwidth;
    std::optional<trace::TraceStats> stats; // none without events
    QThread* builtOn = nullptr; // the thread that read and computed it
    QString error; // why the run could not be read; the rest is empty then
};

// Reads run `runId` from `runs` and computes what is shown of it. `store` resolves the layout's profile
// names; both must belong to the calling thread (QtSql connections do). Never throws: failures land in error.
OpenedRun openRun(profiles::Store* store, profiles::RunStore& runs, qint64 runId);

// The prediction of a layout as the run view shows it: none when the simulator cannot replay the layout.
std::optional<plan::Prediction> runPrediction(const plan::Layout& layout);
// The bandwidth series of a layout's runs, with each rank placed on its node.
trace::BandwidthSeries bandwidthSeriesFor(const plan::Layout& layout);
// The statistics of the events in `timeline` under `layout` (engine/trace, as `loom trace stats`); none
// without events.
std::optional<trace::TraceStats> runStats(const plan::Layout& layout, const TimelineData& timeline);

} // namespace loom::views
