#include "views/OpenedRun.h"

#include "engine/plan/LayoutParser.h"
#include "engine/plan/RankGrid.h"
#include "profiles/ProfileCatalog.h"

#include <QCoreApplication>
#include <QThread>

namespace loom::views {

namespace {

QString tr(const char* text)
{
    return QCoreApplication::translate("loom::views::RunMonitor", text);
}

// The record, steps and events of the run, or the reason they cannot be read.
bool readStored(profiles::RunStore& runs, qint64 runId, OpenedRun& out, std::vector<trace::TraceEvent>& events)
{
    try {
        out.record = runs.run(runId);
        if (!out.record) {
            out.error = tr("There is no run %1 in the store.").arg(runId);
            return false;
        }
        out.steps = runs.steps(runId);
        events = runs.events(runId);
        return true;
    } catch (const std::exception& e) {
        out.error = tr("The run could not be read from the store: %1").arg(QString::fromUtf8(e.what()));
        return false;
    }
}

} // namespace

std::optional<plan::Prediction> runPrediction(const plan::Layout& layout)
{
    if (!plan::simulatable(layout))
        return std::nullopt;
    return plan::predict(layout);
}

trace::BandwidthSeries bandwidthSeriesFor(const plan::Layout& layout)
{
    std::vector<std::int64_t> nodeOfRank;
    const plan::RankGrid grid = plan::RankGrid::forLayout(layout);
    for (std::int64_t r = 0; r < grid.size(); ++r)
        nodeOfRank.push_back(grid.nodeOf(r));
    return trace::BandwidthSeries(std::move(nodeOfRank));
}

std::optional<trace::TraceStats> runStats(const plan::Layout& layout, const TimelineData& timeline)
{
    if (timeline.events().empty())
        return std::nullopt;
    trace::StatsContext context = plan::statsContext(layout);
    context.groups = timeline.groups();
    return trace::computeStats(timeline.events(), context);
}

OpenedRun openRun(profiles::Store* store, profiles::RunStore& runs, qint64 runId)
{
    OpenedRun out;
    out.builtOn = QThread::currentThread();
    std::vector<trace::TraceEvent> events;
    if (!readStored(runs, runId, out, events))
        return out;
    try {
        const profiles::ProfileCatalog catalog(store);
        auto read = plan::readLayout(out.record->layoutJson.toStdString(), catalog);
        const plan::Layout layout = read.layout ? *read.layout : plan::Layout {};
        if (read.layout) {
            out.prediction = runPrediction(layout);
            out.layout = std::move(read.layout);
        }
        out.bandwidth = bandwidthSeriesFor(layout);
        out.timeline.setEvents(std::move(events));
        out.bandwidth.add(out.timeline.events(), out.timeline.groups());
        out.stats = runStats(layout, out.timeline);
    } catch (const std::exception& e) {
        // A layout the planner or the statistics cannot take: say so rather than show half a run.
        OpenedRun failed;
        failed.builtOn = out.builtOn;
        failed.error = tr("The run could not be prepared for display: %1").arg(QString::fromUtf8(e.what()));
        return failed;
    }
    return out;
}

} // namespace loom::views
