// The simulator: long schedules are extrapolated from two short replays and agree with the full replay
// where both can run; timelines stay small; sequence parallelism and ZeRO show up as their collectives.
#include "engine/plan/CostModel.h"
#include "engine/plan/LayoutParser.h"
#include "engine/plan/Simulator.h"
#include "engine/profiles/BuiltinProfiles.h"

#include <QTest>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

using namespace loom::plan;
using loom::trace::EventKind;

namespace {

Layout layout(const nlohmann::json& parallel, const nlohmann::json& memory = nlohmann::json::object(),
    const std::string& model = "gpt3-175b", int nodes = 0)
{
    const std::int64_t world
        = parallel["tp"].get<std::int64_t>() * parallel["pp"].get<std::int64_t>() * parallel["dp"].get<std::int64_t>();
    nlohmann::json j = { { "loom_layout", 1 }, { "name", "sim" }, { "model", model }, { "cluster", "dgx-a100" },
        { "nodes", nodes > 0 ? nodes : world / 8 }, { "parallel", parallel }, { "memory", memory },
        { "precision", "bf16" } };
    auto r = readLayout(j.dump(), loom::profiles::BuiltinProfiles::instance());
    if (!r.ok())
        qFatal("%s", r.diagnostics.format().c_str());
    return *r.layout;
}

// Uneven stage costs, so that the steady state has one slowest stage.
std::vector<StageCost> unevenCosts(std::int64_t virtualStages)
{
    std::vector<StageCost> c(static_cast<std::size_t>(virtualStages));
    for (std::int64_t i = 0; i < virtualStages; ++i) {
        c[static_cast<std::size_t>(i)].forward = 1.0 + 0.1 * double(i % 3);
        c[static_cast<std::size_t>(i)].backward = 2.0 + 0.3 * double((i + 1) % 4);
    }
    return c;
}

} // namespace

class TestSimulator : public QObject {
    Q_OBJECT
private slots:
    void extrapolationAgreesWithReplay_data()
    {
        QTest::addColumn<int>("kind");
        QTest::addColumn<int>("pp");
        QTest::addColumn<int>("vpp");
        QTest::addColumn<int>("m");
        QTest::newRow("gpipe") << int(ScheduleKind::GPipe) << 4 << 1 << 200;
        QTest::newRow("1f1b") << int(ScheduleKind::OneFOneB) << 6 << 1 << 300;
        QTest::newRow("interleaved") << int(ScheduleKind::Interleaved) << 4 << 3 << 160;
    }
    void extrapolationAgreesWithReplay()
    {
        QFETCH(int, kind);
        QFETCH(int, pp);
        QFETCH(int, vpp);
        QFETCH(int, m);
        const auto k = static_cast<ScheduleKind>(kind);
        const auto cost = unevenCosts(pp * vpp);
        const Schedule full(k, pp, vpp, m);
        const auto replayed = replaySchedule(full, cost, 0.05);
        // The replay of the sampled lengths, extrapolated the way simulatePipeline does it for long steps.
        const std::int64_t a = 2 * pp, b = 4 * pp;
        const auto ra = replaySchedule(Schedule(k, pp, vpp, a), cost, 0.05);
        const auto rb = replaySchedule(Schedule(k, pp, vpp, b), cost, 0.05);
        for (int r = 0; r < pp; ++r) {
            const double steps = double(m - a) / double(b - a);
            const double end = ra[r].end + (rb[r].end - ra[r].end) * steps;
            const double busy = ra[r].busy + (rb[r].busy - ra[r].busy) * steps;
            QVERIFY2(std::fabs(end - replayed[r].end) <= 1e-9 * replayed[r].end,
                qPrintable(
                    QStringLiteral("rank %1: extrapolated %2, replayed %3").arg(r).arg(end).arg(replayed[r].end)));
            QVERIFY(std::fabs(busy - replayed[r].busy) <= 1e-9 * replayed[r].busy);
        }
    }

    void groupedStepsAreExtrapolatedAndAgree_data()
    {
        QTest::addColumn<int>("group");
        QTest::addColumn<int>("sampled");
        QTest::addColumn<int>("sampledLonger");
        // Interleaved, pp 4, vpp 2, m = 62,506: over a million ops, so extrapolated from whole groups (at least
        // two, and at least 2p micro-batches) plus the last partial group, and twice that.
        QTest::newRow("N 6, last group 4") << 6 << 12 + 4 << 24 + 4;
        QTest::newRow("N 10, last group 6") << 10 << 20 + 6 << 40 + 6;
    }
    void groupedStepsAreExtrapolatedAndAgree()
    {
        QFETCH(int, group);
        QFETCH(int, sampled);
        QFETCH(int, sampledLonger);
        const auto cost = unevenCosts(8);
        const std::int64_t m = 62506;
        QVERIFY(pipelineSimulatable(ScheduleKind::Interleaved, 4, 2, m, group));
        const PipelineTimes step
            = simulatePipeline(ScheduleKind::Interleaved, 4, 2, m, cost, 0.05, nullptr, nullptr, group);
        QVERIFY(step.extrapolated);
        QCOMPARE(step.sampled, std::int64_t(sampled));
        QCOMPARE(step.sampledLonger, std::int64_t(sampledLonger));
        const Schedule full(ScheduleKind::Interleaved, 4, 2, m, group);
        const auto replayed = replaySchedule(full, cost, 0.05);
        for (int r = 0; r < 4; ++r) {
            const double end = step.withTransfers[std::size_t(r)].end;
            QVERIFY2(std::fabs(end - replayed[std::size_t(r)].end) <= 1e-9 * end,
                qPrintable(QStringLiteral("rank %1: extrapolated %2, replayed %3")
                               .arg(r)
                               .arg(end)
                               .arg(replayed[std::size_t(r)].end)));
            QCOMPARE(step.peakInFlight[std::size_t(r)], full.peakInFlight(r));
        }
    }

    void longStepsAreExtrapolatedAndAgree()
    {
        // 1F1B, pp 16, 30,000 micro-batches: 0.96 million ops, replayed in full; the same costs extrapolated
        // from 32 and 64 micro-batches give the same step.
        const auto cost = unevenCosts(16);
        const PipelineTimes full = simulatePipeline(ScheduleKind::OneFOneB, 16, 1, 30000, cost, 0.01);
        QVERIFY(!full.extrapolated);
        // A million micro-batches: too long to replay (32 million ops), extrapolated.
        QVERIFY(pipelineSimulatable(ScheduleKind::OneFOneB, 16, 1, 1000000));
        const PipelineTimes longStep = simulatePipeline(ScheduleKind::OneFOneB, 16, 1, 1000000, cost, 0.01);
        QVERIFY(longStep.extrapolated);
        QCOMPARE(longStep.sampled, 32);
        // Steady state: the step grows by the slowest stage's forward + backward per micro-batch.
        const double slowest = 1.2 + 2.9;
        const double perMicroBatch
            = (longStep.withTransfers[0].end - full.withTransfers[0].end) / (1000000.0 - 30000.0);
        QVERIFY2(std::fabs(perMicroBatch - slowest) < 1e-9 * slowest, qPrintable(QString::number(perMicroBatch)));
        // The events cover a shortened step only.
        QVERIFY(longStep.eventMicroBatches < 1000000);
    }

    void predictUsesTheExtrapolationForLongSteps()
    {
        // gpt3-175b, tp 8, pp 16, dp 8, a batch of 1,048,576 sequences: 131,072 micro-batches.
        const Layout big
            = layout({ { "tp", 8 }, { "pp", 16 }, { "dp", 8 }, { "micro_batch", 1 }, { "global_batch", 1048576 } });
        QVERIFY(simulatable(big));
        const Prediction p = predict(big);
        QVERIFY(p.extrapolated);
        QVERIFY(p.eventMicroBatches > 0 && p.eventMicroBatches < 131072);
        QVERIFY(p.events.size() < 1000000);
        QVERIFY(std::any_of(p.notes.begin(), p.notes.end(),
            [](const std::string& n) { return n.find("extrapolated") != std::string::npos; }));
        // Per micro-batch it costs what a replayed step of the same layout costs per micro-batch, to 0.1 %.
        const Layout small
            = layout({ { "tp", 8 }, { "pp", 16 }, { "dp", 8 }, { "micro_batch", 1 }, { "global_batch", 8 * 4096 } });
        const Prediction q = predict(small);
        QVERIFY(!q.extrapolated);
        QVERIFY(std::fabs(p.tflopsPerGpu / q.tflopsPerGpu - 1) < 0.01);
        // The parts still add up.
        QVERIFY(std::fabs(p.compute + p.tpExposed + p.ppExposed + p.bubble + p.dpExposed + p.optimizer - p.stepTime)
            < 1e-6 * p.stepTime);
    }

    void sequenceParallelEvents()
    {
        const Layout l = layout(
            { { "tp", 8 }, { "pp", 4 }, { "dp", 1 }, { "micro_batch", 1 }, { "global_batch", 8 }, { "sp", true } },
            { { "recompute", "selective" } });
        const Prediction p = predict(l);
        auto count = [&](EventKind k) {
            return std::count_if(p.events.begin(), p.events.end(), [k](const auto& e) { return e.kind == k; });
        };
        QVERIFY(count(EventKind::AllGather) > 0);
        QVERIFY(count(EventKind::ReduceScatter) > 0);
        QCOMPARE(count(EventKind::AllReduce), 0); // dp 1 and sp: no all-reduce anywhere
        Layout noSp = l;
        noSp.parallel.sp = false;
        const Prediction q = predict(noSp);
        QVERIFY(std::count_if(q.events.begin(), q.events.end(), [](const auto& e) {
            return e.kind == EventKind::AllReduce;
        }) > 0);
        // Same bytes, so no slower (the norms and dropout now run on s/t tokens); less activation memory.
        QVERIFY(p.stepTime <= q.stepTime && p.stepTime > 0.9 * q.stepTime);
        QVERIFY(p.memory.activations < q.memory.activations);
    }

    void zeroStages()
    {
        nlohmann::json par = { { "tp", 8 }, { "pp", 2 }, { "dp", 4 }, { "micro_batch", 1 }, { "global_batch", 32 } };
        std::vector<Prediction> p;
        for (int zero = 0; zero <= 3; ++zero)
            p.push_back(predict(layout(par, { { "zero", zero }, { "recompute", "full" } })));
        // Model states shrink stage by stage.
        for (int zero = 1; zero <= 3; ++zero)
            QVERIFY(p[zero].memory.modelStates() < p[zero - 1].memory.modelStates());
        QVERIFY(p[3].memory.gathered > 0 && p[2].memory.gathered == 0);
        // ZeRO-3's all-gathers appear on the timeline, beside the compute, with the parameters' bytes.
        const auto gathers = std::count_if(p[3].events.begin(), p[3].events.end(),
            [](const auto& e) { return e.kind == EventKind::AllGather && e.groupSize == 4; });
        QVERIFY(gathers >= 2 * 4 * 2); // every forward and backward of 4 micro-batches on 2 stages
        // ZeRO-3 moves 1.5x the DP volume, and more again per micro-batch: never faster than ZeRO-1.
        QVERIFY(p[3].stepTime >= p[1].stepTime);
        QVERIFY(p[3].dpExposed > 0);
    }
};

QTEST_GUILESS_MAIN(TestSimulator)
#include "tst_simulator.moc"
