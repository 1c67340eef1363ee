// Paint time of the timeline with 1,000,000 events on 64 ranks (compute and comm lanes), offscreen, at full,
// medium and deep zoom, with the tracks grouped by stage (a header with busy, bubble and comm share above each
// stage's eight ranks) and every flow arrow in view drawn (sends to the next stage, receives from the one
// before); reference: the same widget painting the same rows with no events, in the same run.
// Prints each zoom's median over repeated paints and, last, the worst median as median_paint_ms=<number>
// (goal <= 16). Run: QT_QPA_PLATFORM=offscreen build/dev/bin/bench_timeline [--events N] [--json] [--flat]
#include "views/TimelineView.h"

#include <QApplication>
#include <QImage>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <tuple>

using namespace loom;

namespace {

std::vector<trace::TraceEvent> syntheticRun(std::size_t total, int ranks)
{
    // A pipeline-like run: each rank alternates forward and backward passes of micro-batches on its compute
    // lane, with a send to the next stage's rank (eight ranks a stage) after each on its comm lane, which the
    // peer's comm lane receives at the same time; the last stage's comm lane only receives.
    std::vector<trace::TraceEvent> out;
    out.reserve(total + total / 8);
    std::mt19937 rng(1);
    const std::size_t perRank = total / std::size_t(ranks);
    std::vector<std::vector<trace::TraceEvent>> received(static_cast<std::size_t>(ranks));
    for (int r = 0; r < ranks; ++r) {
        std::int64_t t = std::int64_t(r) * 2000;
        // Each rank's events in start order per lane; its receives were made by the rank before.
        std::size_t made = received[std::size_t(r)].size();
        out.insert(out.end(), received[std::size_t(r)].begin(), received[std::size_t(r)].end());
        for (std::size_t i = 0; made < perRank; ++i) {
            trace::TraceEvent e;
            e.rank = r;
            e.stage = r / 8;
            e.step = std::int32_t(i / 48);
            e.microBatch = std::int32_t((i / 3) % 16);
            const int k = int(i % 3);
            e.lane = k == 2 ? trace::Lane::Comm : trace::Lane::Compute;
            e.kind = k == 0 ? trace::EventKind::Forward : k == 1 ? trace::EventKind::Backward : trace::EventKind::Send;
            e.startNs = t;
            e.endNs = t + 20000 + std::int64_t(rng() % 40000);
            e.bytes = k == 2 ? 1 << 20 : 0;
            if (k != 2)
                t = e.endNs + std::int64_t(rng() % 3000);
            if (k == 2) {
                if (r + 8 >= ranks)
                    continue; // the last stage sends nothing on
                e.peer = r + 8;
                trace::TraceEvent v = e;
                v.rank = r + 8;
                v.stage = (r + 8) / 8;
                v.kind = trace::EventKind::Recv;
                v.peer = r;
                received[std::size_t(r + 8)].push_back(v);
            }
            out.push_back(e);
            ++made;
        }
    }
    // Each lane's events in start order, as a recording has them (a lane out of order is re-sorted on load).
    std::stable_sort(out.begin(), out.end(), [](const trace::TraceEvent& a, const trace::TraceEvent& b) {
        return std::tie(a.rank, a.lane, a.startNs) < std::tie(b.rank, b.lane, b.startNs);
    });
    return out;
}

double medianPaintMs(views::TimelineView& view, QImage& image, int reps)
{
    std::vector<double> ms;
    for (int i = 0; i < reps; ++i) {
        const auto a = std::chrono::steady_clock::now();
        view.viewport()->render(&image);
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

} // namespace

int main(int argc, char** argv)
{
    qputenv(
        "QT_QPA_PLATFORM", qgetenv("QT_QPA_PLATFORM").isEmpty() ? QByteArray("offscreen") : qgetenv("QT_QPA_PLATFORM"));
    QApplication app(argc, argv);
    std::size_t events = 1000000;
    bool json = false, flat = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--events" && i + 1 < argc)
            events = std::size_t(std::max(1000, std::atoi(argv[++i])));
        else if (a == "--json")
            json = true;
        else if (a == "--flat")
            flat = true; // no groups, no flows: the figure before they existed
    }
    const int ranks = 64;
    views::TimelineView view;
    // Tall enough that all 128 lanes are painted, not only those scrolled into view.
    view.resize(1600,
        views::TimelineView::kRulerHeight
            + ranks * (views::TimelineView::kComputeRow + views::TimelineView::kCommRow + 4)
            + ranks / 8 * (views::TimelineView::kHeaderRow + 2) + 8);
    QImage image(view.viewport()->size(), QImage::Format_ARGB32_Premultiplied);

    views::TimelineData data;
    auto all = syntheticRun(events, ranks);
    // Reference: the same rows with one tiny event each (the labels, ruler and idle hatching only).
    std::vector<trace::TraceEvent> skeleton;
    for (int r = 0; r < ranks; ++r)
        for (auto lane : { trace::Lane::Compute, trace::Lane::Comm }) {
            trace::TraceEvent e;
            e.rank = r;
            e.lane = lane;
            e.startNs = 0;
            e.endNs = all.back().endNs;
            e.kind = trace::EventKind::Wait;
            skeleton.push_back(e);
        }
    data.setEvents(skeleton);
    view.setTimeline(data);
    const double reference = medianPaintMs(view, image, 15);

    if (!flat) {
        view.setGrouping(views::TimelineView::Grouping::Stage);
        view.setFlows(views::TimelineView::Flows::All);
    }
    const auto load = std::chrono::steady_clock::now();
    data.setEvents(std::move(all));
    view.setTimeline(std::move(data));
    const double loadMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load).count();
    const std::int64_t begin = view.timeline().beginNs(), end = view.timeline().endNs(), span = end - begin;
    struct Zoom {
        const char* name;
        std::int64_t width;
    };
    const Zoom zooms[] = { { "full", span }, { "medium", span / 100 }, { "deep", span / 10000 } };
    double worst = 0;
    std::string jsonOut = "{\"events\": " + std::to_string(view.timeline().events().size()) + ", \"ranks\": 64";
    std::printf("bench_timeline: %zu events on %d ranks (%zu lanes) loaded and indexed in %.0f ms\n",
        view.timeline().events().size(), ranks, view.timeline().rows().size(), loadMs);
    std::printf("reference: the same %zu lanes with no events paint in %.2f ms (median)\n",
        view.timeline().rows().size(), reference);
    for (const Zoom& z : zooms) {
        const std::int64_t mid = begin + span / 2;
        view.setWindow(mid - z.width / 2, mid + z.width / 2);
        const double ms = medianPaintMs(view, image, 15);
        worst = std::max(worst, ms);
        std::printf("%-6s zoom (%.3g ms of trace): median paint %.2f ms, %zu boxes and %zu flows drawn, %.2fx the "
                    "reference\n",
            z.name, double(z.width) / 1e6, ms, view.lastPaintBoxes(), view.lastPaintFlows(),
            ms / std::max(1e-9, reference));
        jsonOut += std::string(", \"") + z.name + "_ms\": " + std::to_string(ms);
    }
    if (json)
        std::printf("%s, \"reference_ms\": %f, \"median_paint_ms\": %f}\n", jsonOut.c_str(), reference, worst);
    std::printf("median_paint_ms=%.2f\n", worst);
    return worst <= 16.0 ? 0 : 1;
}
