// Calibration recovers the parameters that generated a trace: events synthesised from the cost model with
// known efficiency, memory bandwidth and link α-β (exactly, then with ±3 % noise on every duration) are fitted
// starting from the built-in "local" profile. Parameters without events are kept and say why.
#include "engine/plan/AllreduceChoice.h"
#include "engine/plan/Calibrate.h"
#include "engine/plan/CostModel.h"
#include "engine/plan/LayoutParser.h"
#include "engine/plan/RankGrid.h"
#include "engine/plan/Schedule.h"
#include "engine/profiles/BuiltinProfiles.h"
#include "engine/trace/ChromeTrace.h"

#include <QTest>

#include <nlohmann/json.hpp>

#include <random>
#include <sstream>

using namespace loom::plan;
using loom::trace::EventKind;
using loom::trace::TraceEvent;

namespace {

Layout gptMini(int tp, int pp, int dp, const char* model = "gpt-mini", const char* cluster = "local", int batch = 16)
{
    const nlohmann::json j = { { "loom_layout", 1 }, { "name", "mini" }, { "model", model }, { "cluster", cluster },
        { "nodes", std::max(1, tp * pp * dp / 8) },
        { "parallel", { { "tp", tp }, { "pp", pp }, { "dp", dp }, { "micro_batch", 2 }, { "global_batch", batch } } },
        { "precision", "fp32" } };
    auto r = readLayout(j.dump(), loom::profiles::BuiltinProfiles::instance());
    if (!r.ok())
        qFatal("%s", r.diagnostics.format().c_str());
    return *r.layout;
}

// The cluster the synthetic machine really is.
ClusterSpec truth(const ClusterSpec& base)
{
    ClusterSpec c = base;
    c.device.gemmMax = 0.35;
    c.device.memoryBandwidthGBs = 3.0;
    c.intraNode.latencyUs = 20.0;
    c.intraNode.bandwidthGBs = 2.0;
    if (c.interNode) {
        c.intraNode = { c.intraNode.kind, 150.0, 3.0, 0 };
        c.interNode->latencyUs = 12.0;
        c.interNode->bandwidthGBs = 11.0;
    }
    return c;
}

constexpr int kTensor = 1, kPipeline = 2, kData = 3; // group ids, in loom-train's order (world is 0)

// Three steps of every rank of `layout` run on `cluster`, each duration times (1 + noise·u), u in [-1, 1].
std::vector<TraceEvent> synthesise(Layout layout, const ClusterSpec& cluster, double noise)
{
    layout.cluster = cluster;
    std::mt19937 random(7);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    auto jitter = [&](double seconds) { return static_cast<std::int64_t>(seconds * (1.0 + noise * u(random)) * 1e9); };
    const RankGrid grid = RankGrid::forLayout(layout);
    const Schedule schedule = Schedule::forLayout(layout);
    const auto work = stageWork(layout, schedule.chunks());
    const auto& p = layout.parallel;
    const double activation = double(p.microBatch * layout.model.seqLen * layout.model.hidden) * 4.0;
    std::vector<TraceEvent> out;
    auto event = [](std::int32_t rank, EventKind kind, std::int32_t step, std::int64_t start, std::int64_t end) {
        TraceEvent e;
        e.rank = rank;
        e.kind = kind;
        e.lane = loom::trace::laneOf(kind);
        e.step = step;
        e.startNs = start;
        e.endNs = end;
        return e;
    };
    auto linkOf = [&](int group) {
        const auto kind = group == kTensor ? GroupKind::Tensor
            : group == kPipeline           ? GroupKind::Pipeline
                                           : GroupKind::Data;
        return grid.maxNodesSpanned(kind) > 1 && cluster.interNode ? *cluster.interNode : cluster.intraNode;
    };
    auto allReduce
        = [&](std::int32_t rank, std::int32_t step, std::int64_t start, double bytes, std::int64_t n, int group) {
              TraceEvent e = event(rank, EventKind::AllReduce, step, start,
                  start + jitter(ringAllReduceSeconds(bytes, n, linkOf(group))));
              e.bytes = static_cast<std::uint64_t>(bytes);
              e.groupSize = static_cast<std::int32_t>(n);
              e.group = group;
              e.algorithm = loom::trace::Algorithm::Library;
              out.push_back(e);
              return e.endNs;
          };
    for (std::int64_t rank = 0; rank < grid.size(); ++rank) {
        const RankCoord c = grid.coordOf(rank);
        const auto r = static_cast<std::int32_t>(rank);
        std::int64_t now = 0;
        for (std::int32_t step = 0; step < 3; ++step) {
            for (const PipelineOp& op : schedule.opsOf(c.pp)) {
                const std::int64_t vs = schedule.virtualStage(c.pp, op.chunk);
                const bool fwd = op.kind == PipelineOp::Kind::Forward;
                const std::int64_t start = now;
                now += jitter((fwd ? work[vs].forward : work[vs].backward).seconds(cluster.device, layout.precision));
                const double layers = double(layout.stageRanges()[static_cast<std::size_t>(vs)].size());
                for (int k = 0; p.tp > 1 && k < int(2 * layers); ++k) // the TP all-reduces it waits for inside
                    now = allReduce(r, step, now, activation, p.tp, kTensor);
                TraceEvent e = event(r, fwd ? EventKind::Forward : EventKind::Backward, step, start, now);
                e.stage = static_cast<std::int32_t>(vs);
                e.microBatch = op.microBatch;
                e.chunk = static_cast<std::int32_t>(op.chunk);
                out.push_back(e);
            }
            const double gradients = double(layout.model.parameterCount()) * 4.0 / double(p.tp * p.pp);
            for (double share : { 0.25, 0.75 }) // two buckets
                if (p.dp > 1)
                    now = allReduce(r, step, now, share * gradients, p.dp, kData);
            if (p.tp > 1)
                now = allReduce(r, step, now, 4.0, p.tp, kTensor); // the gradient norm
            if (p.pp > 1)
                now = allReduce(r, step, now, 4.0, p.pp, kPipeline);
            const std::int64_t start = now;
            now += jitter(optimizerBytes(layout, c.pp) / (cluster.device.memoryBandwidthGBs * 1e9));
            out.push_back(event(r, EventKind::Optimizer, step, start, now));
        }
    }
    return out;
}

const std::map<std::int32_t, loom::trace::GroupKind> kKinds
    = { { 0, loom::trace::GroupKind::World }, { kTensor, loom::trace::GroupKind::Tensor },
          { kPipeline, loom::trace::GroupKind::Pipeline }, { kData, loom::trace::GroupKind::Data } };

const FittedParameter& parameter(const Calibration& c, const std::string& name)
{
    for (const auto& p : c.parameters)
        if (p.name == name)
            return p;
    qFatal("no parameter %s", name.c_str());
}

} // namespace

class TestCalibrate : public QObject {
    Q_OBJECT
private slots:
    void recoversKnownParameters_data()
    {
        QTest::addColumn<double>("noise");
        QTest::addColumn<double>("tolerance");
        QTest::newRow("exact events") << 0.0 << 1e-3; // whole nanoseconds; 4 significant digits
        QTest::newRow("3 % noise") << 0.03 << 0.05;
    }
    void recoversKnownParameters()
    {
        QFETCH(double, noise);
        QFETCH(double, tolerance);
        const Layout layout = gptMini(2, 2, 2);
        const ClusterSpec real = truth(layout.cluster);
        const Calibration fit = calibrate(layout, synthesise(layout, real, noise), kKinds);
        auto close = [&](double got, double want, const char* what) {
            QVERIFY2(std::fabs(got / want - 1.0) <= tolerance,
                qPrintable(QStringLiteral("%1: %2, want %3").arg(what).arg(got).arg(want)));
        };
        close(fit.cluster.device.gemmMax, real.device.gemmMax, "gemm max");
        close(fit.cluster.device.memoryBandwidthGBs, real.device.memoryBandwidthGBs, "memory bandwidth");
        close(fit.cluster.intraNode.latencyUs, real.intraNode.latencyUs, "latency");
        close(fit.cluster.intraNode.bandwidthGBs, real.intraNode.bandwidthGBs, "bandwidth");
        QVERIFY(parameter(fit, "device.gemm_efficiency.max").fitted);
        QVERIFY(parameter(fit, "intra_node.bandwidth_gbs").fitted);
        QCOMPARE(fit.cluster.device.gemmHalfWidth, layout.cluster.device.gemmHalfWidth); // one width: kept
        QVERIFY(!parameter(fit, "device.gemm_efficiency.half_width").fitted);
        QCOMPARE(fit.steps, 2); // the first of three is left out
        Layout calibrated = layout, real2 = layout;
        calibrated.cluster = fit.cluster;
        real2.cluster = real;
        close(predict(calibrated).stepTime, predict(real2).stepTime, "predicted step");
        QVERIFY(fit.residuals.front().rmsAfter < fit.residuals.front().rmsBefore);
        QVERIFY(fit.residuals.front().rmsAfter <= noise + 1e-4);
    }

    // A GPU trace's passes are its kernels: each forward and backward cut into four kernels on a stream (with
    // a gap the device idles) is fitted as the passes they make up, not as four passes of a quarter each.
    void fitsPassesOfKernels()
    {
        const Layout layout = gptMini(1, 2, 2);
        const ClusterSpec real = truth(layout.cluster);
        std::vector<TraceEvent> kernels;
        for (const auto& e : synthesise(layout, real, 0.0)) {
            if (e.kind != EventKind::Forward && e.kind != EventKind::Backward) {
                kernels.push_back(e);
                continue;
            }
            const std::int64_t quarter = (e.endNs - e.startNs) / 4;
            for (int k = 0; k < 4; ++k) {
                TraceEvent part = e;
                part.stream = 7;
                part.startNs = e.startNs + k * quarter + (k == 3 ? 1 : 0); // a nanosecond the GPU waits
                part.endNs = k == 3 ? e.endNs + 1 : part.startNs + quarter;
                kernels.push_back(part);
            }
        }
        const Calibration fit = calibrate(layout, kernels, kKinds);
        QVERIFY2(std::fabs(fit.cluster.device.gemmMax / real.device.gemmMax - 1.0) <= 1e-2,
            qPrintable(QString::number(fit.cluster.device.gemmMax)));
        QVERIFY2(std::fabs(fit.cluster.device.memoryBandwidthGBs / real.device.memoryBandwidthGBs - 1.0) <= 1e-2,
            qPrintable(QString::number(fit.cluster.device.memoryBandwidthGBs)));
    }

    // Two nodes' worth of link classes: TP and PP inside a node, DP across nodes; each class gets its own fit.
    // Issue 31: the shared-memory all-reduces that "auto" runs on one machine are no longer dropped: they are
    // compared with the cost model's price of shm (plan::allreduceSeconds) under the calibrated device.
    void comparesSharedMemoryAllReduces()
    {
        const Layout layout = gptMini(1, 1, 2);
        const ClusterSpec real = truth(layout.cluster);
        Layout priced = layout;
        priced.cluster = real;
        std::vector<TraceEvent> events = synthesise(layout, real, 0.0);
        int shm = 0;
        for (auto& e : events)
            if (e.kind == EventKind::AllReduce && e.group == kData) {
                e.algorithm = loom::trace::Algorithm::SharedMemory;
                e.endNs = e.startNs
                    + static_cast<std::int64_t>(1e9
                        * allreduceSeconds(
                            priced, loom::trace::Algorithm::SharedMemory, double(e.bytes), 2, 1, real.intraNode));
                ++shm;
            }
        QVERIFY(shm > 0);
        const Calibration fit = calibrate(layout, events, kKinds);
        const auto row = std::find_if(fit.residuals.begin(), fit.residuals.end(),
            [](const FitResidual& r) { return r.what.find("shared-memory") != std::string::npos; });
        QVERIFY(row != fit.residuals.end());
        QCOMPARE(row->events, std::int64_t(2 * 2)); // two buckets in each of the steps after the first
        QVERIFY2(row->rmsAfter < 0.05, qPrintable(QString::number(row->rmsAfter)));
    }

    void fitsEachLinkClass()
    {
        const Layout layout = gptMini(2, 2, 8, "gpt2-124m", "dgx-a100", 64);
        const ClusterSpec real = truth(layout.cluster);
        const Calibration fit = calibrate(layout, synthesise(layout, real, 0.0), kKinds);
        auto close = [&](double got, double want, const char* what) {
            QVERIFY2(std::fabs(got / want - 1.0) <= 2e-3,
                qPrintable(QStringLiteral("%1: %2, want %3").arg(what).arg(got).arg(want)));
        };
        close(fit.cluster.intraNode.latencyUs, real.intraNode.latencyUs, "NVLink latency");
        close(fit.cluster.intraNode.bandwidthGBs, real.intraNode.bandwidthGBs, "NVLink bandwidth");
        close(fit.cluster.interNode->latencyUs, real.interNode->latencyUs, "InfiniBand latency");
        close(fit.cluster.interNode->bandwidthGBs, real.interNode->bandwidthGBs, "InfiniBand bandwidth");
        close(fit.cluster.device.gemmMax, real.device.gemmMax, "gemm max");
        QVERIFY(parameter(fit, "inter_node.bandwidth_gbs").fitted);
    }

    // A fit that puts the device above its peak holds max at 1 (the peak stays) and fits the bandwidth alone.
    void neverAbovePeak()
    {
        const Layout layout = gptMini(1, 2, 1);
        ClusterSpec real = truth(layout.cluster);
        real.device.gemmMax = 1.0;
        real.device.peakTflopsFp32 = 3.0 * layout.cluster.device.peakTflopsFp32;
        const Calibration fit = calibrate(layout, synthesise(layout, real, 0.0), kKinds);
        QCOMPARE(fit.cluster.device.gemmMax, 1.0);
        QCOMPARE(fit.cluster.device.peakTflopsFp32, layout.cluster.device.peakTflopsFp32);
        QVERIFY(parameter(fit, "device.gemm_efficiency.max").note.find("held at 1") != std::string::npos);
        QVERIFY(parameter(fit, "device.memory_bandwidth_gbs").fitted);
        // What the FLOPs cannot take, the bandwidth does: the step still comes out near the measured one.
        QVERIFY2(std::fabs(fit.predictedAfter / fit.measuredStepSeconds - 1.0) < 0.3,
            qPrintable(QStringLiteral("%1 vs %2").arg(fit.predictedAfter).arg(fit.measuredStepSeconds)));
    }

    // One rank: no all-reduce, so the links keep their figures and say why.
    void keepsWhatTheTraceCannotTell()
    {
        const Layout layout = gptMini(1, 1, 1);
        const Calibration fit = calibrate(layout, synthesise(layout, truth(layout.cluster), 0.0), kKinds);
        const auto& latency = parameter(fit, "intra_node.latency_us");
        QVERIFY(!latency.fitted);
        QCOMPARE(latency.after, layout.cluster.intraNode.latencyUs);
        QVERIFY(latency.note.find("no all-reduce") != std::string::npos);
        QVERIFY(std::fabs(fit.cluster.device.gemmMax / 0.35 - 1.0) < 1e-3);
    }

    void refusesATraceWithoutComputeEvents()
    {
        const Layout layout = gptMini(1, 1, 1);
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, calibrate(layout, {}, kKinds));
        // The simulator's own events would only fit the model to itself.
        try {
            calibrate(layout, predict(layout).events, kKinds);
            QFAIL("a simulated trace was calibrated");
        } catch (const std::invalid_argument& e) {
            QVERIFY2(std::string(e.what()).find("simulated") != std::string::npos, e.what());
        }
    }

    // Through a Chrome trace like loom-train's: group kinds from the group names, the layout from otherData.
    void readsLoomTrainTraces()
    {
        const Layout layout = gptMini(2, 2, 2);
        const auto events = synthesise(layout, truth(layout.cluster), 0.0);
        std::vector<loom::trace::GroupInfo> groups = { { 0, loom::trace::GroupKind::World, {}, "world" },
            { 1, loom::trace::GroupKind::Tensor, {}, "TP group of pp=0 dp=0" },
            { 2, loom::trace::GroupKind::Pipeline, {}, "PP group of tp=0 dp=0" },
            { 3, loom::trace::GroupKind::Data, {}, "DP group of tp=0 pp=0" } };
        std::ostringstream text;
        loom::trace::writeChromeTrace(
            text, events, groups, nlohmann::json({ { "layout", nlohmann::json::parse(writeLayout(layout)) } }).dump());
        const CalibrationTrace read = readCalibrationTrace(text.str());
        QCOMPARE(read.events.size(), events.size());
        QCOMPARE(read.groupKinds.size(), std::size_t(3)); // world has no events
        QVERIFY(read.groupKinds.at(1) == loom::trace::GroupKind::Tensor);
        QVERIFY(read.groupKinds.at(3) == loom::trace::GroupKind::Data);
        const auto again = readLayout(read.layoutJson, loom::profiles::BuiltinProfiles::instance());
        QVERIFY(again.ok());
        const Calibration fit = calibrate(*again.layout, read.events, read.groupKinds);
        QVERIFY(std::fabs(fit.cluster.intraNode.bandwidthGBs / 2.0 - 1.0) < 1e-3); // microsecond rounding
        QVERIFY(std::fabs(fit.cluster.device.gemmMax / 0.35 - 1.0) < 1e-3);
    }
};

QTEST_GUILESS_MAIN(TestCalibrate)
#include "tst_calibrate.moc"
