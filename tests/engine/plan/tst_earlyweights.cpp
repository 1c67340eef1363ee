// parallel.weight_fill: under "idle" a rank that would wait runs an earlier B's W ahead of its listed place
// (EarlyWeights), in the simulator's replay as in the engine; under "listed" every W runs where the schedule
// puts it. Checked: the bookkeeping (oldest first, a chunk's last W anchored, each W once), the replay's
// order and times under both rules, and the layout key's reading and writing.
#include "engine/plan/EarlyWeights.h"
#include "engine/plan/LayoutParser.h"
#include "engine/plan/Simulator.h"
#include "engine/profiles/BuiltinProfiles.h"

#include <QTest>

#include <map>
#include <set>

using namespace loom::plan;
using Kind = PipelineOp::Kind;

namespace {

Schedule scheduleWith(ScheduleKind kind, std::int64_t pp, std::int64_t m, WeightFill fill)
{
    Schedule s(kind, pp, vShaped(kind) ? 2 : 1, m);
    s.setWeightFill(fill);
    return s;
}

// Stages whose W is short against B, and a hand-off long enough that ranks wait for their inputs.
std::vector<StageCost> costs(std::int64_t virtualStages)
{
    std::vector<StageCost> c(static_cast<std::size_t>(virtualStages));
    for (std::size_t i = 0; i < c.size(); ++i) {
        c[i].forward = 1.0 + 0.25 * static_cast<double>(i % 3);
        c[i].backward = 2.0;
        c[i].weight = 0.5;
        c[i].layers = 1;
    }
    return c;
}

std::vector<loom::trace::TraceEvent> replayEvents(const Schedule& s, std::vector<RankTimes>* times = nullptr)
{
    EventNaming naming;
    naming.rankOf = [](std::int64_t r) { return static_cast<std::int32_t>(r); };
    std::vector<loom::trace::TraceEvent> events;
    const auto t = replaySchedule(s, costs(s.stages() * s.chunks()), 0.6, &naming, &events);
    if (times)
        *times = t;
    return events;
}

// The rank's compute events in time order, as ops.
std::vector<PipelineOp> opsInTime(const std::vector<loom::trace::TraceEvent>& events, std::int32_t rank)
{
    std::vector<const loom::trace::TraceEvent*> mine;
    for (const auto& e : events)
        if (e.rank == rank && e.lane == loom::trace::Lane::Compute)
            mine.push_back(&e);
    std::stable_sort(mine.begin(), mine.end(), [](auto* a, auto* b) { return a->startNs < b->startNs; });
    std::vector<PipelineOp> ops;
    for (const auto* e : mine) {
        const Kind k = e->kind == loom::trace::EventKind::Forward ? Kind::Forward
            : e->kind == loom::trace::EventKind::Weight           ? Kind::Weight
                                                                  : Kind::Backward;
        ops.push_back({ k, e->microBatch, e->chunk });
    }
    return ops;
}

std::vector<PipelineOp> withoutWeights(std::vector<PipelineOp> ops)
{
    std::erase_if(ops, [](const PipelineOp& op) { return op.kind == Kind::Weight; });
    return ops;
}

} // namespace

class TestEarlyWeights : public QObject {
    Q_OBJECT
private slots:
    void oldestFirstAndLastAnchored()
    {
        const Schedule s = scheduleWith(ScheduleKind::ZbH1, 4, 8, WeightFill::Idle);
        const auto& ops = s.opsOf(0);
        EarlyWeights early(s, 0);
        std::size_t lastW = 0;
        std::vector<std::size_t> backwards;
        for (std::size_t i = 0; i < ops.size(); ++i) {
            if (ops[i].kind == Kind::Weight)
                lastW = i;
            if (ops[i].kind == Kind::Backward)
                backwards.push_back(i);
        }
        QVERIFY(!early.takeNext()); // no B done: nothing to fill with
        for (std::size_t b : backwards)
            early.backwardDone(b);
        std::vector<std::int32_t> order;
        while (const auto w = early.takeNext()) {
            QVERIFY(ops[*w].kind == Kind::Weight);
            QVERIFY2(*w != lastW, "the chunk's last W releases its gradients and must run where listed");
            QVERIFY(!early.runsHere(*w)); // ran early: skipped where the list reaches it
            order.push_back(ops[*w].microBatch);
        }
        QCOMPARE(order.size(), std::size_t(7)); // every W of the 8 micro-batches but the anchored last one
        QVERIFY(std::is_sorted(order.begin(), order.end()));
        QVERIFY(early.runsHere(lastW));
        QVERIFY(!early.runsHere(lastW)); // once
    }

    void listedRunsNothingEarly()
    {
        const Schedule s = scheduleWith(ScheduleKind::ZbV, 4, 8, WeightFill::Listed);
        QVERIFY(!s.fillsIdleWithWeight());
        EarlyWeights early(s, 1);
        for (std::size_t i = 0; i < s.opsOf(1).size(); ++i)
            early.backwardDone(i);
        QVERIFY(!early.takeNext());
        QVERIFY(!scheduleWith(ScheduleKind::OneFOneB, 4, 8, WeightFill::Idle).fillsIdleWithWeight());
    }

    // Under "listed" the replay runs each rank's ops in list order; under "idle" the F and B keep their
    // order, every W runs once after its B, no chunk's gradients finish before its anchored W, and some W
    // moves ahead where a rank would have waited, with the same busy time.
    void replayFollowsTheRule_data()
    {
        QTest::addColumn<int>("kind");
        for (ScheduleKind k : { ScheduleKind::ZbH1, ScheduleKind::ZbH2, ScheduleKind::ZbV, ScheduleKind::DualPipe })
            QTest::newRow(std::string(toString(k)).c_str()) << static_cast<int>(k);
    }
    void replayFollowsTheRule()
    {
        QFETCH(int, kind);
        const auto k = static_cast<ScheduleKind>(kind);
        const Schedule listed = scheduleWith(k, 4, 8, WeightFill::Listed),
                       idle = scheduleWith(k, 4, 8, WeightFill::Idle);
        std::vector<RankTimes> tListed, tIdle;
        const auto eListed = replayEvents(listed, &tListed), eIdle = replayEvents(idle, &tIdle);
        bool moved = false;
        for (std::int32_t r = 0; r < 4; ++r) {
            const auto& ops = listed.opsOf(r);
            QVERIFY(opsInTime(eListed, r) == ops);
            const auto ran = opsInTime(eIdle, r);
            QCOMPARE(ran.size(), ops.size());
            QVERIFY(withoutWeights(ran) == withoutWeights(ops));
            std::set<std::pair<int, int>> backwardDone, weightDone;
            for (const PipelineOp& op : ran) {
                const std::pair<int, int> key { op.chunk, op.microBatch };
                if (op.kind == Kind::Backward)
                    backwardDone.insert(key);
                if (op.kind == Kind::Weight) {
                    QVERIFY(backwardDone.count(key));
                    QVERIFY(weightDone.insert(key).second);
                }
            }
            std::map<int, PipelineOp> lastListed, lastRan;
            for (const PipelineOp& op : ops)
                if (op.kind == Kind::Weight)
                    lastListed[op.chunk] = op;
            for (const PipelineOp& op : ran)
                if (op.kind == Kind::Weight)
                    lastRan[op.chunk] = op;
            QVERIFY(lastListed == lastRan);
            moved = moved || ran != ops;
            QCOMPARE(tIdle[static_cast<std::size_t>(r)].busy, tListed[static_cast<std::size_t>(r)].busy);
        }
        QVERIFY2(moved, "with short W and slow hand-offs some rank waits and fills it with a W");
    }

    void layoutKey()
    {
        const auto& profiles = loom::profiles::BuiltinProfiles::instance();
        const std::string head = R"({"loom_layout": 1, "name": "w", "model": "gpt-tiny", "cluster": "local",
            "parallel": {"tp": 1, "pp": 2, "dp": 1, "micro_batch": 1, "global_batch": 4, "schedule": "zb-h1")";
        auto absent = readLayout(head + "}}", profiles);
        QVERIFY2(absent.ok(), absent.diagnostics.format().c_str());
        QVERIFY(absent.layout->parallel.weightFill == WeightFill::Listed);
        QVERIFY(!Schedule::forLayout(*absent.layout).fillsIdleWithWeight());
        QVERIFY(writeLayout(*absent.layout).find("weight_fill") == std::string::npos);
        auto listed = readLayout(head + R"(, "weight_fill": "listed"}})", profiles);
        QVERIFY2(listed.ok(), listed.diagnostics.format().c_str());
        QVERIFY(listed.layout->parallel == absent.layout->parallel);
        auto idle = readLayout(head + R"(, "weight_fill": "idle"}})", profiles);
        QVERIFY2(idle.ok(), idle.diagnostics.format().c_str());
        QVERIFY(Schedule::forLayout(*idle.layout).fillsIdleWithWeight());
        auto again = readLayout(writeLayout(*idle.layout), profiles);
        QVERIFY(again.ok() && again.layout->parallel == idle.layout->parallel);
        auto bad = readLayout(head + R"(, "weight_fill": "eager"}})", profiles);
        QVERIFY(!bad.ok());
        const std::string text = bad.diagnostics.format();
        QVERIFY2(text.find("parallel.weight_fill") != std::string::npos && text.find("listed") != std::string::npos,
            text.c_str());
    }
};

QTEST_GUILESS_MAIN(TestEarlyWeights)
#include "tst_earlyweights.moc"
