// Launch -> kernel flows of imported GPU traces, computed in engine/trace: which launch feeds which device
// event (same rank, same correlation; a graph launch feeds several), HTA's launch delay and queue length on
// figures worked out by hand, the Chrome trace round trip of the correlation (and older traces without it),
// the reader's limits on it, and statistics that leave launches out. The same flows on real GPU traces are
// checked in tests/bridges/tst_torchtrace_hta.
#include "engine/trace/ChromeTrace.h"
#include "engine/trace/LaunchStats.h"
#include "engine/trace/TraceFlows.h"
#include "engine/trace/TraceStats.h"

#include <QTest>

#include <sstream>

using namespace loom::trace;

namespace {

TraceEvent launch(std::int32_t rank, std::int64_t correlation, std::int64_t start, std::int64_t end)
{
    TraceEvent e;
    e.rank = rank;
    e.kind = EventKind::Launch;
    e.lane = Lane::Compute;
    e.step = 0;
    e.startNs = start;
    e.endNs = end;
    e.correlation = correlation;
    return e;
}

TraceEvent work(std::int32_t rank, EventKind kind, std::int32_t stream, std::int64_t correlation, std::int64_t start,
    std::int64_t end)
{
    TraceEvent e;
    e.rank = rank;
    e.kind = kind;
    e.lane = laneOf(kind);
    e.stream = stream;
    e.step = 0;
    e.startNs = start;
    e.endNs = end;
    e.correlation = correlation;
    return e;
}

// Rank 0: launch 1 (0-10 ns) -> kernel on stream 7 (30-80); launch 2 (20-25) -> a graph of two kernels on
// stream 7 (80-90) and stream 8 (40-60); a kernel of correlation 9 whose launch is not in the trace. Rank 1: a
// launch and a kernel that reuse correlation 1 (each rank counts its own), 100-104 -> 150-170.
std::vector<TraceEvent> gpuRun()
{
    return { launch(0, 1, 0, 10), launch(0, 2, 20, 25), work(0, EventKind::Forward, 7, 1, 30, 80),
        work(0, EventKind::AllReduce, 8, 2, 40, 60), work(0, EventKind::Kernel, 7, 2, 80, 90),
        work(0, EventKind::Memcpy, 7, 9, 95, 99), launch(1, 1, 100, 104),
        work(1, EventKind::Backward, 3, 1, 150, 170) };
}

} // namespace

class LaunchFlows : public QObject {
    Q_OBJECT

private slots:
    void launchesFeedTheirKernels()
    {
        const auto events = gpuRun();
        const auto flows = launchFlows(events);
        QCOMPARE(flows.size(), std::size_t(4)); // the kernel of correlation 9 has no launch
        const std::vector<std::pair<std::uint32_t, std::uint32_t>> expected { { 0, 2 }, { 1, 3 }, { 1, 4 }, { 6, 7 } };
        for (std::size_t k = 0; k < flows.size(); ++k) {
            QCOMPARE(flows[k].from, expected[k].first);
            QCOMPARE(flows[k].to, expected[k].second);
            QCOMPARE(events[flows[k].to].rank, events[flows[k].from].rank);
        }
        // allFlows merges them with the pipeline's, ordered by their origin's start.
        auto mixed = events;
        auto send = work(0, EventKind::Send, -1, -1, 15, 18);
        send.peer = 1;
        auto recv = work(1, EventKind::Recv, -1, -1, 16, 19);
        recv.peer = 0;
        mixed.push_back(send);
        mixed.push_back(recv);
        const auto all = allFlows(mixed);
        QCOMPARE(all.size(), std::size_t(5));
        for (std::size_t k = 1; k < all.size(); ++k)
            QVERIFY(mixed[all[k - 1].from].startNs <= mixed[all[k].from].startNs);
        QCOMPARE(all[1].from, std::uint32_t(8)); // the send, at 15 ns, between launch 1 (0) and launch 2 (20)
    }

    // HTA's figures by hand. Delays (work start - launch end): 30 - 10 = 20, 40 - 25 = 15, 80 - 25 = 55 on rank
    // 0; 150 - 104 = 46 on rank 1. Queue of rank 0 stream 7: +1 at 0, +1 at 20, -1 at 30, -1 at 80 -> 1, 2, 1, 0
    // (mean 1, max 2); stream 8: +1 at 20, -1 at 40 -> 1, 0.
    void launchDelayAndQueueLength()
    {
        const LaunchStats s = computeLaunchStats(gpuRun());
        QCOMPARE(s.perRank.size(), std::size_t(2));
        const RankLaunchStats& r0 = s.perRank[0];
        QCOMPARE(r0.rank, 0);
        QCOMPARE(r0.pairs, std::int64_t(3));
        QCOMPARE(r0.meanDelayNs, 30.0);
        QCOMPARE(r0.medianDelayNs, 20.0);
        QCOMPARE(r0.maxDelayNs, std::int64_t(55));
        QCOMPARE(r0.meanLaunchNs, (10.0 + 5 + 5) / 3);
        QCOMPARE(r0.meanDeviceNs, (50.0 + 20 + 10) / 3);
        QCOMPARE(s.perRank[1].meanDelayNs, 46.0);
        QCOMPARE(s.queues.size(), std::size_t(3));
        QCOMPARE(s.queues[0].stream, 7);
        QCOMPARE(s.queues[0].changes, std::int64_t(4));
        QCOMPARE(s.queues[0].meanLength, 1.0);
        QCOMPARE(s.queues[0].maxLength, std::int64_t(2));
        QCOMPARE(s.queues[1].stream, 8);
        QCOMPARE(s.queues[1].meanLength, 0.5);
        QCOMPARE(s.queues[2].rank, 1);
        QVERIFY(computeLaunchStats({}).perRank.empty());
    }

    // The writer keeps the correlation (and writes Kineto's "ac2g" flow events for Perfetto); the reader gives
    // back the same events, hence the same flows.
    void chromeTraceRoundTrip()
    {
        const auto events = gpuRun();
        std::ostringstream text;
        writeChromeTrace(text, events);
        const std::string s = text.str();
        std::size_t starts = 0;
        for (auto at = s.find("\"ph\": \"s\""); at != std::string::npos; at = s.find("\"ph\": \"s\"", at + 1))
            ++starts;
        QCOMPARE(starts, std::size_t(4));
        const auto back = readChromeTrace(s);
        QCOMPARE(back.size(), events.size());
        for (std::size_t i = 0; i < events.size(); ++i) {
            QVERIFY(back[i].kind == events[i].kind);
            QCOMPARE(back[i].correlation, events[i].correlation);
            QCOMPARE(back[i].stream, events[i].stream);
            QCOMPARE(back[i].startNs, events[i].startNs);
        }
        const auto a = launchFlows(events), b = launchFlows(back);
        QCOMPARE(a.size(), b.size());
        for (std::size_t k = 0; k < a.size(); ++k)
            QVERIFY(a[k].from == b[k].from && a[k].to == b[k].to);
    }

    // A trace written before correlation ids (or by loom-train) has none: every event reads -1, no flow.
    void olderTracesHaveNoCorrelation()
    {
        const std::string old = R"({"traceEvents": [
            {"ph": "X", "name": "kernel", "cat": "compute", "pid": 0, "tid": 107, "ts": 1, "dur": 2,
             "args": {"step": 0, "stream": 7}}]})";
        const auto back = readChromeTrace(old);
        QCOMPARE(back.size(), std::size_t(1));
        QCOMPARE(back[0].correlation, std::int64_t(-1));
        QVERIFY(launchFlows(back).empty());
    }

    void correlationLimits_data()
    {
        QTest::addColumn<QString>("value");
        QTest::newRow("negative") << "-5";
        QTest::newRow("a fraction") << "1.5";
        QTest::newRow("beyond 2^53") << "9007199254740993";
        QTest::newRow("text") << "\"7\"";
    }

    void correlationLimits()
    {
        QFETCH(QString, value);
        const std::string text = R"({"traceEvents": [{"ph": "X", "name": "launch", "pid": 0, "tid": 0, "ts": 1,
            "dur": 2, "args": {"correlation": )"
            + value.toStdString() + "}}]}";
        try {
            readChromeTrace(text);
            QFAIL("accepted");
        } catch (const std::runtime_error& e) {
            const std::string what = e.what();
            QVERIFY2(what.find("event 0 of traceEvents: args.correlation") != std::string::npos, e.what());
            QVERIFY2(what.find("from -1 to 9007199254740991") != std::string::npos, e.what());
        }
    }

    // Launches are host time before the work: the step time, overlap and bubble are those without them.
    void statisticsLeaveLaunchesOut()
    {
        std::vector<TraceEvent> work;
        for (const auto& e : gpuRun())
            if (e.kind != EventKind::Launch)
                work.push_back(e);
        auto withLaunches = work;
        withLaunches.push_back(launch(0, 20, -500, 200)); // long enough to widen any window it counted in
        const TraceStats a = computeStats(work, {}), b = computeStats(withLaunches, {});
        QCOMPARE(b.stepSeconds, a.stepSeconds);
        QCOMPARE(b.overlap, a.overlap);
        QCOMPARE(b.stages.size(), a.stages.size());
        for (std::size_t i = 0; i < a.stages.size(); ++i)
            QCOMPARE(b.stages[i].bubbleFraction, a.stages[i].bubbleFraction);
    }
};

QTEST_GUILESS_MAIN(LaunchFlows)
#include "tst_launchflows.moc"
