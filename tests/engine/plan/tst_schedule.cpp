// Pipeline schedules: hand-written examples, and for many shapes a unit-time replay that checks every
// dependency is met without deadlock and that the bubble matches the closed form.
#include "engine/plan/Schedule.h"

#include <QTest>

#include <map>
#include <set>

using namespace loom::plan;

namespace {

// Replays the schedule with forward = tf and backward = tb time units; returns the makespan, or -1 on a
// deadlock. Forward of virtual stage s needs forward of s-1; backward of s needs backward of s+1 (or, on
// the last stage, its own forward).
double replay(const Schedule& s, double tf, double tb)
{
    const std::int64_t p = s.stages(), v = s.chunks(), last = p * v - 1;
    std::map<std::tuple<int, int, int>, double> done; // (kind, mb, virtual stage) -> finish time
    std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
    std::vector<double> clock(static_cast<std::size_t>(p), 0);
    bool progress = true;
    while (progress) {
        progress = false;
        for (std::int64_t r = 0; r < p; ++r) {
            auto& i = next[static_cast<std::size_t>(r)];
            const auto& ops = s.opsOf(r);
            while (i < ops.size()) {
                const auto& op = ops[i];
                const int vs = static_cast<int>(s.virtualStage(r, op.chunk));
                const bool fwd = op.kind == PipelineOp::Kind::Forward;
                std::tuple<int, int, int> dep = fwd
                    ? std::tuple { 0, op.microBatch, vs - 1 }
                    : (vs == last ? std::tuple { 0, op.microBatch, vs } : std::tuple { 1, op.microBatch, vs + 1 });
                double ready = 0;
                if (!(fwd && vs == 0)) {
                    auto it = done.find(dep);
                    if (it == done.end())
                        break;
                    ready = it->second;
                }
                auto& c = clock[static_cast<std::size_t>(r)];
                c = std::max(c, ready) + (fwd ? tf : tb);
                done[{ fwd ? 0 : 1, op.microBatch, vs }] = c;
                ++i;
                progress = true;
            }
        }
    }
    for (std::int64_t r = 0; r < p; ++r)
        if (next[static_cast<std::size_t>(r)] != s.opsOf(r).size())
            return -1;
    double makespan = 0;
    for (double c : clock)
        makespan = std::max(makespan, c);
    return makespan;
}

} // namespace

class TestSchedule : public QObject {
    Q_OBJECT
private slots:
    void handWritten()
    {
        QCOMPARE(QString::fromStdString(Schedule(ScheduleKind::GPipe, 2, 1, 3).toString()),
            QStringLiteral("rank 0: F0 F1 F2 B0 B1 B2\nrank 1: F0 F1 F2 B0 B1 B2\n"));
        QCOMPARE(QString::fromStdString(Schedule(ScheduleKind::OneFOneB, 4, 1, 6).toString()),
            QStringLiteral("rank 0: F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5\n"
                           "rank 1: F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5\n"
                           "rank 2: F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5\n"
                           "rank 3: F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5\n"));
        // Megatron-LM's interleaved order for p=2, v=2, m=4.
        QCOMPARE(QString::fromStdString(Schedule(ScheduleKind::Interleaved, 2, 2, 4).toString()),
            QStringLiteral(
                "rank 0: F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0\n"
                "rank 1: F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0\n"));
        // Micro-batch groups of N = 3 on p = 2: three micro-batches per chunk, warm-up (p-r-1)·2 + (v-1)·N;
        // m = 5 leaves a last group of 2 (= p), which runs through both chunks in turn.
        QCOMPARE(QString::fromStdString(Schedule(ScheduleKind::Interleaved, 2, 2, 5, 3).toString()),
            QStringLiteral("rank 0: F0.0 F1.0 F2.0 F0.1 F1.1 F2.1 B0.1 F3.0 B1.1 F4.0 B2.1 F3.1 B0.0 F4.1 B1.0 B2.0 "
                           "B3.1 B4.1 B3.0 B4.0\n"
                           "rank 1: F0.0 F1.0 F2.0 F0.1 B0.1 F1.1 B1.1 F2.1 B2.1 F3.0 B0.0 F4.0 B1.0 F3.1 B2.0 F4.1 "
                           "B3.1 B4.1 B3.0 B4.0\n"));
    }

    void groupOfPipelineDepthIsTheDefault()
    {
        // N = p (Megatron-LM's default) gives exactly the orders of the schedule without a group.
        for (int p : { 2, 3, 4, 8 })
            for (int v : { 2, 3, 4 })
                for (int m : { 4, 8, 12, 16, 24 }) {
                    if (m % p != 0)
                        continue;
                    const Schedule plain(ScheduleKind::Interleaved, p, v, m),
                        grouped(ScheduleKind::Interleaved, p, v, m, p);
                    QCOMPARE(grouped.group(), std::int64_t(p));
                    for (int r = 0; r < p; ++r)
                        QVERIFY(plain.opsOf(r) == grouped.opsOf(r));
                }
    }

    void groupsSmallerThanThePipelineDeadlock()
    {
        // Why the validator refuses N < p: with Megatron-LM's warm-up the ranks wait on each other for ever
        // (rank 0 wants a forward the last rank runs only after a backward that waits on rank 0).
        QCOMPARE(replay(Schedule(ScheduleKind::Interleaved, 4, 2, 8, 2), 1, 2), -1.0);
        QCOMPARE(replay(Schedule(ScheduleKind::Interleaved, 8, 4, 24, 6), 1, 2), -1.0);
        // ... and so does a last group smaller than p (m mod N = 3 < p = 8).
        QCOMPARE(replay(Schedule(ScheduleKind::Interleaved, 8, 4, 24, 11), 1, 2) < 0, true);
    }

    void everyShapeRunsAndMatchesTheBubble_data()
    {
        QTest::addColumn<int>("kind");
        QTest::addColumn<int>("p");
        QTest::addColumn<int>("v");
        QTest::addColumn<int>("m");
        QTest::addColumn<int>("group");
        for (int p : { 1, 2, 3, 4, 8 })
            for (int m : { 1, 2, 4, 8, 12, 16 }) {
                QTest::newRow(qPrintable(QStringLiteral("gpipe p%1 m%2").arg(p).arg(m)))
                    << int(ScheduleKind::GPipe) << p << 1 << m << 0;
                QTest::newRow(qPrintable(QStringLiteral("1f1b p%1 m%2").arg(p).arg(m)))
                    << int(ScheduleKind::OneFOneB) << p << 1 << m << 0;
                if (p >= 2 && m % p == 0)
                    for (int v : { 2, 3, 4 })
                        QTest::newRow(qPrintable(QStringLiteral("interleaved p%1 v%2 m%3").arg(p).arg(v).arg(m)))
                            << int(ScheduleKind::Interleaved) << p << v << m << 0;
            }
        // Every micro-batch group Megatron-LM accepts (p ≤ N ≤ m, m mod N zero or at least p), m a multiple of p
        // or not: the bubble stays (p-1)/(v·m).
        for (int p : { 2, 3, 4, 8 })
            for (int m : { 4, 6, 8, 12, 16 })
                for (int n = p + 1; n <= m; ++n)
                    if (m % n == 0 || m % n >= p)
                        for (int v : { 2, 4 })
                            QTest::newRow(
                                qPrintable(QStringLiteral("interleaved p%1 v%2 m%3 N%4").arg(p).arg(v).arg(m).arg(n)))
                                << int(ScheduleKind::Interleaved) << p << v << m << n;
    }
    void everyShapeRunsAndMatchesTheBubble()
    {
        QFETCH(int, kind);
        QFETCH(int, p);
        QFETCH(int, v);
        QFETCH(int, m);
        QFETCH(int, group);
        const Schedule s(ScheduleKind(kind), p, v, m, group);
        for (int r = 0; r < p; ++r) {
            std::set<std::tuple<int, int, int>> seen;
            for (const auto& op : s.opsOf(r))
                QVERIFY(seen.insert({ int(op.kind), op.microBatch, op.chunk }).second);
            QCOMPARE(int(seen.size()), 2 * m * v);
        }
        // Forward 1 unit, backward 2 units per chunk (a chunk is 1/v of a stage).
        const double tf = 1.0 / v, tb = 2.0 / v;
        const double makespan = replay(s, tf, tb);
        QVERIFY2(makespan > 0, "the schedule deadlocks");
        const double ideal = m * (tf + tb) * v;
        const double bubble = (makespan - ideal) / ideal; // bubble time / ideal time
        const double theory
            = ScheduleKind(kind) == ScheduleKind::Interleaved ? double(p - 1) / (v * m) : double(p - 1) / m;
        QVERIFY2(std::abs(bubble - theory) < 1e-9,
            qPrintable(QStringLiteral("bubble %1, closed form %2").arg(bubble).arg(theory)));
    }

    void stagePlacementRoundTrips()
    {
        // rankOfStage/chunkOfStage invert stageOfChunk, and a Schedule places chunks as they do: interleaved
        // chunk·pp + rank; in a V rank r holds r and 2·pp-1-r, so the last virtual stage is on rank 0.
        for (const auto kind : { ScheduleKind::OneFOneB, ScheduleKind::Interleaved, ScheduleKind::ZbV }) {
            for (std::int64_t p = 1; p <= 8; ++p) {
                const std::int64_t v = scheduleChunks(kind, 3);
                const Schedule s(kind, p, v, 4 * p);
                for (std::int64_t vs = 0; vs < p * v; ++vs) {
                    const std::int64_t r = rankOfStage(kind, p, vs), c = chunkOfStage(kind, p, vs);
                    QVERIFY(r >= 0 && r < p && c >= 0 && c < v);
                    QCOMPARE(stageOfChunk(kind, p, r, c), vs);
                    QCOMPARE(s.rankOf(vs), r);
                    QCOMPARE(s.virtualStage(r, c), vs);
                }
            }
        }
        QCOMPARE(rankOfStage(ScheduleKind::ZbV, 4, 7), 0);
        QCOMPARE(rankOfStage(ScheduleKind::Interleaved, 4, 7), 3);
    }

    void activationsInFlight()
    {
        // GPipe holds every micro-batch; 1F1B at most p on the first stage (Narayanan et al.).
        QCOMPARE(Schedule(ScheduleKind::GPipe, 4, 1, 16).peakInFlight(0), 16);
        QCOMPARE(Schedule(ScheduleKind::OneFOneB, 4, 1, 16).peakInFlight(0), 4);
        QCOMPARE(Schedule(ScheduleKind::OneFOneB, 4, 1, 16).peakInFlight(3), 1);
        // Interleaved: (p-r-1)·2 + (v-1)·N + 1 chunk-micro-batches on rank r; a larger group holds more.
        QCOMPARE(Schedule(ScheduleKind::Interleaved, 4, 2, 16).peakInFlight(0), 6 + 4 + 1);
        QCOMPARE(Schedule(ScheduleKind::Interleaved, 4, 2, 16, 8).peakInFlight(0), 6 + 8 + 1);
        QCOMPARE(Schedule(ScheduleKind::Interleaved, 4, 2, 16, 8).peakInFlight(3), 8 + 1);
        QCOMPARE(Schedule(ScheduleKind::Interleaved, 16, 4, 32, 16).peakInFlight(0), 79); // Llama 3 405B, dp 64
        QCOMPARE(Schedule(ScheduleKind::Interleaved, 16, 4, 32, 32).peakInFlight(0), 127);
        // Weighted by the chunks' layers: Llama 3's pipeline (vpp 8, one layer a chunk, the first chunk of rank 0
        // the embedding alone) holds 7 layers of 16 micro-batches on rank 0, and on rank 1 a whole group of 8
        // chunks plus the 13 forwards of the next group's first chunk that its warm-up runs.
        const Schedule llama(ScheduleKind::Interleaved, 16, 8, 32, 16);
        std::vector<double> rank0(8, 1.0), rank1(8, 1.0);
        rank0[0] = 0;
        QCOMPARE(llama.peakInFlight(0, rank0), 7.0 * 16);
        QCOMPARE(llama.peakInFlight(1, rank1), 8.0 * 16 + 13);
        QCOMPARE(llama.peakInFlight(1), std::int64_t(8 * 16 + 13));
        // Equal weights give the count times the weight.
        QCOMPARE(Schedule(ScheduleKind::OneFOneB, 4, 1, 16).peakInFlight(0, { 3.0 }), 12.0);
    }
};

QTEST_GUILESS_MAIN(TestSchedule)
#include "tst_schedule.moc"
