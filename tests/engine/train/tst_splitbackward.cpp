// A backward split into B (input gradients) and W (weight gradients), as the zero-bubble schedules run it,
// against the whole backward: the same input gradients out of B, the same parameter gradients after W, for
// GPT-2, Llama and MoE blocks, with and without full recompute; W reports each block once, B none.
#include "GradCheckModel.h"

#include "engine/plan/Formulas.h"
#include "engine/train/CpuKernels.h"
#include "engine/train/GptStage.h"

#include <QTest>

#include <cmath>
#include <map>

using namespace loom;
using namespace loom::train;

namespace {

plan::ModelSpec modelNamed(const QString& name)
{
    plan::ModelSpec m = test::smallGradCheckModel();
    m.layers = 4;
    if (name.contains("llama") || name.contains("mixtral")) {
        m.heads = 4;
        m.kvHeads = 2;
        m.ffnHidden = 24;
        m.mlp = plan::ModelSpec::Mlp::SwiGlu;
        m.norm = plan::ModelSpec::Norm::RmsNorm;
        m.position = plan::ModelSpec::Position::Rope;
        m.bias = false;
        m.tieEmbeddings = false;
    }
    if (name.contains("moe") || name.contains("mixtral")) {
        m.experts = 4;
        m.topK = 2;
        m.moeFfnHidden = 24;
        m.moeLayerFreq = 2;
        m.auxLossCoeff = 0.5;
    }
    return m;
}

struct Result {
    std::vector<float> grads;
    std::vector<std::vector<float>> dInputs; // per micro-batch, of chunk 1 (what B sends upstream)
    std::map<std::int64_t, int> blocksDone;
    std::size_t deferredAfterB = 0, deferredAtEnd = 0;
    bool secondWRefused = false;
};

// Two micro-batches through two chunks of one stage (blocks 0-1 with the embedding, 2-3 with the head): the
// whole backward, or B of both micro-batches and then their W's out of order.
Result run(const plan::ModelSpec& model, bool recompute, bool split)
{
    CpuKernels kernels;
    GptStage stage({ .model = model,
                       .chunks = { { { 0, 1 }, true, false }, { { 2, 3 }, false, true } },
                       .fullRecompute = recompute },
        kernels);
    stage.setSplitBackward(split);
    test::initialiseForGradCheck(stage.params(), 7);
    stage.params().zeroGrads();
    const int B = 2, T = B * static_cast<int>(model.seqLen), h = static_cast<int>(model.hidden);
    Result r;
    auto done = [&r](std::int64_t layer) { ++r.blocksDone[layer]; };
    std::vector<std::vector<float>> acts(2, std::vector<float>(static_cast<std::size_t>(T * h)));
    for (int mb = 0; mb < 2; ++mb) {
        const auto batch = test::randomBatch(model, T, 3 + static_cast<unsigned>(mb));
        stage.forward(mb, 0, B, batch.tokens.data(), batch.targets.data(), nullptr, acts[mb].data());
        stage.forward(mb, 1, B, batch.tokens.data(), batch.targets.data(), acts[mb].data(), nullptr);
    }
    for (int mb = 0; mb < 2; ++mb) {
        std::vector<float> dIn(static_cast<std::size_t>(T * h));
        stage.backward(mb, 1, nullptr, dIn.data(), 0.5f, done);
        stage.backward(mb, 0, dIn.data(), nullptr, 0.5f, done);
        r.dInputs.push_back(dIn);
    }
    if (split) {
        r.deferredAfterB = stage.deferredFloats();
        for (auto [mb, chunk] : { std::pair { 1, 0 }, { 0, 1 }, { 0, 0 }, { 1, 1 } })
            stage.weightBackward(mb, chunk, done);
        r.deferredAtEnd = stage.deferredFloats();
        try {
            stage.weightBackward(0, 0, done);
        } catch (const std::logic_error&) {
            r.secondWRefused = true;
        }
    }
    r.grads.assign(stage.params().grads.begin(), stage.params().grads.end());
    return r;
}

} // namespace

class TestSplitBackward : public QObject {
    Q_OBJECT
private slots:
    void sameAsWholeBackward_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<bool>("recompute");
        for (const char* model : { "gpt2", "llama", "moe", "mixtral" })
            for (bool recompute : { false, true })
                QTest::addRow("%s%s", model, recompute ? " recompute" : "") << QString(model) << recompute;
    }
    void sameAsWholeBackward()
    {
        QFETCH(QString, model);
        QFETCH(bool, recompute);
        const plan::ModelSpec spec = modelNamed(model);
        const Result whole = run(spec, recompute, false), split = run(spec, recompute, true);
        // B is the whole backward's input-gradient path: the same operations, the same bits.
        QVERIFY(split.dInputs == whole.dInputs);
        double largest = 0, worst = 0;
        for (std::size_t i = 0; i < whole.grads.size(); ++i) {
            largest = std::max(largest, double(std::fabs(whole.grads[i])));
            worst = std::max(worst, double(std::fabs(whole.grads[i] - split.grads[i])));
        }
        QVERIFY(largest > 0.1);
        // Only the order of additions into a gradient may differ (the tied embedding's two shares).
        QVERIFY2(worst <= 1e-6 * largest, qPrintable(QString("largest difference %1 of %2").arg(worst).arg(largest)));
        // W's copies of activations and output gradients: what the planner counts for a deferred W
        // (plan::deferredWeightFloatsPerToken per block, and the LM head's dLogits and final-norm output).
        double perToken = double(spec.paddedVocab() + spec.hidden);
        for (std::int64_t layer = 0; layer < spec.layers; ++layer)
            perToken += plan::deferredWeightFloatsPerToken(spec, layer, 1);
        const double tokens = 2.0 * 2.0 * double(spec.seqLen); // two micro-batches of two sequences
        QCOMPARE(double(split.deferredAfterB), perToken * tokens);
        QCOMPARE(split.deferredAtEnd, std::size_t(0));
        QVERIFY(split.secondWRefused);
        for (std::int64_t layer = 0; layer < spec.layers; ++layer) { // each block once per micro-batch
            QCOMPARE(whole.blocksDone.at(layer), 2);
            QCOMPARE(split.blocksDone.at(layer), 2);
        }
    }

    void weightBeforeInputRefused()
    {
        CpuKernels kernels;
        GptStage stage({ .model = modelNamed("gpt2"), .chunks = { { { 0, 3 }, true, true } } }, kernels);
        stage.setSplitBackward(true);
        QVERIFY_THROWS_EXCEPTION(std::logic_error, stage.weightBackward(0, 0));
    }
};

QTEST_MAIN(TestSplitBackward)
#include "tst_splitbackward.moc"
