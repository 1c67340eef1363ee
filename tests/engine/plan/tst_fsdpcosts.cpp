// FSDP's own costs on one pipeline stage (engine/plan/CostSharded.cpp), against hand counts: the root's and the
// first layer's all-gathers that no compute hides, the last layer's and the root's reduce-scatters after the
// last backward, and the copies out of the all-gather's flat output and into the reduce-scatter's flat input.
#include "engine/plan/CollectiveCost.h"
#include "engine/plan/CostModel.h"
#include "engine/plan/LayoutParser.h"
#include "engine/profiles/BuiltinProfiles.h"

#include <QTest>

#include <nlohmann/json.hpp>

#include <cmath>

using namespace loom::plan;

namespace {

Layout read(const nlohmann::json& j)
{
    auto r = readLayout(j.dump(), loom::profiles::BuiltinProfiles::instance());
    if (!r.ok())
        qFatal("%s", r.diagnostics.format().c_str());
    return *r.layout;
}

Layout fsdp(const char* cluster, int nodes, int zero, int pp = 1)
{
    const int dp = nodes * 8 / pp;
    return read({ { "loom_layout", 1 }, { "name", "fsdp" }, { "model", "llama2-7b" }, { "cluster", cluster },
        { "nodes", nodes },
        { "parallel",
            { { "tp", 1 }, { "pp", pp }, { "dp", dp }, { "micro_batch", 1 }, { "global_batch", dp * pp * 2 } } },
        { "memory", { { "zero", zero }, { "recompute", "none" }, { "attention", "flash" } } }, { "precision", "bf16" },
        { "optimizer", { { "main_grads_dtype", "fp32" } } } });
}

struct HandCount {
    double edges = 0, copies = 0;
};

// Per micro-batch, by hand: root = embedding + final norm + head, unit = one layer; bf16 gathers (2 bytes),
// fp32 reduce-scatters (4 bytes); the model's last layer and the root are not gathered again for backward.
HandCount byHand(const Layout& l)
{
    const ModelSpec& m = l.model;
    const double root = double(m.embeddingParameters() + m.headParameters());
    const double all = double(m.parameterCount()), unit = (all - root) / double(m.layers);
    const GroupShape g { l.parallel.dp, l.nodes };
    auto gather = [&](double n) { return collectiveSeconds(l, Collective::AllGather, 2.0 * n, g); };
    auto scatter = [&](double n) { return collectiveSeconds(l, Collective::ReduceScatter, 4.0 * n, g); };
    const double memBw = l.cluster.device.memoryBandwidthGBs * 1e9;
    HandCount h;
    h.edges = scatter(unit) + scatter(root);
    h.copies = (2.0 + 4.0) * all / memBw; // the gradients in at 2 bytes, out at 4
    if (l.memory.zero >= 3) {
        h.edges += gather(root) + gather(unit);
        h.copies += 2.0 * 2.0 * all / memBw + 2.0 * 2.0 * (double(m.layers) - 1.0) * unit / memBw;
    }
    const double microBatches = double(l.parallel.microBatches());
    h.edges *= microBatches;
    h.copies *= microBatches;
    return h;
}

} // namespace

class TestFsdpCosts : public QObject {
    Q_OBJECT
private slots:
    void edgesAndCopies_data()
    {
        QTest::addColumn<QString>("cluster");
        QTest::addColumn<int>("nodes");
        QTest::addColumn<int>("zero");
        QTest::newRow("ZeRO-3, one DGX A100") << "dgx-a100" << 1 << 3;
        QTest::newRow("ZeRO-3, eight DGX A100") << "dgx-a100" << 8 << 3;
        QTest::newRow("ZeRO-2, one DGX H100") << "dgx-h100" << 1 << 2;
        QTest::newRow("ZeRO-3, two DGX H100") << "dgx-h100" << 2 << 3;
    }
    void edgesAndCopies()
    {
        QFETCH(QString, cluster);
        QFETCH(int, nodes);
        QFETCH(int, zero);
        const Layout l = fsdp(cluster.toUtf8().constData(), nodes, zero);
        const Prediction p = predict(l, false);
        const HandCount h = byHand(l);
        qInfo("%s: edges %.4f s (by hand %.4f), copies %.4f s (%.4f), DP exposed %.4f of a %.3f s step",
            QTest::currentDataTag(), p.shardEdges, h.edges, p.shardCopies, h.copies, p.dpExposed, p.stepTime);
        QVERIFY(h.edges > 0 && h.copies > 0);
        QVERIFY(std::fabs(p.shardEdges / h.edges - 1) < 1e-9);
        QVERIFY(std::fabs(p.shardCopies / h.copies - 1) < 1e-9);
        // Both are inside the exposed DP time, which the step includes.
        QVERIFY(p.dpExposed >= p.shardEdges + p.shardCopies - 1e-12);
        QVERIFY(std::fabs(p.compute + p.tpExposed + p.ppExposed + p.bubble + p.dpExposed + p.optimizer + p.cpExposed
                    + p.epExposed - p.stepTime)
            < 1e-6 * p.stepTime);
    }

    // The estimate the search ranks by sums the same per-op costs.
    void estimateAgrees()
    {
        const Layout l = fsdp("dgx-a100", 1, 3);
        const Prediction p = predict(l, false);
        const Estimate e = estimate(l);
        QVERIFY(std::fabs(e.stepTime / p.stepTime - 1) < 0.01);
    }

    // A pipeline's ops hide one another's first gathers and last reduce-scatters (and the CPU engine's own
    // sharding prefetches across ops): no FSDP2 edges or copies there.
    void noEdgesInPipelinesOrOnCpu()
    {
        QCOMPARE(predict(fsdp("dgx-a100", 1, 3, 2), false).shardEdges, 0.0);
        const Layout cpu = read(
            { { "loom_layout", 1 }, { "name", "cpu" }, { "model", "gpt-tiny" }, { "cluster", "local" }, { "nodes", 1 },
                { "parallel", { { "tp", 1 }, { "pp", 1 }, { "dp", 2 }, { "micro_batch", 1 }, { "global_batch", 4 } } },
                { "memory", { { "zero", 3 } } } });
        const Prediction p = predict(cpu, false);
        QCOMPARE(p.shardEdges, 0.0);
        QCOMPARE(p.shardCopies, 0.0);
    }
};

QTEST_GUILESS_MAIN(TestFsdpCosts)
#include "tst_fsdpcosts.moc"
