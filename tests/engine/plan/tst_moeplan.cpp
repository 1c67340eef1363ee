// Mixtures of experts in the planner: parameter counts against Mixtral's published ones, the all-to-all's
// volume and time against counts derived by hand, the simulator's dispatch/combine events against the
// schedule, the expert groups carved out of the DP group, the validation rules and the search over ep.
#include "engine/plan/CostModel.h"
#include "engine/plan/ExpertGroups.h"
#include "engine/plan/Formulas.h"
#include "engine/plan/LayoutParser.h"
#include "engine/plan/LayoutValidator.h"
#include "engine/plan/Search.h"
#include "engine/profiles/BuiltinProfiles.h"

#include <QTest>

#include <nlohmann/json.hpp>

using namespace loom::plan;

namespace {

LayoutReadResult read(const std::string& model, int tp, int pp, int dp, int ep, int micro, int batch,
    const std::string& cluster = "local", int nodes = 1)
{
    nlohmann::json j
        = { { "loom_layout", 1 }, { "name", "moe" }, { "model", model }, { "cluster", cluster }, { "nodes", nodes },
              { "parallel",
                  { { "tp", tp }, { "pp", pp }, { "dp", dp }, { "ep", ep }, { "micro_batch", micro },
                      { "global_batch", batch }, { "schedule", "1f1b" } } },
              { "memory", { { "zero", 0 }, { "recompute", "none" } } } };
    return readLayout(j.dump(), loom::profiles::BuiltinProfiles::instance());
}

Layout layout(const std::string& model, int tp, int pp, int dp, int ep, int micro, int batch,
    const std::string& cluster = "local", int nodes = 1)
{
    auto r = read(model, tp, pp, dp, ep, micro, batch, cluster, nodes);
    if (!r.ok())
        qFatal("%s", r.diagnostics.format().c_str());
    return *r.layout;
}

} // namespace

class TestMoePlan : public QObject {
    Q_OBJECT
private slots:
    void deepseekMoeParameters()
    {
        // DeepSeek-MoE 16B (Dai et al. 2024; its config.json): 16.4 B parameters, 2.8 B active. Block 0 is
        // dense (first_dense_layers 1), the others hold 64 routed experts of 1408 (top 6) and 2 shared ones.
        nlohmann::json j = { { "name", "deepseek-moe-16b" }, { "layers", 28 }, { "hidden", 2048 }, { "heads", 16 },
            { "ffn_hidden", 10944 }, { "vocab", 102400 }, { "seq_len", 4096 }, { "vocab_pad_multiple", 1 },
            { "mlp", "swiglu" }, { "norm", "rmsnorm" }, { "position", "rope" }, { "bias", false },
            { "tie_embeddings", false }, { "experts", 64 }, { "top_k", 6 }, { "moe_ffn_hidden", 1408 },
            { "shared_experts", 2 }, { "first_dense_layers", 1 }, { "router_norm_topk", false }, { "norm_eps", 1e-6 } };
        Diagnostics d;
        auto m = parseModelSpec(j, "model", d);
        QVERIFY2(m, d.format().c_str());
        QVERIFY(std::fabs(double(m->parameterCount()) / 1e9 - 16.4) < 0.05);
        QVERIFY(std::fabs(double(m->activeParameterCount()) / 1e9 - 2.83) < 0.01);
        QCOMPARE(m->moeLayerCount(), std::int64_t(27));
        QVERIFY(!m->moeLayer(0));
        QVERIFY(m->moeLayer(1));
        QCOMPARE(m->moeLayersIn(0, 3), std::int64_t(3));
        QCOMPARE(m->sharedExpertParameters(), std::int64_t(3) * 2048 * 1408 * 2);
        // FLOPs per token: block 0 dense; blocks 1-27 the router, 6 routed and 2 shared experts.
        const double att = 4.0 * 2048 * 2048, dense = att + 3.0 * 2048 * 10944;
        const double moe = att + 2048.0 * 64 + 6 * 3.0 * 2048 * 1408 + 2 * 3.0 * 2048 * 1408;
        QVERIFY(std::fabs(blockMatmulParameters(*m) - (dense + 27 * moe) / 28) < 1.0);
        // The fields go back out and read back the same.
        Diagnostics again;
        auto back = parseModelSpec(nlohmann::json::parse(toJson(*m).dump()), "model", again);
        QVERIFY(back);
        QVERIFY(*back == *m);
    }

    void newModelFieldsRefused_data()
    {
        QTest::addColumn<QString>("patch");
        QTest::addColumn<QString>("field");
        QTest::newRow("shared without experts") << R"({"experts": 0, "shared_experts": 1})"
                                                << "model.shared_experts";
        QTest::newRow("z-loss dense") << R"({"experts": 0, "router_z_loss": 0.001})"
                                      << "model.router_z_loss";
        QTest::newRow("all dense") << R"({"experts": 4, "first_dense_layers": 2})"
                                   << "model.first_dense_layers";
        QTest::newRow("hidden without count") << R"({"experts": 4, "shared_expert_hidden": 64})"
                                              << "model.shared_expert_hidden";
        QTest::newRow("theta learned") << R"({"position": "learned", "rope_theta": 500000})"
                                       << "model.rope_theta";
        QTest::newRow("eps zero") << R"({"norm_eps": 0})"
                                  << "model.norm_eps";
        QTest::newRow("scaling not object") << R"({"rope_scaling": 8})"
                                            << "model.rope_scaling";
        QTest::newRow("scaling factor missing") << R"({"rope_scaling": {"low_freq_factor": 1, "high_freq_factor": 4,
            "original_max_position_embeddings": 8192}})"
                                                << "model.rope_scaling.factor";
        QTest::newRow("scaling inverted") << R"({"rope_scaling": {"factor": 8, "low_freq_factor": 4,
            "high_freq_factor": 1, "original_max_position_embeddings": 8192}})"
                                          << "model.rope_scaling.high_freq_factor";
        QTest::newRow("scaling type") << R"({"rope_scaling": {"rope_type": "yarn", "factor": 8, "low_freq_factor": 1,
            "high_freq_factor": 4, "original_max_position_embeddings": 8192}})"
                                      << "model.rope_scaling.rope_type";
    }
    void newModelFieldsRefused()
    {
        QFETCH(QString, patch);
        QFETCH(QString, field);
        nlohmann::json j = { { "name", "m" }, { "layers", 2 }, { "hidden", 64 }, { "heads", 4 }, { "ffn_hidden", 128 },
            { "vocab", 256 }, { "seq_len", 32 }, { "position", "rope" }, { "norm", "rmsnorm" } };
        j.merge_patch(nlohmann::json::parse(patch.toStdString()));
        Diagnostics d;
        QVERIFY(!parseModelSpec(j, "model", d));
        QVERIFY2(d.format().find(field.toStdString()) != std::string::npos, d.format().c_str());
    }

    void mixtralParameters()
    {
        const auto m = loom::profiles::BuiltinProfiles::instance().findModel("mixtral-8x7b");
        QVERIFY(m);
        // Published: 46.7 B parameters, 12.9 B active per token (Jiang et al. 2024).
        QVERIFY(std::fabs(double(m->parameterCount()) / 1e9 - 46.7) < 0.05);
        QVERIFY(std::fabs(double(m->activeParameterCount()) / 1e9 - 12.9) < 0.05);
        // By hand: one expert 3·4096·14336, the router 4096·8.
        QCOMPARE(m->expertParameters(), std::int64_t(3) * 4096 * 14336);
        QCOMPARE(m->routerParameters(), std::int64_t(4096 * 8));
        QCOMPARE(m->moeLayerCount(), std::int64_t(32));
        const auto tiny = loom::profiles::BuiltinProfiles::instance().findModel("moe-tiny");
        QVERIFY(tiny);
        QCOMPARE(tiny->moeLayerCount(), std::int64_t(2)); // blocks 0 and 2
        QCOMPARE(tiny->moeLayersIn(1, 3), std::int64_t(1));
        QCOMPARE(tiny->moeLayersIn(1, 1), std::int64_t(0));
    }

    void allToAllVolume()
    {
        // moe-tiny (s 32, h 64, top-2), micro-batch 2, fp32 on the local cluster: each dispatch moves
        // 2·32 tokens · 2 choices · 64 values · 4 bytes = 32768 bytes per member.
        const Layout l = layout("moe-tiny", 1, 1, 4, 4, 2, 8);
        QVERIFY(l.precision == Precision::Fp32);
        QCOMPARE(moeAllToAllBytes(l.model, 2, 4.0), 32768.0);
        // α-β by hand: (n-1)·α + (n-1)/n·S/β on a 1 GB/s, 10 µs link, n = 4.
        LinkSpec link;
        link.bandwidthGBs = 1;
        link.latencyUs = 10;
        QCOMPARE(allToAllSeconds(32768, 4, link), 3 * 10e-6 + 0.75 * 32768 / 1e9);
        QCOMPARE(allToAllSeconds(32768, 1, link), 0.0);

        // The simulator: per micro-batch and stage, forward and backward each dispatch and combine once per
        // MoE block: events of (blocks · 32768) bytes, two per op, in an EP group of 4.
        const Prediction p = predict(l);
        int forward = 0, backward = 0, alltoall = 0;
        for (const auto& e : p.events) {
            forward += e.kind == loom::trace::EventKind::Forward;
            backward += e.kind == loom::trace::EventKind::Backward;
            if (e.kind != loom::trace::EventKind::AllToAll)
                continue;
            ++alltoall;
            QCOMPARE(e.bytes, std::uint64_t(2 * 32768)); // two MoE blocks in the stage
            QCOMPARE(e.groupSize, 4);
        }
        QCOMPARE(forward, 1); // 8 / (2 · 4) micro-batches
        QCOMPARE(alltoall, 2 * (forward + backward));
        QVERIFY(p.epExposed > 0);
        QVERIFY(std::fabs(p.compute + p.tpExposed + p.ppExposed + p.bubble + p.dpExposed + p.optimizer + p.epExposed
                    - p.stepTime)
            < 1e-9 * p.stepTime);
        // ep 1: no all-to-all at all.
        const Prediction one = predict(layout("moe-tiny", 1, 1, 4, 1, 2, 8));
        QCOMPARE(one.epExposed, 0.0);
    }

    void expertsShardedByEp()
    {
        const Layout ep1 = layout("mixtral-8x7b", 2, 4, 8, 1, 1, 64, "dgx-a100", 8);
        const Layout ep8 = layout("mixtral-8x7b", 2, 4, 8, 8, 1, 64, "dgx-a100", 8);
        const Prediction a = predict(ep1), b = predict(ep8);
        // Per device: each pipeline rank holds 8 MoE blocks of 8 experts; ep 8 keeps 1/8 of them.
        const double experts = 8.0 * 8.0 * double(ep1.model.expertParameters());
        const double width = modelStateBytesPerParameter(ep1.precision, 0, 8).params; // bytes per weight
        QVERIFY(std::fabs((a.memory.params - b.memory.params) * 1e9 / width - experts * 7.0 / 8.0) < 1e-3 * experts);
        QCOMPARE(b.totalParameters, a.totalParameters);
        QVERIFY(b.epExposed > 0);
    }

    void expertGroups()
    {
        const RankGrid grid(1, 1, 4, 8);
        QCOMPARE(expertGroupOf(grid, 2, 3), (std::vector<std::int64_t> { 2, 3 }));
        QCOMPARE(expertDataGroupOf(grid, 2, 3), (std::vector<std::int64_t> { 1, 3 }));
        QCOMPARE(expertRankOf(grid, 2, 3), std::int64_t(1));
        const RankGrid tp2(2, 1, 4, 8); // DP group of tp = 1: {1, 3, 5, 7}
        QCOMPARE(expertGroupOf(tp2, 2, 5), (std::vector<std::int64_t> { 5, 7 }));
        QCOMPARE(expertDataGroupOf(tp2, 2, 5), (std::vector<std::int64_t> { 1, 5 }));
        QCOMPARE(expertGroupOf(tp2, 4, 5), (std::vector<std::int64_t> { 1, 3, 5, 7 }));
        QCOMPARE(expertDataGroupOf(tp2, 4, 5), (std::vector<std::int64_t> { 5 }));
    }

    void validation_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<int>("dp");
        QTest::addColumn<int>("ep");
        QTest::addColumn<QString>("expected");
        QTest::newRow("dense model") << "gpt-tiny" << 2 << 2 << "has none";
        QTest::newRow("ep does not divide experts") << "moe-tiny" << 3 << 3 << "does not divide model.experts";
        QTest::newRow("ep does not divide dp") << "moe-tiny" << 2 << 4 << "does not divide parallel.dp";
    }
    void validation()
    {
        QFETCH(QString, model);
        QFETCH(int, dp);
        QFETCH(int, ep);
        QFETCH(QString, expected);
        const auto r = read(model.toStdString(), 1, 1, dp, ep, 1, 12);
        const std::string text = r.diagnostics.format();
        QVERIFY2(!r.ok(), text.c_str());
        QVERIFY2(QString::fromStdString(text).contains(expected), text.c_str());
        QVERIFY2(QString::fromStdString(text).contains("parallel.ep"), text.c_str());
        QVERIFY(read("moe-tiny", 1, 1, 4, 2, 1, 8).ok());
    }

    void searchEnumeratesEp()
    {
        SearchRequest req;
        req.model = *loom::profiles::BuiltinProfiles::instance().findModel("mixtral-8x7b");
        req.model.seqLen = 4096;
        req.cluster = *loom::profiles::BuiltinProfiles::instance().findCluster("dgx-h100");
        req.nodes = 4;
        req.globalBatch = 256;
        const SearchResult r = search(req);
        QVERIFY(!r.ranked.empty());
        bool sawEp = false;
        for (const auto& c : r.ranked)
            sawEp = sawEp || c.layout.parallel.ep > 1;
        QVERIFY2(sawEp, r.why.c_str());
        for (const auto& c : r.ranked)
            QVERIFY(validateRules(c.layout).errors().empty());
    }
};

QTEST_GUILESS_MAIN(TestMoePlan)
#include "tst_moeplan.moc"
