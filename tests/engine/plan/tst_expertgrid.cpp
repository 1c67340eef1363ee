// Megatron-Core's expert grid (parallel.expert_tp): expert parallelism carved from a stage's tp·cp·dp ranks,
// so EP 8 with DP 1 (TP 8) is a layout; Megatron's own divisibility rules, the experts' memory and all-to-all
// on the new grid against hand counts, the Megatron export's flag and loom-train's refusal.
#include "engine/bridges/Export.h"
#include "engine/plan/CostModel.h"
#include "engine/plan/EngineSupport.h"
#include "engine/plan/ExpertGroups.h"
#include "engine/plan/Formulas.h"
#include "engine/plan/LayoutParser.h"
#include "engine/plan/LayoutValidator.h"
#include "engine/plan/RankGrid.h"
#include "engine/profiles/BuiltinProfiles.h"

#include <QTest>

#include <nlohmann/json.hpp>

#include <cmath>

using namespace loom::plan;

namespace {

nlohmann::json mixtral(int tp, int dp, int ep, int expertTp, bool sp = true, const char* model = "mixtral-8x7b")
{
    nlohmann::json parallel = { { "tp", tp }, { "pp", 1 }, { "dp", dp }, { "ep", ep }, { "sp", sp },
        { "micro_batch", 1 }, { "global_batch", 4 * dp } };
    if (expertTp > 0)
        parallel["expert_tp"] = expertTp;
    return { { "loom_layout", 1 }, { "name", "moe" }, { "model", model }, { "cluster", "dgx-h100" },
        { "nodes", std::max(1, tp * dp / 8) }, { "parallel", parallel },
        { "memory", { { "zero", 0 }, { "recompute", "none" } } }, { "precision", "bf16" } };
}

Layout read(const nlohmann::json& j)
{
    auto r = readLayout(j.dump(), loom::profiles::BuiltinProfiles::instance());
    if (!r.ok())
        qFatal("%s", r.diagnostics.format().c_str());
    return *r.layout;
}

} // namespace

class TestExpertGrid : public QObject {
    Q_OBJECT
private slots:
    void rules_data()
    {
        QTest::addColumn<int>("tp");
        QTest::addColumn<int>("dp");
        QTest::addColumn<int>("ep");
        QTest::addColumn<int>("expertTp");
        QTest::addColumn<bool>("sp");
        QTest::addColumn<QString>("errorAt"); // empty: valid
        QTest::newRow("ep 8 from tp 8, dp 1") << 8 << 1 << 8 << 1 << true << "";
        QTest::newRow("ep 8 without the grid: carved from dp 1") << 8 << 1 << 8 << 0 << true << "parallel.ep";
        QTest::newRow("expert_tp 2 · ep 8 over 8 ranks") << 8 << 1 << 8 << 2 << true << "parallel.expert_tp";
        QTest::newRow("ep 4, expert_tp 2 over tp 8") << 8 << 1 << 4 << 2 << true << "";
        QTest::newRow("Megatron's default expert_tp = tp") << 8 << 2 << 2 << 8 << true << "";
        QTest::newRow("ep with tp needs sp") << 8 << 1 << 8 << 1 << false << "parallel.sp";
        QTest::newRow("ep must divide the experts") << 8 << 2 << 16 << 1 << true << "parallel.ep";
    }
    void rules()
    {
        QFETCH(int, tp);
        QFETCH(int, dp);
        QFETCH(int, ep);
        QFETCH(int, expertTp);
        QFETCH(bool, sp);
        QFETCH(QString, errorAt);
        const auto r
            = readLayout(mixtral(tp, dp, ep, expertTp, sp).dump(), loom::profiles::BuiltinProfiles::instance());
        const Diagnostics& d = r.diagnostics; // reading validates
        if (errorAt.isEmpty())
            QVERIFY2(!d.hasErrors(), d.format().c_str());
        else
            QVERIFY2(d.hasErrorAt(errorAt.toStdString()), d.format().c_str());
    }

    void denseModelRefusesExpertTp()
    {
        nlohmann::json j = mixtral(8, 1, 1, 1, true, "llama2-7b");
        j["parallel"].erase("ep");
        QVERIFY(readLayout(j.dump(), loom::profiles::BuiltinProfiles::instance())
                    .diagnostics.hasErrorAt("parallel.expert_tp"));
    }

    // The experts' weights per GPU: E/ep experts split over expert_tp; without the grid each TP rank holds
    // its E/ep experts whole. Only the expert term differs between the layouts (bf16 weights, 2 bytes).
    void expertMemory()
    {
        const Layout grid = read(mixtral(8, 1, 8, 1)), split = read(mixtral(8, 1, 1, 8)),
                     whole = read(mixtral(8, 1, 1, 0));
        const ModelSpec& m = grid.model;
        const double experts = double(m.moeLayerCount() * m.experts * m.expertParameters());
        const double a = predict(grid, false).memory.params, b = predict(split, false).memory.params,
                     c = predict(whole, false).memory.params;
        QVERIFY(std::fabs(a - b) < 1e-9);
        QVERIFY(std::fabs((c - a) * 1e9 - 2.0 * experts * (1.0 - 1.0 / 8.0)) < 1e-3 * experts);
    }

    // Dispatch and combine, forward and backward: four all-to-alls a block of each rank's T/tp tokens ·
    // top_k · h · 2 bytes over the 8 GPUs of the node.
    void allToAllOnTheGrid()
    {
        const Layout l = read(mixtral(8, 1, 8, 1));
        const ModelSpec& m = l.model;
        const double bytes = double(m.seqLen * m.effectiveTopK() * m.hidden) * 2.0 / 8.0;
        const double hand = double(l.parallel.microBatches()) * double(m.moeLayerCount()) * 4.0
            * allToAllSeconds(bytes, 8, l.cluster.intraNode);
        const Prediction p = predict(l, false);
        qInfo("ep 8 from tp 8: all-to-all %.4f s a step (by hand %.4f), %.0f tokens/s", p.epExposed, hand,
            p.tokensPerSecond);
        QVERIFY(std::fabs(p.epExposed / hand - 1) < 1e-9);
    }

    void expertGroupsOnTheGrid()
    {
        const Layout l = read(mixtral(8, 2, 4, 2));
        const RankGrid grid = RankGrid::forLayout(l);
        const ExpertGrid g = expertGrid(l);
        QCOMPARE(g.edp, 2);
        // Ranks 0..7 are dp 0's tp ranks: expert_tp pairs {0,1}, {2,3}, ...; rank 0's expert group is every
        // second rank of the first eight.
        QCOMPARE(megatronExpertGroupOf(grid, g, 0), (std::vector<std::int64_t> { 0, 2, 4, 6 }));
        QCOMPARE(megatronExpertGroupOf(grid, g, 3), (std::vector<std::int64_t> { 1, 3, 5, 7 }));
    }

    void exportAndEngine()
    {
        const Layout l = read(mixtral(8, 1, 8, 1));
        const ExportResult r = exportLayout(l, ExportTarget::Megatron);
        QVERIFY(!r.files.empty());
        QVERIFY(r.files[0].text.find("--expert-model-parallel-size 8") != std::string::npos);
        QVERIFY(r.files[0].text.find("--expert-tensor-parallel-size 1") != std::string::npos);
        const Layout two = read(mixtral(8, 1, 4, 2));
        QVERIFY(exportLayout(two, ExportTarget::Megatron).files[0].text.find("--expert-tensor-parallel-size 2")
            != std::string::npos);
        const EngineSupport s = engineSupport(l);
        QVERIFY(!s.trainable());
        QVERIFY2(s.reason().find("parallel.expert_tp") != std::string::npos, s.reason().c_str());
    }
};

QTEST_GUILESS_MAIN(TestExpertGrid)
#include "tst_expertgrid.moc"
