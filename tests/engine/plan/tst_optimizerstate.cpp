// The optimizer section's state precisions in the planner (issue 33 item 4): Megatron's precision-aware
// optimizer (bf16, fp16 or fp8 moments, fp16 master weights), the gradients kept and reduced in fp32 for bf16
// training (main_grads_dtype), and FP8 delayed scaling's amax history, each against a hand count.
#include "engine/plan/CostModel.h"
#include "engine/plan/Formulas.h"
#include "engine/plan/LayoutParser.h"
#include "engine/profiles/BuiltinProfiles.h"

#include <QTest>

#include <nlohmann/json.hpp>

#include <cmath>

using namespace loom::plan;

namespace {

// Llama 2 7B on one DGX H100, dp 8, ZeRO `zero`, bf16 unless told, with `optimizer` as its section.
nlohmann::json base(int zero, const nlohmann::json& optimizer, const char* precision = "bf16")
{
    nlohmann::json j
        = { { "loom_layout", 1 }, { "name", "t" }, { "model", "llama2-7b" }, { "cluster", "dgx-h100" }, { "nodes", 1 },
              { "parallel", { { "tp", 1 }, { "pp", 1 }, { "dp", 8 }, { "micro_batch", 1 }, { "global_batch", 32 } } },
              { "memory", { { "zero", zero }, { "recompute", "full" }, { "attention", "flash" } } },
              { "precision", precision } };
    if (!optimizer.empty())
        j["optimizer"] = optimizer;
    return j;
}

Layout read(const nlohmann::json& j)
{
    auto r = readLayout(j.dump(), loom::profiles::BuiltinProfiles::instance());
    if (!r.ok())
        qFatal("%s", r.diagnostics.format().c_str());
    return *r.layout;
}

} // namespace

class TestOptimizerState : public QObject {
    Q_OBJECT
private slots:
    // Bytes per parameter before sharding: weights, gradients, optimizer (master + exp_avg + exp_avg_sq).
    void bytesPerParameter_data()
    {
        QTest::addColumn<QString>("precision");
        QTest::addColumn<QString>("optimizer"); // the section as JSON
        QTest::addColumn<double>("params");
        QTest::addColumn<double>("grads");
        QTest::addColumn<double>("states");
        // Absent, the gradients keep the training precision (the ZeRO paper's 2 + 2 + 12).
        QTest::newRow("bf16, no section") << "bf16"
                                          << "{}" << 2.0 << 2.0 << 12.0;
        // Megatron's distributed-optimizer table: bf16 weights, fp32 gradients, fp32 master and moments: 18.
        QTest::newRow("bf16, fp32 gradients") << "bf16"
                                              << R"({"main_grads_dtype":"fp32"})" << 2.0 << 4.0 << 12.0;
        QTest::newRow("bf16, gradients reduced in bf16") << "bf16"
                                                         << R"({"main_grads_dtype":"bf16"})" << 2.0 << 2.0 << 12.0;
        QTest::newRow("bf16 moments") << "bf16"
                                      << R"({"exp_avg_dtype":"bf16","exp_avg_sq_dtype":"bf16"})" << 2.0 << 2.0 << 8.0;
        QTest::newRow("fp8 first moment, fp16 second, fp16 master, fp32 gradients")
            << "bf16"
            << R"({"exp_avg_dtype":"fp8","exp_avg_sq_dtype":"fp16","main_params_dtype":"fp16","main_grads_dtype":"fp32"})"
            << 2.0 << 4.0 << 5.0;
        QTest::newRow("fp16 keeps fp16 gradients") << "fp16"
                                                   << "{}" << 2.0 << 2.0 << 12.0;
        QTest::newRow("fp16 with fp32 gradients") << "fp16"
                                                  << R"({"main_grads_dtype":"fp32"})" << 2.0 << 4.0 << 12.0;
        QTest::newRow("fp32 has no master copy") << "fp32"
                                                 << "{}" << 4.0 << 4.0 << 8.0;
    }
    void bytesPerParameter()
    {
        QFETCH(QString, precision);
        QFETCH(QString, optimizer);
        QFETCH(double, params);
        QFETCH(double, grads);
        QFETCH(double, states);
        const Layout l
            = read(base(0, nlohmann::json::parse(optimizer.toStdString()), precision.toLatin1().constData()));
        const ModelStateBytes b = modelStateBytesPerParameter(l.precision, l.optimizer, 0, 1);
        QCOMPARE(b.params, params);
        QCOMPARE(b.grads, grads);
        QCOMPARE(b.optimizer, states);
        // ZeRO-1 shards the optimizer states over dp 8, ZeRO-2 the gradients too.
        QCOMPARE(modelStateBytesPerParameter(l.precision, l.optimizer, 1, 8).optimizer, states / 8);
        QCOMPARE(modelStateBytesPerParameter(l.precision, l.optimizer, 2, 8).grads, grads / 8);
    }

    // The prediction's memory moves by exactly the bytes the dtypes save, on every parameter of the rank.
    void predictionCountsTheDtypes()
    {
        const nlohmann::json fp32Grads = { { "main_grads_dtype", "fp32" } };
        const Prediction fp32 = predict(read(base(1, fp32Grads)), false);
        const Prediction bf16 = predict(
            read(base(
                1, { { "main_grads_dtype", "fp32" }, { "exp_avg_dtype", "bf16" }, { "exp_avg_sq_dtype", "bf16" } })),
            false);
        const double params = fp32.totalParameters;
        const auto near = [](double a, double b) { return std::fabs(a / b - 1.0) < 1e-9; };
        QVERIFY(near(fp32.memory.optimizer, params * 12.0 / 8.0 / 1e9));
        QVERIFY(near(bf16.memory.optimizer, params * 8.0 / 8.0 / 1e9));
        QVERIFY(near(fp32.memory.grads, params * 4.0 / 1e9));
        QCOMPARE(bf16.memory.grads, fp32.memory.grads);
        QCOMPARE(bf16.memory.params, fp32.memory.params);
        const Prediction bf16Grads = predict(read(base(1, { { "main_grads_dtype", "bf16" } })), false);
        QVERIFY(near(bf16Grads.memory.grads, params * 2.0 / 1e9));
    }

    // Gradients reduced in fp32 move twice the bytes of bf16 ones: the DP collective's size and its time.
    void gradientsReduceAtTheirWidth()
    {
        const Prediction fp32 = predict(read(base(1, { { "main_grads_dtype", "fp32" } })), false);
        const Prediction bf16 = predict(read(base(1, {})), false);
        const auto dpOf = [](const Prediction& p) {
            for (const auto& c : p.collectives)
                if (c.group == "dp")
                    return c;
            return CollectiveSummary {};
        };
        QCOMPARE(dpOf(fp32).collective, std::string("reduce_scatter"));
        QVERIFY(std::fabs(dpOf(fp32).bytes - 2.0 * dpOf(bf16).bytes) < 1.0);
        QVERIFY(dpOf(fp32).seconds > dpOf(bf16).seconds);
        // FSDP (ZeRO-3): each layer's reduce-scatter in the backward moves the wider gradients too.
        const Prediction fsdp32 = predict(read(base(3, { { "main_grads_dtype", "fp32" } })), false);
        const Prediction fsdp16 = predict(read(base(3, { { "main_grads_dtype", "bf16" } })), false);
        QVERIFY(fsdp32.stepTime >= fsdp16.stepTime);
        QVERIFY(fsdp32.memory.grads > fsdp16.memory.grads);
    }

    // Delayed scaling keeps 4 modules · 5 tensors · (1024 amaxes + scale + inverse) · 4 bytes a layer; the
    // recipes that measure each tensor keep no history.
    void fp8AmaxHistory_data()
    {
        QTest::addColumn<QString>("recipe");
        QTest::addColumn<double>("bytesPerLayer");
        QTest::newRow("delayed") << "delayed" << 4.0 * 5.0 * 1026.0 * 4.0;
        QTest::newRow("current") << "current" << 0.0;
        QTest::newRow("none") << "none" << 0.0;
    }
    void fp8AmaxHistory()
    {
        QFETCH(QString, recipe);
        QFETCH(double, bytesPerLayer);
        auto j = base(1, {});
        j["fp8"] = recipe.toStdString();
        const Layout l = read(j);
        const Prediction p = predict(l, false);
        QVERIFY(std::fabs(p.memory.fp8State - double(l.model.layers) * bytesPerLayer / 1e9) < 1e-12);
        QVERIFY(std::fabs(p.memory.total()
                    - (p.memory.params + p.memory.grads + p.memory.optimizer + p.memory.activations + p.memory.reserve
                        + p.memory.gathered + p.memory.fp8State))
            < 1e-9);
    }

    // The new fields read back as written, and a dtype Megatron does not offer is refused by name.
    void fieldsRoundTrip()
    {
        const Layout l = read(base(1,
            { { "exp_avg_dtype", "fp8" }, { "exp_avg_sq_dtype", "fp16" }, { "main_params_dtype", "fp16" },
                { "main_grads_dtype", "bf16" } }));
        const auto j = toJson(l.optimizer);
        QCOMPARE(j.value("exp_avg_dtype", ""), std::string("fp8"));
        QCOMPARE(j.value("exp_avg_sq_dtype", ""), std::string("fp16"));
        QCOMPARE(j.value("main_params_dtype", ""), std::string("fp16"));
        QCOMPARE(j.value("main_grads_dtype", ""), std::string("bf16"));
        QVERIFY(l.optimizer.precisionAware());
        QVERIFY(!read(base(1, { { "main_grads_dtype", "bf16" } })).optimizer.precisionAware());
        auto bad = base(1, { { "main_params_dtype", "bf16" } });
        const auto r = readLayout(bad.dump(), loom::profiles::BuiltinProfiles::instance());
        QVERIFY(!r.ok());
        QVERIFY(QString::fromStdString(r.diagnostics.format()).contains("main_params_dtype"));
    }
};

QTEST_APPLESS_MAIN(TestOptimizerState)
#include "tst_optimizerstate.moc"
