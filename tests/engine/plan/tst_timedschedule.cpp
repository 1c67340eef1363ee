// Zero-bubble op lists built from the ops' times (ScheduleCosts, issue 38): with any times every op runs once
// in dependency order and the lists replay without deadlock; unit times give the unit-time lists; with W
// shorter than B (as measured here) the timed lists leave less bubble than the unit-time ones; and
// loom-train's lists (Schedule::forLayout) are the ones the planner replays.
#include "ListReplay.h"
#include "engine/plan/CostModel.h"
#include "engine/plan/LayoutParser.h"
#include "engine/plan/Schedule.h"
#include "engine/profiles/BuiltinProfiles.h"

#include <QTest>

#include <nlohmann/json.hpp>

#include <map>
#include <random>

using namespace loom::plan;
using Kind = PipelineOp::Kind;
using loom::plan::testing::replay;
using loom::plan::testing::uniform;

namespace {

// ZB-V's held memory on rank r in halves of a chunk's activations (F to B all of it, B to W half): its cap is
// 1F1B's first rank's 2p chunks.
std::int64_t peakHalves(const Schedule& s, std::int64_t r)
{
    std::int64_t halves = 0, peak = 0;
    for (const auto& op : s.opsOf(r)) {
        halves += op.kind == Kind::Forward ? 2 : -1;
        peak = std::max(peak, halves);
    }
    return peak;
}

double work(const Schedule& s, const ScheduleCosts& c)
{
    double total = 0;
    for (std::int64_t ch = 0; ch < s.chunks(); ++ch) {
        const OpTimes& t = c.stage[static_cast<std::size_t>(s.virtualStage(0, ch))];
        total += double(s.microBatches()) * (t.forward + t.backward + t.weight);
    }
    return total;
}

// 8 GPT-2 blocks of hidden 512 (bench_zerobubble's model), 8 micro-batches, on the local CPU cluster.
Layout read(const std::string& schedule, int pp, const std::string& fill = "listed")
{
    const bool v = schedule == "zb-v" || schedule == "dualpipe";
    const nlohmann::json j = { { "loom_layout", 1 }, { "name", "t" }, { "cluster", "local" },
        { "model",
            { { "name", "bench" }, { "layers", 8 }, { "hidden", 512 }, { "heads", 8 }, { "ffn_hidden", 2048 },
                { "vocab", 256 }, { "seq_len", 64 } } },
        { "precision", "fp32" },
        { "parallel",
            { { "tp", 1 }, { "pp", pp }, { "dp", 1 }, { "vpp", v ? 2 : 1 }, { "micro_batch", 2 },
                { "global_batch", 16 }, { "schedule", schedule }, { "weight_fill", fill } } } };
    auto r = readLayout(j.dump(), loom::profiles::BuiltinProfiles::instance());
    if (!r.ok())
        qFatal("%s", r.diagnostics.format().c_str());
    return *r.layout;
}

const char* kTimed[] = { "zb-h1", "zb-h2", "zb-v" };

} // namespace

class TestTimedSchedule : public QObject {
    Q_OBJECT
private slots:
    void anyTimesEveryOpOnceWithoutDeadlock()
    {
        std::mt19937 random(38);
        std::uniform_real_distribution<double> time(0.05, 3.0);
        for (const char* name : kTimed)
            for (int pp : { 2, 3, 4, 8 })
                for (int m : { pp, 8, 3 * pp + 1 }) {
                    const ScheduleKind kind = scheduleKindOf(name);
                    const std::int64_t stages = pp * (vShaped(kind) ? 2 : 1);
                    ScheduleCosts c;
                    c.transfer = time(random) * 0.2;
                    for (std::int64_t vs = 0; vs < stages; ++vs)
                        c.stage.push_back({ time(random), time(random), vs % 3 == 0 ? 0.0 : time(random) });
                    const Schedule s(kind, pp, 1, m, 0, c);
                    const QByteArray where = QByteArray(name) + " pp " + QByteArray::number(pp) + " m "
                        + QByteArray::number(m) + "\n" + QByteArray::fromStdString(s.toString());
                    for (std::int64_t r = 0; r < pp; ++r) {
                        std::map<std::pair<int, int>, std::vector<Kind>> seen; // (mb, chunk) -> kinds in order
                        for (const auto& op : s.opsOf(r))
                            seen[{ op.microBatch, op.chunk }].push_back(op.kind);
                        QVERIFY2(seen.size() == std::size_t(m * s.chunks()), where.constData());
                        for (const auto& [key, kinds] : seen)
                            QVERIFY2((kinds == std::vector { Kind::Forward, Kind::Backward, Kind::Weight }),
                                where.constData());
                    }
                    QVERIFY2(replay(s, c) > 0, where.constData());
                    for (std::int64_t r = 0; r < pp && kind == ScheduleKind::ZbV; ++r)
                        QVERIFY2(peakHalves(s, r) <= 4 * pp, where.constData());
                    QVERIFY2(replay(s, uniform(stages, 1, 2, 0.5)) > 0, where.constData());
                }
    }

    void unitTimesGiveTheUnitLists()
    {
        for (const char* name : kTimed)
            for (int pp : { 2, 4, 8 })
                for (int m : { pp, 2 * pp, 3 * pp + 1 }) {
                    const ScheduleKind kind = scheduleKindOf(name);
                    const Schedule unit(kind, pp, 1, m), timed(kind, pp, 1, m, 0, uniform(pp * unit.chunks(), 1, 1, 1));
                    if (kind != ScheduleKind::ZbV || pp == 2)
                        QCOMPARE(timed.toString(), unit.toString());
                    else // the wider search (fewer micro-batches' way back reserved) may find shorter lists
                        QVERIFY(timed.toString() == unit.toString() || replay(timed, 1, 1, 1) < replay(unit, 1, 1, 1));
                }
    }

    // The times loom-train's trace gave two layers of the bench's model on this machine (docs/training.md,
    // 2026-12-03: F 0.95 of B, W 0.73 of B) and a shorter W (0.35 of B, memory-bound backwards): ZB-V's
    // lists built from them leave less bubble than the unit-time lists (which count W as long as B), at pp 2
    // at most a quarter of 1F1B's, within the same memory caps.
    void timedListsFillTheirBubbles_data()
    {
        QTest::addColumn<double>("w");
        QTest::addColumn<int>("pp");
        for (double w : { 0.73, 0.35 })
            for (int pp : { 2, 4 })
                QTest::addRow("W %.2f pp %d", w, pp) << w << pp;
    }
    void timedListsFillTheirBubbles()
    {
        QFETCH(double, w);
        QFETCH(int, pp);
        const int m = 8;
        const ScheduleCosts whole = uniform(pp, 0.95, 1, w), half = uniform(2 * pp, 0.475, 0.5, w / 2);
        const Schedule oneF(ScheduleKind::OneFOneB, pp, 1, m);
        ScheduleCosts unsplit = whole; // 1F1B runs B and W as one backward
        for (OpTimes& t : unsplit.stage)
            t = { t.forward, t.backward + t.weight, 0 };
        const double bubble1F1B = replay(oneF, unsplit) - work(oneF, unsplit);
        const Schedule unitV(ScheduleKind::ZbV, pp, 1, m), timedV(ScheduleKind::ZbV, pp, 1, m, 0, half);
        const double unitBubble = replay(unitV, half) - work(unitV, half);
        const double timedBubble = replay(timedV, half) - work(timedV, half);
        qInfo("1F1B %.3f, ZB-V unit-time lists %.3f (%.2f), timed %.3f (%.2f)", bubble1F1B, unitBubble,
            unitBubble / bubble1F1B, timedBubble, timedBubble / bubble1F1B);
        QVERIFY2(timedBubble < unitBubble, qPrintable(QString::fromStdString(timedV.toString())));
        if (pp == 2)
            QVERIFY(timedBubble <= bubble1F1B / 4 + 1e-9);
        // At pp 4 the cap's room for every way back in the V left the first ranks idle before the V's turn
        // (0.33 of 1F1B's bubble); room for the first few of them (kWideWork) gives 0.26.
        if (pp == 4 && w > 0.5)
            QVERIFY2(timedBubble <= 0.3 * bubble1F1B, qPrintable(QString::fromStdString(timedV.toString())));
        for (std::int64_t r = 0; r < pp; ++r)
            QVERIFY(peakHalves(timedV, r) <= 4 * pp);
        for (ScheduleKind kind : { ScheduleKind::ZbH1, ScheduleKind::ZbH2 }) {
            const Schedule unit(kind, pp, 1, m), timed(kind, pp, 1, m, 0, whole);
            QVERIFY(replay(timed, whole) <= replay(unit, whole) + 1e-9);
            for (std::int64_t r = 0; r < pp; ++r)
                QVERIFY(timed.peakInFlight(r) <= (kind == ScheduleKind::ZbH1 ? pp : 2 * pp - 1));
        }
    }

    // loom-train builds its lists with Schedule::forLayout, the planner's replay with the stage costs it
    // predicts from: the same times, so the same lists, and the predicted timeline runs them in that order.
    void theEngineRunsWhatThePlannerReplays()
    {
        for (const char* name : kTimed)
            for (int pp : { 2, 4 }) {
                const Layout l = read(name, pp);
                const Schedule engine = Schedule::forLayout(l);
                const ScheduleCosts costs = scheduleCosts(l);
                QCOMPARE(costs.stage.size(), std::size_t(pp * engine.chunks()));
                QVERIFY(costs.stage[1].weight > 0 && costs.stage[1].weight < costs.stage[1].backward * 1.5);
                const Prediction p = predict(l);
                std::map<std::int32_t, std::vector<std::pair<std::int64_t, PipelineOp>>> replayed; // by rank
                for (const auto& e : p.events) {
                    using loom::trace::EventKind;
                    if (e.lane != loom::trace::Lane::Compute || e.step != 0)
                        continue;
                    const Kind k = e.kind == EventKind::Forward ? Kind::Forward
                        : e.kind == EventKind::Weight           ? Kind::Weight
                        : e.kind == EventKind::Backward         ? Kind::Backward
                                                                : Kind(255);
                    if (k != Kind(255))
                        replayed[e.rank].push_back({ e.startNs, { k, e.microBatch, e.chunk } });
                }
                for (std::int64_t r = 0; r < pp; ++r) {
                    auto& ops = replayed[static_cast<std::int32_t>(r)];
                    std::stable_sort(
                        ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
                    std::vector<PipelineOp> order;
                    for (const auto& [start, op] : ops)
                        order.push_back(op);
                    QVERIFY2(order == engine.opsOf(r),
                        qPrintable(QStringLiteral("%1 pp %2 rank %3\n%4")
                                       .arg(name)
                                       .arg(pp)
                                       .arg(r)
                                       .arg(QString::fromStdString(engine.toString()))));
                }
            }
    }
};

QTEST_MAIN(TestTimedSchedule)
#include "tst_timedschedule.moc"
