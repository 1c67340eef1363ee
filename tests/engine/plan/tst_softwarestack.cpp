// Software-stack profiles (engine/plan/SoftwareStack.h): the layout key "stack", its reader's messages, the
// file's round trip, the eager stacks' element-wise bytes against a hand count, the compute fraction on the
// device, and that the default stack (the newest Megatron-Core) changes nothing. The published rows that fixed
// each stack's figures, and the held-out ones, are in tst_published.
#include "engine/plan/CostModel.h"
#include "engine/plan/LayoutParser.h"
#include "engine/plan/SoftwareStack.h"
#include "engine/profiles/BuiltinProfiles.h"

#include <QTest>

#include <nlohmann/json.hpp>

#include <cmath>

using namespace loom::plan;

namespace {

// Llama 2 13B as torchtitan ran it on 64 A100 (FSDP2, micro-batch 2 of 4,096 tokens).
nlohmann::json llama13b(const nlohmann::json& stack)
{
    nlohmann::json j = { { "loom_layout", 1 }, { "name", "llama2-13b-fsdp" },
        { "model",
            { { "name", "llama2-13b" }, { "layers", 40 }, { "hidden", 5120 }, { "heads", 40 }, { "kv_heads", 40 },
                { "ffn_hidden", 13824 }, { "vocab", 32000 }, { "seq_len", 4096 }, { "mlp", "swiglu" },
                { "norm", "rmsnorm" }, { "position", "rope" }, { "bias", false }, { "tie_embeddings", false } } },
        { "cluster", "dgx-a100" }, { "nodes", 8 },
        { "parallel", { { "tp", 1 }, { "pp", 1 }, { "dp", 64 }, { "micro_batch", 2 }, { "global_batch", 128 } } },
        { "memory", { { "zero", 3 }, { "recompute", "none" } } }, { "precision", "bf16" } };
    if (!stack.is_null())
        j["stack"] = stack;
    return j;
}

LayoutReadResult readText(const nlohmann::json& j)
{
    return readLayout(j.dump(), loom::profiles::BuiltinProfiles::instance());
}

Layout read(const nlohmann::json& j)
{
    auto r = readText(j);
    if (!r.ok())
        qFatal("%s", r.diagnostics.format().c_str());
    return *r.layout;
}

} // namespace

class TestSoftwareStack : public QObject {
    Q_OBJECT
private slots:
    void builtinStacks()
    {
        // The default first; every built-in one named, described and sourced, and readable by its name.
        const auto& stacks = loom::plan::builtinStacks();
        QCOMPARE(stacks.front().spec, StackSpec {});
        QCOMPARE(QString::fromStdString(stacks.front().spec.name), QStringLiteral("megatron-core"));
        for (const char* name : { "megatron-core", "megatron-2021", "megatron-deepspeed", "torchtitan" }) {
            const BuiltinStack* s = findBuiltinStack(name);
            QVERIFY2(s, name);
            QVERIFY(!s->description.empty() && !s->source.empty());
            QVERIFY(s->spec.compute > 0.5 && s->spec.compute < 1.5);
            QCOMPARE(read(llama13b(name)).stack, s->spec);
        }
        QCOMPARE(read(llama13b(nullptr)).stack, StackSpec {});
    }

    void readerErrors_data()
    {
        QTest::addColumn<QString>("stack"); // the "stack" value as JSON text
        QTest::addColumn<QString>("field");
        QTest::addColumn<QString>("says");
        QTest::newRow("unknown name") << R"("pytorch-lightning")"
                                      << "stack"
                                      << "megatron-deepspeed or torchtitan";
        QTest::newRow("a number") << "3"
                                  << "stack"
                                  << "a stack name";
        QTest::newRow("no name") << R"({"compute": 0.9})"
                                 << "stack.name"
                                 << "name";
        QTest::newRow("compute zero") << R"({"name": "mine", "compute": 0})"
                                      << "stack.compute"
                                      << "compute";
        QTest::newRow("compute too high") << R"({"name": "mine", "compute": 3})"
                                          << "stack.compute"
                                          << "compute";
        QTest::newRow("elementwise word") << R"({"name": "mine", "elementwise": "lazy"})"
                                          << "stack.elementwise"
                                          << "fused";
        QTest::newRow("long name") << QString(R"({"name": "%1"})").arg(QString(100, 'x')) << "stack.name"
                                   << "name";
    }
    void readerErrors()
    {
        QFETCH(QString, stack);
        QFETCH(QString, field);
        QFETCH(QString, says);
        const auto r = readText(llama13b(nlohmann::json::parse(stack.toStdString())));
        QVERIFY(!r.ok());
        const QString text = QString::fromStdString(r.diagnostics.format());
        QVERIFY2(text.contains(field) && text.contains(says), qPrintable(text));
    }

    void roundTrip()
    {
        // A built-in stack is written by its name, a stack of one's own as its object; the default not at all.
        for (const nlohmann::json& stack : { nlohmann::json("torchtitan"),
                 nlohmann::json({ { "name", "mine" }, { "elementwise", "eager" }, { "compute", 0.9 } }),
                 nlohmann::json(nullptr) }) {
            const Layout l = read(llama13b(stack));
            const std::string text = writeLayout(l);
            QCOMPARE(read(nlohmann::json::parse(text)), l);
            QCOMPARE(nlohmann::json::parse(text).contains("stack"), !stack.is_null());
        }
        const Layout own = read(llama13b({ { "name", "mine" }, { "compute", 0.9 } }));
        QCOMPARE(own.stack.elementwise, Elementwise::Fused);
        QCOMPARE(own.stack.compute, 0.9);
    }

    void eagerBytesHandCount()
    {
        // Llama 2 13B (h = q = k = 5120, f = 13824, no grouped heads), tp 1, T = 2 × 4096 tokens a micro-batch:
        // two RMSNorms 2 × 32·h, the rotary embedding 16·(q + k), the attention output's copy 4·q, SwiGLU 4·f
        // = 110.8·h bytes a token beyond the fused kernels.
        const Layout eager = read(llama13b("torchtitan"));
        const double h = 5120, f = 13824, T = 8192;
        const double expected = T * (64 * h + 32 * h + 4 * h + 4 * f);
        QCOMPARE(eagerElementwiseBytes(eager), expected);
        QCOMPARE(eagerElementwiseBytes(read(llama13b(nullptr))), 0.0);
        // The forward moves those bytes at the HBM's speed once, the backward twice: the step grows by exactly
        // 3 × layers × micro-batches × bytes / bandwidth (one micro-batch a step here).
        const StageWork fused = stageWork(read(llama13b(nullptr)), 1)[0], e = stageWork(eager, 1)[0];
        QCOMPARE(e.forward.bytes - fused.forward.bytes, 40 * expected);
        QCOMPARE(e.backward.bytes - fused.backward.bytes, 2 * 40 * expected);
        QCOMPARE(e.forward.flops, fused.forward.flops);
        // Grouped K/V heads (Llama 3 70B: 8 of 64) add their repeat: K and V read at k and written at h.
        nlohmann::json gqa = llama13b("torchtitan");
        gqa["model"]["hidden"] = 8192;
        gqa["model"]["heads"] = 64;
        gqa["model"]["kv_heads"] = 8;
        gqa["model"]["ffn_hidden"] = 28672;
        const double H = 8192, K = 1024, F = 28672;
        QCOMPARE(eagerElementwiseBytes(read(gqa)), T * (64 * H + 16 * (H + K) + 4 * H + 4 * F + 4 * (K + H)));
    }

    void computeFractionOnTheDevice()
    {
        // A stack's compute fraction scales the GEMM, FP8 and flash ceilings and nothing else; the default stack
        // (absent or named) predicts exactly what the profile alone predicts.
        const Layout base = read(llama13b(nullptr));
        const Layout named = read(llama13b("megatron-core"));
        QCOMPARE(predict(named, false).stepTime, predict(base, false).stepTime);
        QVERIFY(!stackApplies(base));
        const Layout slow = read(llama13b({ { "name", "slow" }, { "compute", 0.5 } }));
        const DeviceSpec d = stackDevice(slow);
        QCOMPARE(d.gemmMax, 0.5 * base.cluster.device.gemmMax);
        QCOMPARE(d.flashEfficiency, 0.5 * base.cluster.device.flashEfficiency);
        QCOMPARE(d.memoryBandwidthGBs, base.cluster.device.memoryBandwidthGBs);
        QCOMPARE(d.peakTflopsBf16, base.cluster.device.peakTflopsBf16);
        const Prediction pb = predict(base, false), ps = predict(slow, false);
        QVERIFY(ps.compute > 1.8 * pb.compute && ps.compute < 2.0 * pb.compute); // the memory-bound part stays
        QCOMPARE(ps.memory.total(), pb.memory.total());
        QCOMPARE(ps.mfu / ps.tflopsPerGpu, pb.mfu / pb.tflopsPerGpu); // MFU against the same peak
        // The search's estimate reads the same stack.
        QVERIFY(estimate(slow).stepTime > 1.5 * estimate(base).stepTime);
    }

    void cpuClustersKeepTheirCalibration()
    {
        // On the local cluster the stack is Loom's own engine: a named stack changes nothing there.
        const std::string text = R"({"loom_layout": 1, "name": "mini", "model": "gpt-mini", "cluster": "local",
            "parallel": {"tp": 1, "pp": 1, "dp": 2, "micro_batch": 2, "global_batch": 4}, "stack": "torchtitan"})";
        auto r = readLayout(text, loom::profiles::BuiltinProfiles::instance());
        QVERIFY2(r.ok(), r.diagnostics.format().c_str());
        Layout l = *r.layout;
        const double t = predict(l, false).stepTime;
        l.stack = StackSpec {};
        QCOMPARE(predict(l, false).stepTime, t);
        QVERIFY(!stackApplies(*r.layout));
    }
};

QTEST_GUILESS_MAIN(TestSoftwareStack)
#include "tst_softwarestack.moc"
