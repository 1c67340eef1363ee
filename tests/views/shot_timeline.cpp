// Screenshots of the timeline for docs/workbench.md, made through the same mouse and key events a user
// would use (docs/screenshots.sh runs it under Xvfb): a 64-stage schedule grouped by stage and collapsed,
// flow arrows across stages, an area's table, a launch's arrow to its kernel in a real GPU trace, and
// (given a store with a finished run) the measured timeline against the prediction.
// Usage: shot_timeline IMAGES_DIR [--db STORE --run ID]
#include "engine/bridges/TorchTrace.h"
#include "engine/plan/CostModel.h"
#include "engine/trace/TraceFlows.h"
#include "profiles/Store.h"
#include "tests/views/ViewsTest.h"
#include "views/RunMonitor.h"
#include "views/RunTimelinePanel.h"
#include "views/TimelinePane.h"
#include "views/TimelineView.h"

#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QTest>

#include <cstdio>

using namespace loom;
using namespace loom::views;

namespace {

int xOf(const TimelineView& v, std::int64_t t)
{
    const auto [t0, t1] = v.window();
    return TimelineView::kLabelWidth
        + int(double(t - t0) / double(t1 - t0) * (v.viewport()->width() - TimelineView::kLabelWidth));
}

// The pane at the size of the shots, shown, with `data` in its timeline; false if it could not be shown.
bool showPane(TimelinePane& pane, TimelineData data)
{
    pane.resize(1600, 900);
    pane.show();
    if (!QTest::qWaitForWindowExposed(&pane))
        return false;
    pane.view()->setTimeline(std::move(data));
    return true;
}

bool save(QWidget& w, const QString& path)
{
    QApplication::processEvents();
    const bool ok = w.grab().save(path);
    std::printf("%s %s\n", ok ? "wrote" : "could not write", qPrintable(path));
    return ok;
}

} // namespace

int main(int argc, char** argv)
{
    QApplication app(argc, argv);
    if (argc < 2) {
        std::fprintf(stderr, "usage: shot_timeline IMAGES_DIR [--db STORE --run ID]\n");
        return 2;
    }
    const QString dir = QString::fromLocal8Bit(argv[1]);
    bool ok = true;
    {
        // The planner's schedule of Megatron-LM's 1T model: 64 stages.
        const plan::Prediction p = plan::predict(test::megatron1t());
        TimelinePane pane;
        TimelineData data;
        data.setEvents(p.events);
        if (!showPane(pane, std::move(data)))
            return 1;
        TimelineView* view = pane.view();
        pane.groupBox()->setFocus();
        QTest::keyClick(pane.groupBox(), Qt::Key_Down); // group by stage
        QTest::mouseClick(pane.findChild<QCheckBox*>(), Qt::LeftButton); // collapse every group
        ok &= save(pane, dir + QStringLiteral("/timeline-64-stages-collapsed.png"));
        QTest::mouseClick(pane.findChild<QCheckBox*>(), Qt::LeftButton);
        pane.groupBox()->setFocus();
        QTest::keyClick(pane.groupBox(), Qt::Key_Up); // no groups
        // Zoom on the first stages' warm-up and click a send of stage 2: its arrow to stage 3, then all.
        std::int64_t sendIndex = -1;
        for (std::size_t i = 0; i < view->timeline().events().size(); ++i) {
            const auto& e = view->timeline().event(std::uint32_t(i));
            if (e.kind == trace::EventKind::Send && e.stage == 2 && e.microBatch == 1
                && (sendIndex < 0 || e.startNs < view->timeline().event(std::uint32_t(sendIndex)).startNs))
                sendIndex = std::int64_t(i);
        }
        if (sendIndex >= 0) {
            const auto& s = view->timeline().event(std::uint32_t(sendIndex));
            const std::int64_t unit = std::max<std::int64_t>(s.durationNs(), 1);
            view->setWindow(s.startNs - 40 * unit, s.startNs + 60 * unit);
            const QRect r = view->rowRect(view->timeline().rowIndex(s.rank, s.lane));
            QTest::mouseClick(
                view->viewport(), Qt::LeftButton, {}, QPoint(xOf(*view, (s.startNs + s.endNs) / 2), r.center().y()));
            QTest::mouseClick(pane.flowsBox(), Qt::LeftButton);
            ok &= save(pane, dir + QStringLiteral("/timeline-flows.png"));
            // Shift+drag over stages 0 to 5: the area's table by kind.
            const int y0 = view->rowRect(0).top() + 2, y1 = view->rowRect(11).bottom() - 2;
            QTest::mousePress(view->viewport(), Qt::LeftButton, Qt::ShiftModifier, QPoint(300, y0));
            QTest::mouseMove(view->viewport(), QPoint(800, (y0 + y1) / 2));
            QTest::mouseMove(view->viewport(), QPoint(1100, y1));
            QTest::mouseRelease(view->viewport(), Qt::LeftButton, Qt::ShiftModifier, QPoint(1100, y1));
            ok &= save(pane, dir + QStringLiteral("/timeline-selection.png"));
        }
    }
    {
        // A real GPU trace (HTA's nccl-data fixture, rank 0 of 2): a kernel selected, the arrow from its launch
        // on the host row to its stream's row, and every launch's arrow in view.
        const auto imported = trace::importTorchTraces(
            { { "nccl-data-rank0", {}, LOOM_SOURCE_DIR "/tests/bridges/fixtures/hta/nccl-data-rank0.json.gz" } });
        TimelinePane pane;
        TimelineData data;
        data.setEvents(imported.events, imported.groups);
        if (!showPane(pane, std::move(data)))
            return 1;
        TimelineView* view = pane.view();
        const auto flows = trace::launchFlows(view->timeline().events());
        // The middle flow to a computation kernel of a forward or backward pass.
        std::size_t pick = flows.size();
        for (std::size_t k = flows.size() / 2; k < flows.size() && pick == flows.size(); ++k) {
            const auto& to = view->timeline().event(flows[k].to);
            if (to.kind == trace::EventKind::Forward || to.kind == trace::EventKind::Backward)
                pick = k;
        }
        if (pick < flows.size()) {
            const auto& launch = view->timeline().event(flows[pick].from);
            const auto& kernel = view->timeline().event(flows[pick].to);
            const std::int64_t span = std::max<std::int64_t>(kernel.endNs - launch.startNs, 20000);
            view->setWindow(launch.startNs - span, kernel.endNs + 2 * span);
            const QRect r = view->rowRect(view->timeline().rowOf(kernel));
            QTest::mouseClick(view->viewport(), Qt::LeftButton, {},
                QPoint(xOf(*view, (kernel.startNs + kernel.endNs) / 2), r.center().y()));
            QTest::mouseClick(pane.flowsBox(), Qt::LeftButton);
            ok &= save(pane, dir + QStringLiteral("/timeline-launch-flow.png"));
        }
    }
    for (int i = 2; i + 1 < argc; i += 2) {
        if (QLatin1String(argv[i]) != QLatin1String("--db") || i + 3 >= argc)
            continue;
        profiles::Store store(QString::fromLocal8Bit(argv[i + 1]));
        RunMonitor monitor(&store);
        RunTimelinePanel panel(&monitor);
        panel.resize(1600, 900);
        panel.show();
        if (!QTest::qWaitForWindowExposed(&panel))
            return 1;
        QString error;
        if (!monitor.open(QString::fromLocal8Bit(argv[i + 3]).toLongLong(), &error)) {
            std::fprintf(stderr, "shot_timeline: %s\n", qPrintable(error));
            return 1;
        }
        if (!QTest::qWaitFor([&] { return monitor.prediction().has_value() && !monitor.loading(); }, 20000))
            std::fprintf(stderr, "shot_timeline: no prediction for the run\n");
        QTest::mouseClick(panel.followBox(), Qt::LeftButton);
        if (panel.followBox()->isChecked())
            QTest::mouseClick(panel.followBox(), Qt::LeftButton);
        QTest::mouseClick(panel.overlayBox(), Qt::LeftButton);
        const auto& c = panel.comparison();
        const std::int64_t span = c.measuredEndNs - c.measuredStartNs;
        panel.view()->setWindow(c.measuredStartNs - span / 20, c.measuredEndNs + span / 20);
        ok &= save(panel, dir + QStringLiteral("/timeline-predicted-measured.png"));
    }
    return ok ? 0 : 1;
}
