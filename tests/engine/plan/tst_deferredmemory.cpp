// The memory of the zero-bubble schedules' deferred W in the planner (issue 38): loom-train frees a
// micro-batch's forward activations at the end of its B and keeps fp32 copies of every weight product's X and
// dY until its W (tst_splitbackward checks that count, plan::deferredWeightFloatsPerToken, against the
// engine's own). ZB-H1's rank 0 runs each W right after its B, so it holds 1F1B's forwards plus, at the end of
// each B, one micro-batch's copies: the prediction says exactly that, and the quick estimate agrees with it.
#include "engine/plan/CostModel.h"
#include "engine/plan/Formulas.h"
#include "engine/plan/LayoutParser.h"
#include "engine/profiles/BuiltinProfiles.h"

#include <QTest>

#include <nlohmann/json.hpp>

#include <cmath>

using namespace loom::plan;

namespace {

// 8 GPT-2 blocks of hidden 256, 64 tokens, micro-batch 2, 8 micro-batches, fp32 (bench_zerobubble's first model).
Layout read(const std::string& schedule, int pp)
{
    const bool v = schedule == "zb-v" || schedule == "dualpipe";
    const nlohmann::json j = { { "loom_layout", 1 }, { "name", "t" }, { "cluster", "local" },
        { "model",
            { { "name", "small" }, { "layers", 8 }, { "hidden", 256 }, { "heads", 4 }, { "ffn_hidden", 1024 },
                { "vocab", 256 }, { "seq_len", 64 } } },
        { "precision", "fp32" },
        { "parallel",
            { { "tp", 1 }, { "pp", pp }, { "dp", 1 }, { "vpp", v ? 2 : 1 }, { "micro_batch", 2 },
                { "global_batch", 16 }, { "schedule", schedule } } } };
    auto r = readLayout(j.dump(), loom::profiles::BuiltinProfiles::instance());
    if (!r.ok())
        qFatal("%s", r.diagnostics.format().c_str());
    return *r.layout;
}

} // namespace

class TestDeferredMemory : public QObject {
    Q_OBJECT
private slots:
    void gpt2Block()
    {
        ModelSpec m;
        m.hidden = 256;
        m.heads = 4;
        m.ffnHidden = 1024;
        m.layers = 2;
        // QKV h + 3h, attention out h + h, MLP up h + 4h and down 4h + h: 16h.
        QCOMPARE(deferredWeightFloatsPerToken(m, 0, 1), 16.0 * 256);
        // Over tp 4 each column-parallel N and each row-parallel K is a quarter: 4h + (4h + 2f)/t.
        QCOMPARE(deferredWeightFloatsPerToken(m, 0, 4), 4.0 * 256 + (4.0 * 256 + 2.0 * 1024) / 4);
    }

    void zbH1HoldsOneMoreCopyThan1F1B_data()
    {
        QTest::addColumn<int>("pp");
        QTest::newRow("pp 2") << 2;
        QTest::newRow("pp 4") << 4;
    }
    void zbH1HoldsOneMoreCopyThan1F1B()
    {
        QFETCH(int, pp);
        const Prediction oneF = predict(read("1f1b", pp)), h1 = predict(read("zb-h1", pp));
        const Layout l = read("zb-h1", pp);
        const double layers = 8.0 / pp, tokens = 2.0 * 64;
        const double copies = 4.0 * tokens * layers * deferredWeightFloatsPerToken(l.model, 0, 1) / 1e9;
        const double more = h1.memoryPerStage.at(0).activations - oneF.memoryPerStage.at(0).activations;
        QVERIFY2(
            std::fabs(more - copies) < 1e-9, qPrintable(QString("%1 GB more, %2 GB of copies").arg(more).arg(copies)));
        // 4.2 MB at pp 4 (2 blocks of 128 tokens · 16·256 floats), 8.4 MB at pp 2.
        QVERIFY(std::fabs(copies - 4.0 * tokens * 16 * 256 * layers / 1e9) < 1e-12);
    }

    void estimateAgreesWithPrediction_data()
    {
        QTest::addColumn<QString>("schedule");
        QTest::addColumn<int>("pp");
        for (const char* s : { "1f1b", "zb-h1", "zb-h2", "zb-v", "dualpipe" })
            for (int pp : { 2, 4 })
                QTest::addRow("%s pp %d", s, pp) << QString(s) << pp;
    }
    void estimateAgreesWithPrediction()
    {
        QFETCH(QString, schedule);
        QFETCH(int, pp);
        const Layout l = read(schedule.toStdString(), pp);
        const double predicted = predict(l).memory.total(), estimated = estimate(l).memoryGB;
        QVERIFY2(std::fabs(predicted - estimated) < 1e-9 * predicted,
            qPrintable(QString("predict %1 GB, estimate %2 GB").arg(predicted).arg(estimated)));
    }
};

QTEST_GUILESS_MAIN(TestDeferredMemory)
#include "tst_deferredmemory.moc"
