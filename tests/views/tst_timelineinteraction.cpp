// The timeline as an instrument, driven through real events on the widgets (offscreen): clicking an event
// for its details and its collective's members; Shift+dragging an area (and dragging on the ruler) for the
// table by kind and by rank, checked against trace stats' computeStats, sorted by a header click, copied
// with Ctrl+C; the step row; the legend hiding a kind; groups collapsing, their headers' figures, pinning;
// flow arrows (sends to receives, and in a real GPU trace launches to kernels); accelerating keys, Ctrl+wheel, F and
// back / forward; search.
#include "TimelineFixture.h"
#include "ViewsTest.h"
#include "engine/bridges/TorchTrace.h"
#include "engine/trace/TraceFlows.h"
#include "engine/trace/TraceStats.h"
#include "views/Colors.h"
#include "views/TimelineDetails.h"
#include "views/TimelineLegend.h"
#include "views/TimelinePane.h"
#include "views/TimelineView.h"

#include <QApplication>
#include <QCheckBox>
#include <QClipboard>
#include <QComboBox>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QToolButton>

using namespace loom;
using namespace loom::views;

namespace {

int xOf(const TimelineView& v, std::int64_t t)
{
    const auto [t0, t1] = v.window();
    return TimelineView::kLabelWidth
        + int(double(t - t0) / double(t1 - t0) * (v.viewport()->width() - TimelineView::kLabelWidth));
}

// The viewport point in the middle of event `i`.
QPoint pointOf(const TimelineView& v, std::uint32_t i)
{
    const auto& e = v.timeline().event(i);
    const QRect r = v.rowRect(v.timeline().rowOf(e)); // a device stream's own row for a kernel
    return { xOf(v, (e.startNs + e.endNs) / 2), r.center().y() };
}

std::uint32_t find(const TimelineData& d, int rank, trace::EventKind kind, int step)
{
    for (std::uint32_t i = 0; i < d.events().size(); ++i)
        if (d.event(i).rank == rank && d.event(i).kind == kind && d.event(i).step == step)
            return i;
    qFatal("no such event");
}

struct Pane {
    TimelinePane pane;
    TimelineView* view = pane.view();
    explicit Pane(const test::FixtureRun& run, QSize size = { 1400, 700 })
    {
        pane.resize(size);
        pane.show();
        TimelineData data;
        data.setEvents(run.events, run.groups);
        view->setTimeline(std::move(data));
    }
    void paint()
    {
        QImage image(view->viewport()->size(), QImage::Format_ARGB32_Premultiplied);
        view->viewport()->render(&image);
    }
};

} // namespace

class TestTimelineInteraction : public QObject {
    Q_OBJECT
private slots:
    void clickShowsDetailsAndTheCollectiveOnEveryRank()
    {
        const auto run = test::pipelineFixture(2, 2, 2);
        Pane p(run);
        const std::uint32_t ar = find(p.view->timeline(), 2, trace::EventKind::AllReduce, 1);
        QTest::mouseClick(p.view->viewport(), Qt::LeftButton, {}, pointOf(*p.view, ar));
        QCOMPARE(p.view->selectedEvent(), std::int64_t(ar));
        // Ranks 2 and 3 (stage 1's DP group) take part in it, not stage 0's ranks.
        QCOMPARE(p.view->highlighted().size(), std::size_t(2));
        for (auto i : p.view->highlighted())
            QCOMPARE(p.view->timeline().event(i).stage, 1);
        const QString text = p.pane.details()->eventText()->text();
        for (const char* part : { "all-reduce (DP)", "rank 2", "stage 1", "step 1", "8,388,608 bytes", "busbw",
                 "DP group of pp=1", "The same all-reduce on 2 ranks", "rank 3: start" })
            QVERIFY2(text.contains(QLatin1String(part)), qPrintable(text));
        // busbw of an all-reduce of 2: algbw × 2(n-1)/n = algbw.
        QVERIFY(text.contains(QStringLiteral("41.94 GB/s algbw, 41.94 GB/s busbw")));
        // Clicking empty space clears it.
        QTest::mouseClick(p.view->viewport(), Qt::LeftButton, {}, QPoint(p.view->viewport()->width() - 2, 690));
        QCOMPARE(p.view->selectedEvent(), std::int64_t(-1));
    }

    void areaTableAgreesWithTraceStats()
    {
        const auto run = test::pipelineFixture(2, 2, 3);
        Pane p(run);
        p.view->fit();
        // Shift+drag from before the first event to after the last, over every track.
        const int x0 = xOf(*p.view, p.view->timeline().beginNs() - 1),
                  x1 = xOf(*p.view, p.view->timeline().endNs() + 1);
        const int y0 = TimelineView::kRulerHeight + 1, y1 = p.view->rowRect(7).bottom();
        QTest::mousePress(p.view->viewport(), Qt::LeftButton, Qt::ShiftModifier, QPoint(x0, y0));
        QTest::mouseMove(p.view->viewport(), QPoint((x0 + x1) / 2, (y0 + y1) / 2));
        QTest::mouseMove(p.view->viewport(), QPoint(x1, y1));
        QTest::mouseRelease(p.view->viewport(), Qt::LeftButton, Qt::ShiftModifier, QPoint(x1, y1));
        const auto& area = p.view->area();
        QCOMPARE(area.lanes, 8);
        trace::StatsContext context;
        context.groups = run.groups;
        const trace::TraceStats stats = trace::computeStats(run.events, context);
        auto* model = p.pane.details()->areaModel();
        QCOMPARE(model->rowCount(), int(area.byKind.size()));
        for (const auto& c : stats.collectives) {
            bool seen = false;
            for (int r = 0; r < model->rowCount(); ++r) {
                if (!model->index(r, AreaTableModel::What)
                         .data(Qt::UserRole)
                         .toString()
                         .startsWith(QString::fromStdString(c.kind)))
                    continue;
                seen = true;
                QCOMPARE(model->index(r, AreaTableModel::Count).data(Qt::UserRole).toLongLong(), qlonglong(c.count));
                QCOMPARE(model->index(r, AreaTableModel::Bytes).data(Qt::UserRole).toDouble(), double(c.bytes));
                QVERIFY(
                    std::abs(model->index(r, AreaTableModel::Total).data(Qt::UserRole).toLongLong() * 1e-9 - c.seconds)
                    < 1e-12);
                QVERIFY(std::abs(model->index(r, AreaTableModel::Bandwidth).data(Qt::UserRole).toDouble() - c.algbwGBs)
                    < 1e-9 * c.algbwGBs);
            }
            QVERIFY2(seen, c.kind.c_str());
        }
        // A click on the count header sorts by count (descending after a second click).
        auto* table = p.pane.details()->table();
        auto* header = table->horizontalHeader();
        // Every column fits the panel at the pane's default split: the last one (GB/s) is not cut at its edge,
        // and Copy still writes the full header names.
        QApplication::processEvents();
        const int right = header->sectionViewportPosition(AreaTableModel::Bandwidth)
            + header->sectionSize(AreaTableModel::Bandwidth);
        QVERIFY2(right <= table->viewport()->width(),
            qPrintable(QStringLiteral("%1 > %2").arg(right).arg(table->viewport()->width())));
        QVERIFY(p.pane.details()->tableText().startsWith(QStringLiteral("kind\tcount\ttotal\tmean\tshare of range")));
        const QPoint countHeader(header->sectionViewportPosition(AreaTableModel::Count) + 5, header->height() / 2);
        QTest::mouseClick(header->viewport(), Qt::LeftButton, {}, countHeader);
        const auto countAt = [table](int r) {
            return table->model()->index(r, AreaTableModel::Count).data(Qt::UserRole).toLongLong();
        };
        const Qt::SortOrder first = header->sortIndicatorOrder();
        for (int r = 1; r < table->model()->rowCount(); ++r)
            QVERIFY(first == Qt::AscendingOrder ? countAt(r - 1) <= countAt(r) : countAt(r - 1) >= countAt(r));
        QTest::mouseClick(header->viewport(), Qt::LeftButton, {}, countHeader);
        QVERIFY(header->sortIndicatorOrder() != first);
        // By rank: four ranks, each with its share of its two lanes.
        p.pane.details()->byBox()->setFocus();
        QTest::keyClick(p.pane.details()->byBox(), Qt::Key_Down);
        QCOMPARE(model->by(), AreaTableModel::By::Rank);
        QCOMPARE(model->rowCount(), 4);
        // Ctrl+C in the table copies it as shown, tab-separated.
        table->setFocus();
        QTest::keyClick(table, Qt::Key_C, Qt::ControlModifier);
        const QStringList lines = QApplication::clipboard()->text().split(QLatin1Char('\n'), Qt::SkipEmptyParts);
        QCOMPARE(lines.size(), 5);
        QVERIFY(lines[0].startsWith(QStringLiteral("rank\tcount\ttotal")));
        QCOMPARE(lines[1].split(QLatin1Char('\t')).size(), int(AreaTableModel::ColumnCount));
        // F zooms to the area.
        p.view->setFocus();
        QTest::keyClick(p.view, Qt::Key_F);
        QCOMPARE(p.view->window(), std::pair(area.t0, area.t1));
    }

    void rulerRangeAndAreaOfSomeLanes()
    {
        const auto run = test::pipelineFixture(2, 2, 2);
        Pane p(run);
        // A drag on the ruler: a range over every lane.
        QTest::mousePress(p.view->viewport(), Qt::LeftButton, {}, QPoint(300, 5));
        QTest::mouseMove(p.view->viewport(), QPoint(600, 5));
        QTest::mouseRelease(p.view->viewport(), Qt::LeftButton, {}, QPoint(600, 5));
        QCOMPARE(p.view->area().lanes, 8);
        QVERIFY(p.view->selection().t1 > p.view->selection().t0);
        // Shift+drag over rank 0's two lanes only.
        const QRect compute = p.view->rowRect(0), comm = p.view->rowRect(1);
        QTest::mousePress(p.view->viewport(), Qt::LeftButton, Qt::ShiftModifier, QPoint(200, compute.top() + 2));
        QTest::mouseMove(p.view->viewport(), QPoint(1300, comm.bottom() - 1));
        QTest::mouseRelease(p.view->viewport(), Qt::LeftButton, Qt::ShiftModifier, QPoint(1300, comm.bottom() - 1));
        QCOMPARE(p.view->area().lanes, 2);
        QCOMPARE(p.view->area().byRank.size(), std::size_t(1));
        QCOMPARE(p.view->area().byRank[0].rank, 0);
    }

    void stepRowNamesTheStepsInView()
    {
        const auto run = test::pipelineFixture(2, 1, 6);
        Pane p(run);
        QCOMPARE(p.view->steps().size(), std::size_t(6));
        QCOMPARE(p.view->stepsInView().size(), std::size_t(6));
        // Following a live run keeps the newest three steps (and a sliver of the one before).
        TimelineModel live;
        p.view->setModel(&live);
        p.view->setFollowing(true);
        for (int s = 0; s < 6; ++s) {
            std::vector<trace::TraceEvent> step;
            for (const auto& e : run.events)
                if (e.step == s)
                    step.push_back(e);
            live.append(step);
        }
        const auto kept = p.view->stepsInView();
        QVERIFY(kept.size() >= 3 && kept.size() <= 4);
        QCOMPARE(kept.back().step, 5);
        QVERIFY(kept[kept.size() - 3].step == 3);
        p.view->setModel(nullptr);
    }

    void legendHidesAKind()
    {
        const auto run = test::pipelineFixture(2, 1, 1);
        Pane p(run);
        const auto greens = [&p] {
            QImage image(p.view->viewport()->size(), QImage::Format_ARGB32_Premultiplied);
            p.view->viewport()->render(&image);
            int n = 0;
            for (int y = TimelineView::kRulerHeight; y < image.height(); ++y)
                for (int x = TimelineView::kLabelWidth; x < image.width(); x += 3)
                    n += image.pixelColor(x, y) == colors::backward;
            return n;
        };
        QVERIFY(greens() > 100);
        auto* chip = p.pane.legend()->chip(LegendKind::Backward);
        QTest::mouseClick(chip, Qt::LeftButton);
        QVERIFY(p.view->kindHidden(LegendKind::Backward));
        QCOMPARE(greens(), 0);
        // A hidden kind cannot be clicked either.
        const std::uint32_t b = find(p.view->timeline(), 0, trace::EventKind::Backward, 0);
        QCOMPARE(p.view->eventAt(pointOf(*p.view, b)), std::int64_t(-1));
        QTest::mouseClick(chip, Qt::LeftButton);
        QVERIFY(!p.view->kindHidden(LegendKind::Backward));
        QVERIFY(greens() > 100);
        QCOMPARE(p.view->eventAt(pointOf(*p.view, b)), std::int64_t(b));
    }

    void groupsCollapseAndTracksPin()
    {
        const auto run = test::pipelineFixture(4, 2, 2);
        Pane p(run);
        auto* group = p.pane.groupBox();
        group->setFocus();
        QTest::keyClick(group, Qt::Key_Down); // by stage
        QCOMPARE(p.view->grouping(), TimelineView::Grouping::Stage);
        QCOMPARE(p.view->groupCount(), 4);
        // Each header's figures are the engine's for its ranks.
        const auto s1 = p.view->groupSummary(1);
        const auto expected
            = trace::summarizeTracks(run.events, { 2, 3 }, p.view->timeline().beginNs(), p.view->timeline().endNs());
        QCOMPARE(s1.members, 2);
        QCOMPARE(s1.busy, expected.busy);
        QCOMPARE(s1.comm, expected.comm);
        QVERIFY(s1.busy > 0.2 && s1.busy < 0.6 && s1.comm > 0);
        // Clicking the header's name folds the group: its lanes are drawn by the header alone.
        const QRect header = p.view->headerRect(1);
        QVERIFY(!header.isEmpty());
        const int below = p.view->rowRect(p.view->timeline().rowIndex(4, trace::Lane::Compute)).top();
        QTest::mouseClick(p.view->viewport(), Qt::LeftButton, {}, QPoint(20, header.center().y()));
        QVERIFY(p.view->collapsed(1));
        QVERIFY(p.view->rowRect(p.view->timeline().rowIndex(2, trace::Lane::Compute)).isEmpty());
        QVERIFY(p.view->rowRect(p.view->timeline().rowIndex(4, trace::Lane::Compute)).top() < below);
        p.paint();
        QTest::mouseClick(p.view->viewport(), Qt::LeftButton, {}, QPoint(20, p.view->headerRect(1).center().y()));
        QVERIFY(!p.view->collapsed(1));
        // Collapse all: four headers, no lanes.
        QTest::mouseClick(p.pane.findChild<QCheckBox*>(), Qt::LeftButton);
        for (int g = 0; g < 4; ++g)
            QVERIFY(p.view->collapsed(g));
        QVERIFY(p.view->rowRect(0).isEmpty());
        QTest::mouseClick(p.pane.findChild<QCheckBox*>(), Qt::LeftButton);
        // Ctrl+click on rank 6's name pins its lane under the ruler.
        const int row6 = p.view->timeline().rowIndex(6, trace::Lane::Compute);
        QTest::mouseClick(
            p.view->viewport(), Qt::LeftButton, Qt::ControlModifier, QPoint(20, p.view->rowRect(row6).center().y()));
        QVERIFY(p.view->pinned(row6));
        QCOMPARE(p.view->rowRect(row6).top(), TimelineView::kRulerHeight);
        p.paint();
        QTest::mouseClick(
            p.view->viewport(), Qt::LeftButton, Qt::ControlModifier, QPoint(20, p.view->rowRect(row6).center().y()));
        QVERIFY(!p.view->pinned(row6));
        // By DP replica: a rank's place in its DP group.
        QTest::keyClick(group, Qt::Key_Down);
        QCOMPARE(p.view->grouping(), TimelineView::Grouping::Replica);
        QCOMPARE(p.view->groupCount(), 2);
        QCOMPARE(p.view->groupSummary(0).members, 4);
    }

    void flowsFromSendsToReceives()
    {
        const auto run = test::pipelineFixture(3, 1, 2);
        Pane p(run);
        p.paint();
        QCOMPARE(p.view->lastPaintFlows(), std::size_t(0));
        // The selected send's arrow, across stages.
        const std::uint32_t send = find(p.view->timeline(), 1, trace::EventKind::Send, 1);
        QTest::mouseClick(p.view->viewport(), Qt::LeftButton, {}, pointOf(*p.view, send));
        QCOMPARE(p.view->selectedEvent(), std::int64_t(send));
        p.paint();
        QCOMPARE(p.view->lastPaintFlows(), std::size_t(1));
        // All flows in view: two sends a step.
        QTest::mouseClick(p.pane.flowsBox(), Qt::LeftButton);
        QCOMPARE(p.view->flows(), TimelineView::Flows::All);
        p.paint();
        QCOMPARE(p.view->lastPaintFlows(), std::size_t(4));
    }

    // A real GPU trace (HTA's MI250 fixture, tests/bridges/fixtures/hta): a clicked kernel on its stream row
    // gets the arrow from its launch on the host row, and its details name the launch and the launch delay;
    // the clicked launch gets the arrow to its kernel; All flows draws one arrow per launch / kernel pair.
    void launchToKernelFlowsOfARealGpuTrace()
    {
        const auto imported = trace::importTorchTraces(
            { { "mi250", {}, LOOM_SOURCE_DIR "/tests/bridges/fixtures/hta/mi250-minitoy.json.gz" } });
        test::FixtureRun run { imported.events, imported.groups };
        Pane p(run);
        const auto flows = trace::launchFlows(p.view->timeline().events());
        QCOMPARE(flows.size(), std::size_t(16));
        const trace::Flow f = flows[flows.size() / 2];
        const auto& launch = p.view->timeline().event(f.from);
        const auto& kernel = p.view->timeline().event(f.to);
        QVERIFY(launch.kind == trace::EventKind::Launch && kernel.stream >= 0);
        QVERIFY(p.view->timeline().rowOf(launch) != p.view->timeline().rowOf(kernel)); // host row, stream row
        const std::int64_t pad = std::max<std::int64_t>(kernel.endNs - launch.startNs, 1000);
        p.view->setWindow(launch.startNs - pad, kernel.endNs + pad);
        QTest::mouseClick(p.view->viewport(), Qt::LeftButton, {}, pointOf(*p.view, f.to));
        QCOMPARE(p.view->selectedEvent(), std::int64_t(f.to));
        p.paint();
        QCOMPARE(p.view->lastPaintFlows(), std::size_t(1));
        const QString details = p.view->eventDescription(f.to);
        QVERIFY2(details.contains(QStringLiteral("launched by the host call")), qPrintable(details));
        QVERIFY2(details.contains(QStringLiteral("launch delay")), qPrintable(details));
        QTest::mouseClick(p.view->viewport(), Qt::LeftButton, {}, pointOf(*p.view, f.from));
        QCOMPARE(p.view->selectedEvent(), std::int64_t(f.from));
        p.paint();
        QCOMPARE(p.view->lastPaintFlows(), std::size_t(1));
        QVERIFY(p.view->eventDescription(f.from).contains(QStringLiteral("on stream")));
        QTest::keyClick(p.view, Qt::Key_Escape);
        p.view->fit();
        QTest::mouseClick(p.pane.flowsBox(), Qt::LeftButton);
        p.paint();
        QCOMPARE(p.view->lastPaintFlows(), flows.size());
        // The legend's launch chip hides the launches, and the arrows that start from them.
        QTest::mouseClick(p.pane.legend()->chip(LegendKind::Launch), Qt::LeftButton);
        QVERIFY(p.view->kindHidden(LegendKind::Launch));
        p.paint();
        QCOMPARE(p.view->lastPaintFlows(), std::size_t(0));
    }

    void navigationAcceleratesAndGoesBack()
    {
        const auto run = test::pipelineFixture(2, 2, 4);
        Pane p(run);
        p.view->setFocus();
        const auto span = [&p] { return double(p.view->window().second - p.view->window().first); };
        const auto start = p.view->window();
        double before = span();
        QTest::keyClick(p.view, Qt::Key_W);
        QVERIFY(std::abs(before / span() - 1.25) < 0.01);
        // A held key repeats faster: the fourth repeat zooms by 1.25^2.
        for (int i = 0; i < 4; ++i) {
            before = span();
            QKeyEvent repeat(QEvent::KeyPress, Qt::Key_W, Qt::NoModifier, QString(), true);
            QApplication::sendEvent(p.view, &repeat);
        }
        QVERIFY2(std::abs(before / span() - 1.5625) < 0.01, qPrintable(QString::number(before / span())));
        const auto zoomed = p.view->window();
        // Ctrl+wheel: 2× a notch.
        before = span();
        QWheelEvent wheel(QPointF(700, 100), p.view->viewport()->mapToGlobal(QPointF(700, 100)), QPoint(),
            QPoint(0, 120), Qt::NoButton, Qt::ControlModifier, Qt::NoScrollPhase, false);
        QApplication::sendEvent(p.view->viewport(), &wheel);
        QVERIFY(std::abs(before / span() - 2.0) < 0.01);
        // Back: before the wheel, then before the keys; forward again.
        QTest::keyClick(p.view, Qt::Key_Left, Qt::AltModifier);
        QCOMPARE(p.view->window(), zoomed);
        QTest::keyClick(p.view, Qt::Key_Left, Qt::AltModifier);
        QCOMPARE(p.view->window(), start);
        QTest::keyClick(p.view, Qt::Key_Right, Qt::AltModifier);
        QCOMPARE(p.view->window(), zoomed);
        QTest::mouseClick(p.pane.backButton(), Qt::LeftButton);
        QCOMPARE(p.view->window(), start);
    }

    void searchStepsThroughMatches()
    {
        const auto run = test::pipelineFixture(2, 2, 3);
        Pane p(run);
        QTest::keyClicks(p.pane.searchField(), QStringLiteral("backward stage:1"));
        QTest::keyClick(p.pane.searchField(), Qt::Key_Return);
        QCOMPARE(p.pane.matches().size(), std::size_t(6)); // ranks 2 and 3, three steps
        QCOMPARE(p.pane.searchStatus()->text(), QStringLiteral("1 / 6"));
        const auto first = p.view->selectedEvent();
        QVERIFY(first >= 0);
        QVERIFY(p.view->timeline().event(std::uint32_t(first)).kind == trace::EventKind::Backward);
        QCOMPARE(p.view->timeline().event(std::uint32_t(first)).stage, 1);
        QTest::keyClick(p.pane.searchField(), Qt::Key_Return);
        QCOMPARE(p.pane.searchStatus()->text(), QStringLiteral("2 / 6"));
        QVERIFY(p.view->selectedEvent() != first);
        QTest::keyClick(p.pane.searchField(), Qt::Key_Return, Qt::ShiftModifier);
        QCOMPARE(p.view->selectedEvent(), first);
        // A match out of view is brought into it.
        p.view->setWindow(0, 1000);
        QTest::keyClick(p.pane.searchField(), Qt::Key_Return);
        const auto& e = p.view->timeline().event(std::uint32_t(p.view->selectedEvent()));
        QVERIFY(e.startNs >= p.view->window().first && e.endNs <= p.view->window().second);
        // A query that is not one says why.
        p.pane.searchField()->clear();
        QTest::keyClicks(p.pane.searchField(), QStringLiteral("rank:x"));
        QTest::keyClick(p.pane.searchField(), Qt::Key_Return);
        QVERIFY(p.pane.searchStatus()->text().contains(QStringLiteral("number")));
    }
};

QTEST_MAIN(TestTimelineInteraction)
#include "tst_timelineinteraction.moc"
