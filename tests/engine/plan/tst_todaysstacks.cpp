// The cost model's parts for today's GPU stacks, each against a hand count: NCCL's one ring per NIC and its
// ring/tree/NVLS choice (CollectiveCost), flash attention's HBM traffic and causal kernel (MemoryTraffic), FP8,
// Megatron-Core's TP, gradient and parameter-gather overlaps, and the new layout and profile keys.
#include "engine/plan/CollectiveCost.h"
#include "engine/plan/CostModel.h"
#include "engine/plan/Formulas.h"
#include "engine/plan/LayoutParser.h"
#include "engine/plan/LayoutValidator.h"
#include "engine/plan/MemoryTraffic.h"
#include "engine/profiles/BuiltinProfiles.h"

#include <QTest>

#include <nlohmann/json.hpp>

#include <cmath>

using namespace loom::plan;

namespace {

nlohmann::json base(const char* cluster, int tp, int dp, const char* attention = "flash")
{
    return { { "loom_layout", 1 }, { "name", "t" }, { "model", "llama2-7b" }, { "cluster", cluster },
        { "nodes", std::max(1, tp * dp / 8) },
        { "parallel",
            { { "tp", tp }, { "pp", 1 }, { "dp", dp }, { "micro_batch", 1 }, { "global_batch", dp * 4 },
                { "sp", tp > 1 } } },
        { "memory", { { "zero", 1 }, { "recompute", "none" }, { "attention", attention } } }, { "precision", "bf16" } };
}

Layout read(const nlohmann::json& j)
{
    auto r = readLayout(j.dump(), loom::profiles::BuiltinProfiles::instance());
    if (!r.ok())
        qFatal("%s", r.diagnostics.format().c_str());
    return *r.layout;
}

ClusterSpec cluster(const char* name)
{
    return *loom::profiles::BuiltinProfiles::instance().findCluster(name);
}

} // namespace

class TestTodaysStacks : public QObject {
    Q_OBJECT
private slots:
    void oneRingPerNic_data()
    {
        QTest::addColumn<int>("perNode");
        QTest::addColumn<double>("gbs");
        // dgx-a100: 8 adapters of 25 GB/s for 8 GPUs. A group with k members on each node runs k of the node's
        // 8 rings: k·25 GB/s, never more than NVLink's 300.
        QTest::newRow("one member a node (Megatron's DP with tp 8)") << 1 << 25.0;
        QTest::newRow("two members a node") << 2 << 50.0;
        QTest::newRow("whole nodes (FSDP)") << 8 << 200.0;
    }
    void oneRingPerNic()
    {
        QFETCH(int, perNode);
        QFETCH(double, gbs);
        QCOMPARE(interNodeBandwidthGBs(cluster("dgx-a100"), perNode), gbs);
        // A 13 B model's bf16 gradients over 64 GPUs on 8 nodes: the ring moves 2·63/64·S at that bandwidth.
        const double S = 26e9;
        const CollectiveTime t = ncclCollective(cluster("dgx-a100"), Collective::AllReduce, S, { 8 * perNode, 8 });
        const double n = 8.0 * perNode, bandwidthPart = 2 * (n - 1) / n * S / (gbs * 1e9);
        QVERIFY(t.seconds >= bandwidthPart && t.seconds < bandwidthPart * 1.01);
        QVERIFY(t.algorithm == NcclAlgorithm::Ring);
    }

    void treeForSmallMessagesAcrossManyNodes()
    {
        // 1 MB over 1,024 nodes, one GPU each: the ring pays 2·1,024 network steps (14 µs each, ×1.4), the
        // tree 2·log2(1,024) = 20: NCCL's tuner picks the tree. For 4 GB over 8 nodes the ring's bandwidth
        // (2·7/8 of S at 50 GB/s) beats the tree's (S at 50·0.92·½).
        const ClusterSpec c = cluster("dgx-h100");
        const CollectiveTime small = ncclCollective(c, Collective::AllReduce, 1 << 20, { 1024, 1024 });
        QVERIFY(small.algorithm == NcclAlgorithm::Tree);
        QVERIFY(std::fabs(small.seconds - (2 * 10 * 28e-6 + (1 << 20) / (50e9 * 0.92 * 0.5 * 0.5))) < 1e-9);
        const CollectiveTime large = ncclCollective(c, Collective::AllReduce, 4e9, { 8, 8 });
        QVERIFY(large.algorithm == NcclAlgorithm::Ring);
    }

    void nvlsInsideAnH100Node()
    {
        // NVLink SHARP: S/(β·5/6) + 23 µs against the ring's 2·7/8·S/β + 8.4 + 14·3.4 µs; the A100's NVSwitch
        // has no SHARP, so its node keeps the ring.
        const double S = 256e6;
        const CollectiveTime h100 = ncclCollective(cluster("dgx-h100"), Collective::AllReduce, S, { 8, 1 });
        QVERIFY(h100.algorithm == NcclAlgorithm::Nvls);
        QVERIFY(std::fabs(h100.seconds - (23e-6 + S / (450e9 * 5.0 / 6.0))) < 1e-12);
        const CollectiveTime a100 = ncclCollective(cluster("dgx-a100"), Collective::AllReduce, S, { 8, 1 });
        QVERIFY(a100.algorithm == NcclAlgorithm::Ring);
        QVERIFY(std::fabs(a100.seconds - ((8.4 + 14 * 3.4) * 1e-6 + 2 * 7.0 / 8 * S / 300e9)) < 1e-12);
        // All-gathers stay on the ring there: (n-1)/n·S/β beats NVLS's 6/5·S/β.
        QVERIFY(
            ncclCollective(cluster("dgx-h100"), Collective::AllGather, S, { 8, 1 }).algorithm == NcclAlgorithm::Ring);
    }

    void fsdpAcrossNodesMovesEveryNic()
    {
        // The 13 B FSDP run on 8 nodes: each layer's gather now runs at 8 × 25 GB/s, not 25.
        nlohmann::json j = base("dgx-a100", 1, 64);
        j["memory"]["zero"] = 3;
        const Layout l = read(j);
        Layout oneNic = l;
        oneNic.cluster.interNode->bandwidthGBs = 25.0 / 8; // what a single ring over one NIC share would see
        const Prediction p = predict(l), q = predict(oneNic);
        QVERIFY(p.stepTime < q.stepTime);
        QVERIFY(!p.collectives.empty());
    }

    void flashTrafficLeavesOutTheScores()
    {
        // Llama 2 7B, s 4096, b 1, t 1: the memory-bound traffic is twice the activations per layer,
        // 2·s·b·h·(replicated + split) with flash, plus 2·s·b·h·scores·a·s/h materialised.
        const Layout flash = read(base("dgx-h100", 1, 8)), materialised = read(base("dgx-h100", 1, 8, "materialized"));
        const ModelSpec& m = flash.model;
        const ActivationTerms a = activationTerms(m);
        const double sbh = 4096.0 * 4096.0;
        QVERIFY(std::fabs(layerTrafficBytes(flash) - 2 * sbh * (a.replicated + a.split)) < 1);
        QVERIFY(std::fabs(layerTrafficBytes(materialised) - layerTrafficBytes(flash)
                    - 2 * sbh * a.scores * double(m.heads) * 4096.0 / double(m.hidden))
            < 1);
        // The causal flash kernel computes half of the 4·T·s·h attention core.
        QCOMPARE(attentionCoreFlops(flash), 4.0 * 4096 * 4096 * 4096 / 2);
        QCOMPARE(attentionCoreFlops(materialised), 4.0 * 4096 * 4096 * 4096);
        QVERIFY(predict(flash).stepTime < predict(materialised).stepTime);
    }

    // The loss's passes over the logits (26 bytes a logit forward, 14 backward) on the last stage only, and
    // ring attention's merges (6·cp bytes an element of the output, and of dQ, dK, dV backward).
    void lossAndRingMergeTraffic()
    {
        nlohmann::json j = base("dgx-h100", 2, 2);
        j["parallel"]["pp"] = 2;
        const Layout l = read(j);
        const double T = 4096.0, V = double(l.model.paddedVocab()), logits = T * V / 2.0;
        QCOMPARE(lossTrafficBytes(l).forward, 26.0 * logits);
        QCOMPARE(lossTrafficBytes(l).backward, 14.0 * logits);
        const std::vector<StageWork> w = stageWork(l, 1);
        QVERIFY(std::fabs(w[1].forward.bytes - w[0].forward.bytes - 26.0 * logits) < 1.0);
        QVERIFY(std::fabs(w[1].backward.bytes - w[0].backward.bytes - 14.0 * logits) < 1.0);
        QCOMPARE(ringMergeBytes(l).forward, 0.0); // cp 1: no ring
        nlohmann::json c = base("dgx-h100", 1, 4);
        c["parallel"]["cp"] = 2;
        const Layout ring = read(c);
        const double q = 2048.0 * 4096.0, kv = 2.0 * 2048.0 * 4096.0; // Llama 2 7B: kv heads = heads
        QCOMPARE(ringMergeBytes(ring).forward, 6.0 * 2 * q);
        QCOMPARE(ringMergeBytes(ring).backward, 6.0 * 2 * (q + kv));
        // Loom's CPU engine: neither (its loss is in its calibrated figures, it has no ring attention).
        QCOMPARE(lossTrafficBytes(read(base("local", 1, 2))).forward, 0.0);
    }

    void fp8RunsTheLinearLayersFaster()
    {
        nlohmann::json j = base("dgx-h100", 1, 8);
        const Layout bf16 = read(j);
        j["fp8"] = "delayed";
        const Layout fp8 = read(j);
        QVERIFY(fp8.fp8 == Fp8Recipe::Delayed);
        const DeviceSpec& d = fp8.cluster.device;
        QCOMPARE(fp8Speedup(fp8), d.peakTflopsFp8 * d.fp8GemmMax() / (d.peakTflopsBf16 * d.gemmMax));
        QCOMPARE(fp8Speedup(bf16), 1.0);
        // Casts: T·(2h + (h + f)/t) elements, 3 bytes each plus 1 for the transposed copy.
        QCOMPARE(fp8CastBytes(fp8), 4096.0 * (2 * 4096 + 4096 + 11008) * 4);
        const Prediction p = predict(fp8), q = predict(bf16);
        QVERIFY(p.stepTime < q.stepTime && p.stepTime > q.stepTime / 2);
        QVERIFY(p.memory.activations < q.memory.activations); // FP8 inputs kept for the backward
        // The layout writes its recipe back.
        auto again = readLayout(writeLayout(fp8), loom::profiles::BuiltinProfiles::instance());
        QVERIFY(again.ok());
        QVERIFY(again.layout->fp8 == Fp8Recipe::Delayed);
    }

    void fp8NeedsTheTensorCores_data()
    {
        QTest::addColumn<QString>("cluster");
        QTest::addColumn<QString>("recipe");
        QTest::addColumn<QString>("precision");
        QTest::addColumn<QString>("message");
        QTest::newRow("A100 has no FP8") << "dgx-a100"
                                         << "delayed"
                                         << "bf16"
                                         << "needs FP8 tensor cores";
        QTest::newRow("MXFP8 needs Blackwell") << "dgx-h100"
                                               << "mxfp8"
                                               << "bf16"
                                               << "peak_tflops.mxfp8";
        QTest::newRow("fp32 training") << "dgx-h100"
                                       << "current"
                                       << "fp32"
                                       << "precision is fp32";
    }
    void fp8NeedsTheTensorCores()
    {
        QFETCH(QString, cluster);
        QFETCH(QString, recipe);
        QFETCH(QString, precision);
        QFETCH(QString, message);
        nlohmann::json j = base(cluster.toUtf8().constData(), 1, 8);
        j["fp8"] = recipe.toStdString();
        j["precision"] = precision.toStdString();
        const auto r = readLayout(j.dump(), loom::profiles::BuiltinProfiles::instance());
        QVERIFY(!r.ok());
        const std::string text = r.diagnostics.format();
        QVERIFY2(text.find(message.toStdString()) != std::string::npos, text.c_str());
        j["cluster"] = "dgx-b200";
        j["precision"] = "bf16";
        QVERIFY2(!validateRules(read(j)).hasErrors(), validateRules(read(j)).format().c_str());
    }

    void tpCommOverlapHidesBehindTheGemms()
    {
        nlohmann::json j = base("dgx-h100", 8, 1);
        const Layout exposed = read(j);
        j["comm"] = { { "tp_comm_overlap", true } };
        const Layout overlapped = read(j);
        const Prediction p = predict(exposed), q = predict(overlapped);
        // The first of t chunks still waits: at least 1/t of the TP time stays exposed.
        QVERIFY(q.tpExposed < p.tpExposed && q.tpExposed >= p.tpExposed / 8 - 1e-12);
        QVERIFY(q.stepTime < p.stepTime);
    }

    void distributedOptimizerOverlaps()
    {
        // ZeRO-1 on NCCL: a reduce-scatter during the last backward and an all-gather after the optimizer, which
        // overlap_param_gather hides behind the next step's first forward.
        nlohmann::json j = base("dgx-a100", 1, 64);
        j["comm"] = { { "overlap_grad_reduce", false } };
        const Layout serial = read(j);
        j["comm"] = { { "overlap_grad_reduce", true } };
        const Layout reduceOverlapped = read(j);
        j["comm"]["overlap_param_gather"] = true;
        const Layout both = read(j);
        const double a = predict(serial).dpExposed, b = predict(reduceOverlapped).dpExposed,
                     c = predict(both).dpExposed;
        QVERIFY(a > b && b > c);
        QCOMPARE(predict(both).collectives.back().collective, std::string("reduce_scatter"));
        // Absent, overlap_grad_reduce follows comm.overlap (the existing default).
        QCOMPARE(read(base("dgx-a100", 1, 64)).comm.gradReduceOverlapped(), true);
        auto again = readLayout(writeLayout(both), loom::profiles::BuiltinProfiles::instance());
        QVERIFY(again.ok() && again.layout->comm == both.comm);
    }

    void newProfilesLoad_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<int>("devices");
        QTest::addColumn<double>("memory");
        QTest::addColumn<bool>("nvls");
        QTest::newRow("dgx-h200") << "dgx-h200" << 8 << 141.0 << true;
        QTest::newRow("hgx-h800") << "hgx-h800" << 8 << 80.0 << false;
        QTest::newRow("dgx-b200") << "dgx-b200" << 8 << 180.0 << true;
        QTest::newRow("gb200-nvl72: one NVLink domain of 72") << "gb200-nvl72" << 72 << 186.0 << true;
        QTest::newRow("mi300x-8") << "mi300x-8" << 8 << 192.0 << false;
    }
    void newProfilesLoad()
    {
        QFETCH(QString, name);
        QFETCH(int, devices);
        QFETCH(double, memory);
        QFETCH(bool, nvls);
        const ClusterSpec c = cluster(name.toUtf8().constData());
        QCOMPARE(c.devicesPerNode, std::int64_t(devices));
        QCOMPARE(c.device.memoryGB, memory);
        QCOMPARE(c.intraNode.nvls, nvls);
        QVERIFY(c.device.peakTflopsFp8 > c.device.peakTflopsBf16);
        // A whole NVL72 group is one node: its all-reduce stays on NVLink.
        if (devices == 72)
            QVERIFY(ncclCollective(c, Collective::AllReduce, 1e9, { 72, 1 }).algorithm == NcclAlgorithm::Nvls);
    }
};

QTEST_GUILESS_MAIN(TestTodaysStacks)
#include "tst_todaysstacks.moc"
