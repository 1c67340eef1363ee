// Error feedback's residual memory in the planner (issue 36): a lossy dp codec with error feedback keeps, per
// rank, what compression lost (engine/comm ErrorFeedback: the whole gradient and, for the two-phase scheme, the
// segment the rank reduces), counted against a hand count; no residual without feedback, loss or dp.
#include "engine/plan/CostModel.h"
#include "engine/plan/LayoutParser.h"
#include "engine/profiles/BuiltinProfiles.h"

#include <QTest>

#include <nlohmann/json.hpp>

#include <cmath>

using namespace loom::plan;

namespace {

// Llama 2 7B on one DGX H100 at tp 1, pp 1, dp `dp`, with `comm` as its comm section.
Layout read(int dp, const nlohmann::json& comm, const nlohmann::json& optimizer = nlohmann::json::object())
{
    nlohmann::json j = { { "loom_layout", 1 }, { "name", "t" }, { "model", "llama2-7b" }, { "cluster", "dgx-h100" },
        { "nodes", 1 },
        { "parallel", { { "tp", 8 / dp }, { "pp", 1 }, { "dp", dp }, { "micro_batch", 1 }, { "global_batch", 32 } } },
        { "memory", { { "zero", 1 }, { "recompute", "full" }, { "attention", "flash" } } }, { "precision", "bf16" },
        { "comm", comm } };
    if (!optimizer.empty())
        j["optimizer"] = optimizer;
    auto r = readLayout(j.dump(), loom::profiles::BuiltinProfiles::instance());
    if (!r.ok())
        qFatal("%s", r.diagnostics.format().c_str());
    return *r.layout;
}

} // namespace

class TestCodecMemory : public QObject {
    Q_OBJECT
private slots:
    void residual_data()
    {
        QTest::addColumn<int>("dp");
        QTest::addColumn<QString>("codec");
        QTest::addColumn<bool>("feedback");
        QTest::addColumn<QString>("gradDtype"); // main_grads_dtype, "" for the training precision
        QTest::addColumn<double>("copies"); // residual values per gradient value of the rank
        QTest::addColumn<double>("width"); // bytes a residual value
        QTest::newRow("int8, feedback") << 8 << "int8" << true << "" << 1.0 + 1.0 / 8.0 << 2.0;
        QTest::newRow("int4, feedback, fp32 gradients") << 8 << "int4" << true << "fp32" << 1.0 + 1.0 / 8.0 << 4.0;
        QTest::newRow("int8 at dp 2") << 2 << "int8" << true << "" << 1.0 + 1.0 / 2.0 << 2.0;
        QTest::newRow("top-k: one phase") << 8 << "topk:0.01" << true << "" << 1.0 << 2.0;
        QTest::newRow("int8, no feedback") << 8 << "int8" << false << "" << 0.0 << 2.0;
        QTest::newRow("lz4 is lossless") << 8 << "lz4" << true << "" << 0.0 << 2.0;
        QTest::newRow("none") << 8 << "none" << true << "" << 0.0 << 2.0;
        QTest::newRow("dp 1: no all-reduce") << 1 << "int8" << true << "" << 0.0 << 2.0;
    }
    void residual()
    {
        QFETCH(int, dp);
        QFETCH(QString, codec);
        QFETCH(bool, feedback);
        QFETCH(QString, gradDtype);
        QFETCH(double, copies);
        QFETCH(double, width);
        const nlohmann::json optimizer = gradDtype.isEmpty()
            ? nlohmann::json::object()
            : nlohmann::json { { "main_grads_dtype", gradDtype.toStdString() } };
        const Layout plain = read(dp, { { "dp_codec", "none" } }, optimizer);
        const Layout coded
            = read(dp, { { "dp_codec", codec.toStdString() }, { "error_feedback", feedback } }, optimizer);
        const Prediction a = predict(plain, false), b = predict(coded, false);
        // Parameters of the rank, from the uncompressed prediction's weights (bf16: 2 bytes each).
        const double params = a.memory.params * 1e9 / 2.0;
        const double expected = params * copies * width / 1e9;
        QVERIFY2(std::fabs(b.memory.residual - expected) <= 1e-9 * std::max(1.0, expected),
            qPrintable(QString("residual %1 GB, expected %2 GB").arg(b.memory.residual).arg(expected)));
        QCOMPARE(a.memory.residual, 0.0);
        // The residual is part of the total the fit is judged on.
        QVERIFY(std::fabs(b.memory.total() - b.memory.residual - (a.memory.total())) < 1e-9);
    }
};

QTEST_GUILESS_MAIN(TestCodecMemory)
#include "tst_codecmemory.moc"
