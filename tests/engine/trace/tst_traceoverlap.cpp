// trace stats' overlap (compute during communication ÷ communication) as a sweep: the same figure as a
// direct count on random traces, and a 300,000-event trace whose communication spans its whole compute
// (quadratic before: every comm event walked every compute event) computed in well under a second of work.
#include "engine/trace/TraceStats.h"

#include <QElapsedTimer>
#include <QTest>

#include <random>

using namespace loom::trace;

namespace {

TraceEvent makeEvent(std::int32_t rank, Lane lane, EventKind kind, std::int64_t start, std::int64_t end)
{
    TraceEvent e;
    e.rank = rank;
    e.lane = lane;
    e.kind = kind;
    e.step = 0;
    e.startNs = start;
    e.endNs = end;
    return e;
}

// The covered length of [a, b) by the union of `intervals`, counted nanosecond by nanosecond.
std::int64_t coveredSlowly(
    const std::vector<std::pair<std::int64_t, std::int64_t>>& intervals, std::int64_t a, std::int64_t b)
{
    std::int64_t n = 0;
    for (std::int64_t t = a; t < b; ++t)
        for (const auto& [lo, hi] : intervals)
            if (lo <= t && t < hi) {
                ++n;
                break;
            }
    return n;
}

double overlapSlowly(const std::vector<TraceEvent>& events)
{
    double comm = 0, overlapped = 0;
    for (const auto& c : events) {
        if (c.lane != Lane::Comm || c.endNs <= c.startNs)
            continue;
        comm += double(c.endNs - c.startNs);
        if (c.kind == EventKind::Send || c.kind == EventKind::Recv)
            continue;
        std::vector<std::pair<std::int64_t, std::int64_t>> compute, blocking;
        for (const auto& e : events) {
            if (e.rank != c.rank || e.endNs <= e.startNs)
                continue;
            if (e.lane == Lane::Compute && e.kind != EventKind::Wait)
                compute.emplace_back(e.startNs, e.endNs);
            else if (e.lane == Lane::Comm && (e.kind == EventKind::Send || e.kind == EventKind::Recv))
                blocking.emplace_back(e.startNs, e.endNs);
        }
        overlapped += std::max<double>(
            0, double(coveredSlowly(compute, c.startNs, c.endNs) - coveredSlowly(blocking, c.startNs, c.endNs)));
    }
    return comm > 0 ? overlapped / comm : 0;
}

} // namespace

class TestTraceOverlap : public QObject {
    Q_OBJECT
private slots:
    void sameAsADirectCount()
    {
        std::mt19937 rng(7);
        for (int trial = 0; trial < 200; ++trial) {
            std::vector<TraceEvent> events;
            const int n = 2 + static_cast<int>(rng() % 12);
            for (int i = 0; i < n; ++i) {
                const std::int64_t a = rng() % 200, b = a + rng() % 80;
                const int pick = static_cast<int>(rng() % 5);
                const Lane lane = pick < 2 ? Lane::Compute : Lane::Comm;
                const EventKind kind = pick == 0 ? EventKind::Forward
                    : pick == 1                  ? EventKind::Wait
                    : pick == 2                  ? EventKind::AllReduce
                    : pick == 3                  ? EventKind::Send
                                                 : EventKind::AllGather;
                events.push_back(makeEvent(static_cast<std::int32_t>(rng() % 2), lane, kind, a, b));
            }
            const double fast = computeStats(events, {}).overlap, slow = overlapSlowly(events);
            QVERIFY2(std::abs(fast - slow) < 1e-9,
                qPrintable(QStringLiteral("trial %1: %2 vs %3").arg(trial).arg(fast).arg(slow)));
        }
    }

    void largeTraceIsASweep()
    {
        // 150,000 compute events and 150,000 all-reduces on one rank, each all-reduce spanning everything.
        std::vector<TraceEvent> events;
        const std::int64_t n = 150000;
        for (std::int64_t i = 0; i < n; ++i)
            events.push_back(makeEvent(0, Lane::Compute, EventKind::Forward, 10 * i, 10 * i + 5));
        for (std::int64_t i = 0; i < n; ++i)
            events.push_back(makeEvent(0, Lane::Comm, EventKind::AllReduce, 0, 10 * n));
        QElapsedTimer t;
        t.start();
        const TraceStats s = computeStats(events, {});
        qInfo("overlap of %zu events: %lld ms", events.size(), static_cast<long long>(t.elapsed()));
        QCOMPARE(s.overlap, 0.5);
    }
};

QTEST_GUILESS_MAIN(TestTraceOverlap)
#include "tst_traceoverlap.moc"
