// The timeline's item model and index: QAbstractItemModelTester over resets and live appends, folding of
// tiny events into pixel runs, hit testing, range statistics and the simulated overlay.

#include "ViewsTest.h"
#include "engine/plan/CostModel.h"
#include "views/Colors.h"
#include "views/TimelineModel.h"
#include "views/TimelineView.h"

#include <QAbstractItemModelTester>

using namespace loom;
using namespace loom::views;

namespace {
trace::TraceEvent makeEvent(
    int rank, trace::Lane lane, trace::EventKind kind, std::int64_t start, std::int64_t end, int step = 0)
{
    trace::TraceEvent e;
    e.rank = rank;
    e.lane = lane;
    e.kind = kind;
    e.startNs = start;
    e.endNs = end;
    e.step = step;
    e.microBatch = 0;
    return e;
}
} // namespace

class TestTimelineModel : public QObject {
    Q_OBJECT
private slots:
    void modelUnderTesterWithLiveAppends()
    {
        TimelineModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QSignalSpy inserted(&model, &QAbstractItemModel::rowsInserted);
        QSignalSpy reset(&model, &QAbstractItemModel::modelReset);
        // Step 0 creates the lanes (a reset); later steps extend them in order (row insertions).
        std::vector<trace::TraceEvent> step0;
        for (int r = 0; r < 4; ++r) {
            step0.push_back(makeEvent(r, trace::Lane::Compute, trace::EventKind::Forward, 0, 100));
            step0.push_back(makeEvent(r, trace::Lane::Comm, trace::EventKind::AllReduce, 100, 150));
        }
        model.append(step0);
        QCOMPARE(reset.count(), 1);
        QCOMPARE(model.rowCount(), 8);
        for (int s = 1; s <= 5; ++s) {
            std::vector<trace::TraceEvent> step;
            for (int r = 0; r < 4; ++r) {
                step.push_back(
                    makeEvent(r, trace::Lane::Compute, trace::EventKind::Forward, s * 1000, s * 1000 + 100, s));
                step.push_back(
                    makeEvent(r, trace::Lane::Compute, trace::EventKind::Backward, s * 1000 + 100, s * 1000 + 300, s));
            }
            model.append(step);
        }
        QCOMPARE(reset.count(), 1);
        QCOMPARE(inserted.count(), 5 * 4);
        QCOMPARE(model.rowCount(model.index(0, 0)), 1 + 10);
        QCOMPARE(model.data(model.index(0, 0)).toString(), QStringLiteral("rank 0 compute"));
        QCOMPARE(
            model.data(model.index(10, TimelineModel::Name, model.index(0, 0))).toString(), QStringLiteral("backward"));
        // A late event (out of order) re-sorts its lane through a reset, and the index stays right.
        model.append({ makeEvent(2, trace::Lane::Compute, trace::EventKind::Optimizer, 500, 600) });
        QCOMPARE(reset.count(), 2);
        const auto& lane = model.timeline().rows()[std::size_t(model.timeline().rowIndex(2, trace::Lane::Compute))];
        QVERIFY(std::is_sorted(lane.start.begin(), lane.start.end()));
        QVERIFY(model.timeline().event(lane.events[1]).kind == trace::EventKind::Optimizer);
        for (std::size_t i = 1; i < lane.maxEnd.size(); ++i)
            QVERIFY(lane.maxEnd[i] >= lane.maxEnd[i - 1]);
        // A new lane is a reset too.
        model.append({ makeEvent(9, trace::Lane::Compute, trace::EventKind::Forward, 7000, 7100, 6) });
        QCOMPARE(model.rowCount(), 9);
        QCOMPARE(model.timeline().firstStep(), 0);
        QCOMPARE(model.timeline().lastStep(), 6);
    }

    // An imported GPU trace: each device stream is a row of its own under its rank, after the host's lanes,
    // whatever the lane of its events (a stream of NCCL kernels is a comm row).
    void deviceStreamsAreRows()
    {
        TimelineModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        std::vector<trace::TraceEvent> events;
        for (int r = 0; r < 2; ++r) {
            auto gemm = makeEvent(r, trace::Lane::Compute, trace::EventKind::Forward, 0, 100);
            gemm.stream = 7;
            auto copy = makeEvent(r, trace::Lane::Compute, trace::EventKind::Memcpy, 150, 160);
            copy.stream = 7;
            auto nccl = makeEvent(r, trace::Lane::Comm, trace::EventKind::AllReduce, 50, 200);
            nccl.stream = 20;
            events.insert(events.end(),
                { gemm, copy, nccl, makeEvent(r, trace::Lane::Compute, trace::EventKind::Forward, 0, 300) });
        }
        model.setEvents(events);
        const auto& rows = model.timeline().rows();
        QCOMPARE(rows.size(), std::size_t(6));
        QCOMPARE(model.index(1, TimelineModel::Name).data().toString(), QString("rank 0 stream 7"));
        QCOMPARE(model.index(2, TimelineModel::Name).data().toString(), QString("rank 0 stream 20"));
        QCOMPARE(rows[1].events.size(), std::size_t(2));
        QVERIFY(rows[2].lane == trace::Lane::Comm);
        QCOMPARE(model.timeline().rowOf(events[2]), 2);
        QCOMPARE(model.timeline().rowIndex(1, trace::Lane::Compute), 3);
    }

    void foldingDrawsPixelsNotEvents()
    {
        // 200,000 back-to-back 10 ns events on one lane: at full zoom they fold into one box per run.
        std::vector<trace::TraceEvent> events;
        for (int i = 0; i < 200000; ++i)
            events.push_back(
                makeEvent(0, trace::Lane::Compute, i % 2 ? trace::EventKind::Backward : trace::EventKind::Forward,
                    std::int64_t(i) * 10, std::int64_t(i) * 10 + 10));
        // One long event in the middle must still be drawn on its own.
        events.push_back(makeEvent(0, trace::Lane::Compute, trace::EventKind::Optimizer, 2000000, 2600000));
        TimelineView view;
        view.resize(1200, 200);
        view.show();
        TimelineData data;
        data.setEvents(events);
        view.setTimeline(std::move(data));
        QImage image(view.viewport()->size(), QImage::Format_ARGB32_Premultiplied);
        view.viewport()->render(&image);
        QVERIFY2(view.lastPaintBoxes() <= 4, qPrintable(QString::number(view.lastPaintBoxes())));
        // The long optimizer event is hit where it is drawn.
        const auto [t0, t1] = view.window();
        const int x = TimelineView::kLabelWidth
            + int(double(2300000 - t0) / double(t1 - t0) * (view.viewport()->width() - TimelineView::kLabelWidth));
        const std::int64_t hit = view.eventAt(QPoint(x, TimelineView::kRulerHeight + 5));
        QVERIFY(hit >= 0);
        QVERIFY(view.timeline().event(std::uint32_t(hit)).kind == trace::EventKind::Optimizer);
        // Deep zoom draws single events again.
        view.setWindow(1000, 1100);
        view.viewport()->render(&image);
        QVERIFY(view.lastPaintBoxes() >= 10);
    }

    // TimelineData::fold, apart from any painting: which boxes a row draws in a window of 1000 pixels
    // (1 ns a pixel over [0, 1000]). Events are (start, end, kind); "boxes" lists each box as
    // first-last:r (a run) or first:e (an event drawn alone), by row position.
    void foldBoxes_data()
    {
        QTest::addColumn<QList<QList<qint64>>>("spans");
        QTest::addColumn<bool>("hideOptimizer");
        QTest::addColumn<QString>("boxes");
        using K = trace::EventKind;
        const qint64 f = qint64(K::Forward), o = qint64(K::Optimizer);
        QTest::newRow("wide events alone")
            << QList<QList<qint64>> { { 0, 10, f }, { 20, 30, f }, { 40, 100, o } } << false << "0:e 1:e 2:e";
        QList<QList<qint64>> tiny;
        for (qint64 t = 100; t < 300; ++t)
            tiny.append({ t, t + 1, t % 2 ? f : qint64(K::Backward) });
        QTest::newRow("touching tiny events: one run") << tiny << false << "0-199:r";
        QList<QList<qint64>> gap = tiny.mid(0, 50);
        for (qint64 t = 400; t < 450; ++t)
            gap.append({ t, t + 1, f });
        QTest::newRow("a gap of pixels: two runs") << gap << false << "0-49:r 50-99:r";
        QList<QList<qint64>> mixed = tiny.mid(0, 20);
        mixed.append({ 125, 400, o });
        for (qint64 t = 500; t < 520; ++t)
            mixed.append({ t, t + 1, f });
        QTest::newRow("a wide event between runs") << mixed << false << "0-19:r 20:e 21-40:r";
        QTest::newRow("a hidden wide event") << mixed << true << "0-19:r 21-40:r";
        QList<QList<qint64>> hiddenFirst { { 600, 601, o }, { 700, 701, o }, { 701, 702, f }, { 702, 703, o } };
        QTest::newRow("hidden events start no run but one may cover them") << hiddenFirst << true << "2-3:r";
        QTest::newRow("outside the window")
            << QList<QList<qint64>> { { -50, -10, f }, { 2000, 2100, f } } << false << "";
        QTest::newRow("clipped at the window's edges")
            << QList<QList<qint64>> { { -50, 10, f }, { 990, 1500, o } } << false << "0:e 1:e";
    }
    void foldBoxes()
    {
        QFETCH(QList<QList<qint64>>, spans);
        QFETCH(bool, hideOptimizer);
        QFETCH(QString, boxes);
        std::vector<trace::TraceEvent> events;
        for (const auto& s : spans)
            events.push_back(makeEvent(0, trace::Lane::Compute, trace::EventKind(s[2]), s[0], s[1]));
        TimelineData data;
        data.setEvents(events);
        TimelineData::Hidden hidden;
        if (hideOptimizer)
            hidden = [](const trace::TraceEvent& e) { return e.kind == trace::EventKind::Optimizer; };
        std::vector<TimelineData::Box> out { TimelineData::Box {} }; // cleared by fold
        data.fold(data.rows().front(), 0, 1000, 150, 1150, hidden, out);
        QStringList got;
        for (const auto& b : out) {
            got << (b.run ? QStringLiteral("%1-%2:r").arg(b.first).arg(b.last) : QStringLiteral("%1:e").arg(b.first));
            QVERIFY(b.x0 >= 150 && b.x1 <= 1150 && b.x0 <= b.x1);
            QCOMPARE(b.folded(), b.run && b.last > b.first);
        }
        QCOMPARE(got.join(' '), boxes);
        for (std::size_t i = 1; i < out.size(); ++i) // in drawing order, never overlapping
            QVERIFY(out[i].first > out[i - 1].last && out[i].x0 >= out[i - 1].x1);
    }

    void foldedRunsShowTheirMix()
    {
        // 100,000 pairs of a 10 ns forward and a 30 ns backward, 50 % busy (40 ns idle after each pair): at full
        // zoom they fold, and the folded box must show both colours, backward three times as tall as forward,
        // over half the lane's height (the idle half stays hatched), not one solid colour.
        std::vector<trace::TraceEvent> events;
        for (std::int64_t i = 0; i < 100000; ++i) {
            events.push_back(makeEvent(0, trace::Lane::Compute, trace::EventKind::Forward, i * 80, i * 80 + 10));
            events.push_back(makeEvent(0, trace::Lane::Compute, trace::EventKind::Backward, i * 80 + 10, i * 80 + 40));
        }
        TimelineData data;
        data.setEvents(events);
        const auto& row = data.rows().front();
        const TimelineData::Mix all = data.mix(row, 0, row.events.size());
        QCOMPARE(all[0], 100000 * 10);
        QCOMPARE(all[1], 100000 * 30);
        QCOMPARE(data.mix(row, 2, 4)[1], 30); // one pair
        TimelineView view;
        view.resize(1200, 200);
        view.show();
        view.setTimeline(std::move(data));
        QImage image(view.viewport()->size(), QImage::Format_ARGB32_Premultiplied);
        view.viewport()->render(&image);
        QVERIFY(view.lastPaintBoxes() <= 4);
        // Sample a column in the middle of the lane: count forward blue and backward green pixels.
        const int x = TimelineView::kLabelWidth + (image.width() - TimelineView::kLabelWidth) / 2;
        int blue = 0, green = 0;
        for (int y = TimelineView::kRulerHeight; y < image.height(); ++y) {
            const QColor c = image.pixelColor(x, y);
            blue += c == colors::forward;
            green += c == colors::backward;
        }
        QVERIFY2(blue > 0 && green > 0, qPrintable(QStringLiteral("blue %1, green %2").arg(blue).arg(green)));
        QVERIFY2(
            green > blue && green <= 5 * blue, qPrintable(QStringLiteral("blue %1, green %2").arg(blue).arg(green)));
        // Comm events of a group learnt later move to its kind: an all-reduce of a TP group.
        TimelineData comm;
        auto ar = makeEvent(1, trace::Lane::Comm, trace::EventKind::AllReduce, 0, 100);
        ar.group = 7;
        comm.setEvents({ ar });
        QCOMPARE(comm.mix(comm.rows().front(), 0, 1)[2], 100); // unknown group: drawn as DP
        trace::GroupInfo tp;
        tp.id = 7;
        tp.kind = trace::GroupKind::Tensor;
        comm.addGroups({ tp });
        QCOMPARE(comm.mix(comm.rows().front(), 0, 1)[0], 100);
    }

    void rangeStatistics()
    {
        TimelineData data;
        auto comm = makeEvent(0, trace::Lane::Comm, trace::EventKind::AllReduce, 200, 600);
        comm.bytes = 4000;
        auto wait = makeEvent(0, trace::Lane::Compute, trace::EventKind::Wait, 500, 700);
        data.setEvents({ makeEvent(0, trace::Lane::Compute, trace::EventKind::Forward, 0, 500), wait, comm });
        const RangeStats s = rangeStats(data, 0, 1000);
        QCOMPARE(s.computeLanes, 1);
        QCOMPARE(s.commLanes, 1);
        QCOMPARE(s.computeBusy, 0.5);
        QCOMPARE(s.waitFraction, 0.2);
        QCOMPARE(s.commBusy, 0.4);
        QCOMPARE(s.bytes, 4000.0);
        QCOMPARE(s.gbPerSecond, 4000.0 / 400e-9 / 1e9);
        // A range that cuts the all-reduce in half counts half its bytes.
        QCOMPARE(rangeStats(data, 400, 1000).bytes, 2000.0);
        TimelineView view;
        view.setTimeline(data);
        QSignalSpy selected(&view, &TimelineView::rangeSelected);
        view.setSelection(0, 1000);
        QCOMPARE(selected.count(), 1);
        QCOMPARE(view.selection().events, std::size_t(3));
    }

    void overlayOfTheSimulatedStep()
    {
        const plan::Prediction p = plan::predict(test::tinyLayout());
        TimelineData simulated;
        simulated.setEvents(p.events);
        TimelineView view;
        view.resize(900, 300);
        TimelineData measured;
        measured.setEvents({ makeEvent(0, trace::Lane::Compute, trace::EventKind::Forward, 1000000, 2000000) });
        view.setTimeline(std::move(measured));
        view.setOverlay(std::move(simulated), 1000000);
        QVERIFY(view.overlay().rowIndex(0, trace::Lane::Compute) >= 0);
        QImage image(view.viewport()->size(), QImage::Format_ARGB32_Premultiplied);
        view.viewport()->render(&image); // draws without crashing, dashed boxes under rank 0
        view.setOverlay({}, 0);
        QVERIFY(view.overlay().events().empty());
    }
};

QTEST_MAIN(TestTimelineModel)
#include "tst_timelinemodel.moc"
