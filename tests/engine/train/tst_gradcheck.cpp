// Every parameter tensor's gradient against central finite differences of the loss (one process, tp=1), for
// GPT-2's block, the Llama block (RMSNorm, SwiGLU, rotary positions, grouped-query attention, untied head, no
// biases) and a mixed form (LayerNorm and GELU with rotary positions, grouped KV heads and biases).
#include "engine/train/CpuKernels.h"
#include "engine/train/GptStage.h"

#include <QRegularExpression>
#include <QTest>

#include "GradCheckModel.h"

#include <cmath>
#include <random>

using namespace loom;
using namespace loom::train;

namespace {

plan::ModelSpec smallModel()
{
    return test::smallGradCheckModel();
}

// llama-tiny's form at gradient-check size: 4 query heads of 4 share 2 KV heads.
plan::ModelSpec llamaModel()
{
    plan::ModelSpec m = smallModel();
    m.name = "check-llama";
    m.heads = 4;
    m.kvHeads = 2;
    m.ffnHidden = 24;
    m.mlp = plan::ModelSpec::Mlp::SwiGlu;
    m.norm = plan::ModelSpec::Norm::RmsNorm;
    m.position = plan::ModelSpec::Position::Rope;
    m.bias = false;
    m.tieEmbeddings = false;
    return m;
}

// Each profile field on its own: GPT-2's norm and MLP with rotary positions and grouped KV heads.
plan::ModelSpec mixedModel()
{
    plan::ModelSpec m = smallModel();
    m.name = "check-mixed";
    m.heads = 4;
    m.kvHeads = 1;
    m.position = plan::ModelSpec::Position::Rope;
    return m;
}

plan::ModelSpec modelNamed(const QString& name)
{
    return name == "llama" ? llamaModel() : name == "mixed" ? mixedModel() : smallModel();
}

} // namespace

class TestGradCheck : public QObject {
    Q_OBJECT
private slots:
    void everyTensor_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<bool>("recompute");
        QTest::addColumn<bool>("efficientNorm"); // memory.efficient_norm: norms recovered from their outputs
        QTest::addColumn<QStringList>("tensors"); // kinds that must be among the checked tensors
        const QStringList gpt2 { "ln1.g", "ln1.b", "qkv.w", "qkv.b", "proj.w", "proj.b", "fc.w", "fcproj.w", "lnf.b",
            "wte", "wpe" };
        const QStringList llama { "ln1.g", "ln2.g", "q.w", "k.w", "v.w", "proj.w", "gate.w", "up.w", "down.w", "lnf.g",
            "lm_head", "wte" };
        QTest::newRow("gpt-2, stored activations") << "gpt2" << false << false << gpt2;
        QTest::newRow("gpt-2, full recompute") << "gpt2" << true << false << gpt2;
        QTest::newRow("gpt-2, memory-efficient norms") << "gpt2" << false << true << gpt2;
        QTest::newRow("llama, stored activations") << "llama" << false << false << llama;
        QTest::newRow("llama, full recompute") << "llama" << true << false << llama;
        QTest::newRow("llama, memory-efficient norms") << "llama" << false << true << llama;
        QTest::newRow("llama, memory-efficient norms, full recompute") << "llama" << true << true << llama;
        QTest::newRow("layernorm, gelu, rope, 1 kv head, biases")
            << "mixed" << false << false
            << QStringList { "ln1.b", "q.b", "k.w", "k.b", "v.b", "proj.b", "fc.b", "fcproj.b" };
    }
    void everyTensor()
    {
        QFETCH(QString, model);
        QFETCH(bool, recompute);
        QFETCH(bool, efficientNorm);
        QFETCH(QStringList, tensors);
        const plan::ModelSpec spec = modelNamed(model);
        runCheck(spec, recompute, efficientNorm, tensors);
    }

    // Memory-efficient norms give the gradients of the stored inputs (to float rounding), and a gain with a
    // zero entry, which cannot be inverted, is named instead of turning the gradients into NaN.
    void efficientNormMatchesStoredInputs_data()
    {
        QTest::addColumn<QString>("model");
        QTest::newRow("gpt-2 (LayerNorm)") << "gpt2";
        QTest::newRow("llama (RMSNorm)") << "llama";
    }
    void efficientNormMatchesStoredInputs()
    {
        QFETCH(QString, model);
        const plan::ModelSpec spec = modelNamed(model);
        const std::vector<float> stored = gradients(spec, false), efficient = gradients(spec, true);
        double largest = 0, worst = 0;
        for (std::size_t i = 0; i < stored.size(); ++i) {
            largest = std::max(largest, double(std::fabs(stored[i])));
            worst = std::max(worst, double(std::fabs(stored[i] - efficient[i])));
        }
        QVERIFY(largest > 0.1);
        // What the forward keeps: two norm inputs of B·s rows of h per block, and the head's input, fewer.
        const std::size_t rows = 2 * static_cast<std::size_t>(spec.seqLen), h = static_cast<std::size_t>(spec.hidden);
        QCOMPARE(held(spec, false) - held(spec, true), (2 * static_cast<std::size_t>(spec.layers) + 1) * rows * h);
        QVERIFY2(worst <= 1e-5 * largest, qPrintable(QString("largest difference %1 of %2").arg(worst).arg(largest)));
        try {
            gradients(spec, true, "h1.ln2.g");
            QFAIL("a zero norm gain was inverted");
        } catch (const std::runtime_error& e) {
            QVERIFY2(
                QString(e.what()).contains("memory.efficient_norm") && QString(e.what()).contains("ln2.g"), e.what());
        }
    }

    // Rotary positions make a query-key product depend only on the distance between the two positions, and
    // the backward is the forward's inverse (a rotation's transpose).
    void ropeIsRelative()
    {
        CpuKernels kernels;
        const int heads = 2, d = 8;
        std::mt19937 rng(5);
        std::normal_distribution<float> normal;
        std::vector<float> q(heads * d), k(heads * d);
        std::vector<double> freq(d / 2);
        for (int i = 0; i < d / 2; ++i)
            freq[static_cast<std::size_t>(i)] = std::pow(10000.0, -2.0 * i / d);
        for (auto& v : q)
            v = normal(rng);
        for (auto& v : k)
            v = normal(rng);
        auto dotAt = [&](std::int32_t pq, std::int32_t pk) {
            std::vector<float> a = q, b = k;
            kernels.ropeForward(a.data(), &pq, 1, heads, d, freq.data());
            kernels.ropeForward(b.data(), &pk, 1, heads, d, freq.data());
            double dot = 0;
            for (int i = 0; i < d; ++i) // head 0
                dot += double(a[static_cast<std::size_t>(i)]) * b[static_cast<std::size_t>(i)];
            return dot;
        };
        QVERIFY(std::fabs(dotAt(7, 3) - dotAt(104, 100)) < 1e-4);
        QVERIFY(std::fabs(dotAt(7, 3) - dotAt(7, 5)) > 1e-3); // and it does depend on the distance
        std::vector<float> x = q;
        const std::int32_t pos = 1000;
        kernels.ropeForward(x.data(), &pos, 1, heads, d, freq.data());
        kernels.ropeBackward(x.data(), &pos, 1, heads, d, freq.data());
        for (std::size_t i = 0; i < x.size(); ++i)
            QVERIFY(std::fabs(x[i] - q[i]) < 1e-5);
    }

private:
    // One forward and backward's gradients; `zeroGain` names a norm gain whose entry 3 is set to 0.
    static std::vector<float> gradients(
        const plan::ModelSpec& model, bool efficientNorm, const std::string& zeroGain = {})
    {
        CpuKernels kernels;
        GptStage stage({ .model = model, .chunks = { { { 0, 1 }, true, true } } }, kernels);
        stage.setEfficientNorm(efficientNorm);
        ParamSet& params = stage.params();
        test::initialiseForGradCheck(params, 7);
        if (!zeroGain.empty())
            params.value(params.find(zeroGain))[3] = 0.0f;
        const auto [tokens, targets] = test::randomBatch(model, 2 * static_cast<int>(model.seqLen), 3);
        params.zeroGrads();
        stage.forward(0, 0, 2, tokens.data(), targets.data(), nullptr, nullptr);
        stage.backward(0, 0, nullptr, nullptr, 1.0f);
        return std::vector<float>(params.grads.begin(), params.grads.end());
    }

    // Floats the forward of one micro-batch of 2 sequences keeps for its backward.
    static std::size_t held(const plan::ModelSpec& model, bool efficientNorm)
    {
        CpuKernels kernels;
        GptStage stage({ .model = model, .chunks = { { { 0, 1 }, true, true } } }, kernels);
        stage.setEfficientNorm(efficientNorm);
        test::initialiseForGradCheck(stage.params(), 7);
        const auto [tokens, targets] = test::randomBatch(model, 2 * static_cast<int>(model.seqLen), 3);
        stage.forward(0, 0, 2, tokens.data(), targets.data(), nullptr, nullptr);
        return stage.cachedFloats();
    }

    void runCheck(const plan::ModelSpec& model, bool recompute, bool efficientNorm, const QStringList& tensors)
    {
        CpuKernels kernels;
        GptStage stage({ .model = model, .chunks = { { { 0, 1 }, true, true } }, .fullRecompute = recompute }, kernels);
        stage.setEfficientNorm(efficientNorm);
        ParamSet& params = stage.params();
        test::initialiseForGradCheck(params, 7);
        const int B = 2;
        const auto [tokens, targets] = test::randomBatch(model, B * static_cast<int>(model.seqLen), 3);
        std::mt19937 rng(4); // the elements checked
        auto loss = [&] { return stage.forward(0, 0, B, tokens.data(), targets.data(), nullptr, nullptr); };

        params.zeroGrads();
        loss();
        stage.backward(0, 0, nullptr, nullptr, 1.0f);
        const std::vector<float> analytic(params.grads.begin(), params.grads.end());

        int checked = 0;
        double maxRelative = 0; // over gradients above 1e-2, where a relative error means something
        QStringList seen;
        for (const auto& s : params.specs()) {
            seen << QString::fromStdString(s.name);
            std::vector<std::size_t> picks;
            for (std::size_t k = 0; k < std::min<std::size_t>(s.size(), 10); ++k)
                picks.push_back(s.offset + rng() % s.size());
            if (s.name == "wte" || s.name == "lm_head") // a padding row: never a token, its logit masked: 0
                picks.push_back(s.offset + 21 * static_cast<std::size_t>(model.hidden));
            for (std::size_t i : picks) {
                const float keep = params.values[i];
                const float eps = 5e-3f;
                params.values[i] = keep + eps;
                const double up = loss();
                params.values[i] = keep - eps;
                const double down = loss();
                params.values[i] = keep;
                const double numeric = (up - down) / (2.0 * eps);
                const double a = analytic[i];
                if (std::fabs(numeric) > 1e-2)
                    maxRelative = std::max(maxRelative, std::fabs(a - numeric) / std::fabs(numeric));
                if (!(std::fabs(a - numeric) <= 1e-3 + 2e-2 * std::fabs(numeric)))
                    QFAIL(qPrintable(QStringLiteral("%1[%2]: backward %3, finite difference %4")
                                         .arg(QString::fromStdString(s.name))
                                         .arg(i - s.offset)
                                         .arg(a)
                                         .arg(numeric)));
                ++checked;
            }
        }
        QVERIFY(checked > 200);
        QCOMPARE(analytic[params.spec(params.find("wte")).offset + 21 * static_cast<std::size_t>(model.hidden)], 0.0f);
        for (const QString& kind : tensors)
            if (!seen.filter(QRegularExpression("(^|\\.)" + QRegularExpression::escape(kind) + "$")).size())
                QFAIL(qPrintable("no tensor of kind " + kind + " among " + seen.join(", ")));
        if (!model.tieEmbeddings)
            QVERIFY2(seen.contains("lm_head") && !seen.contains("wpe"), qPrintable(seen.join(", ")));
        qInfo("%s: %d gradients checked, largest relative error %.2e (over gradients above 1e-2)", model.name.c_str(),
            checked, maxRelative);
    }

private slots:
    void initialisationIgnoresTheLayout()
    {
        // The same element of a tensor gets the same value whichever TP rank holds it.
        const plan::ModelSpec model = smallModel();
        CpuKernels kernels;
        GptStage whole({ .model = model, .chunks = { { { 0, 1 }, true, true } } }, kernels);
        GptStage half({ .model = model, .chunks = { { { 0, 1 }, true, true } }, .tensor = { nullptr, 1, 2 } }, kernels);
        whole.params().initialise(42);
        half.params().initialise(42);
        for (const auto* name : { "h1.qkv.w", "h0.fc.w", "h1.fcproj.w", "wte" }) {
            const int iw = whole.params().find(name), ih = half.params().find(name);
            const auto& sh = half.params().spec(ih);
            for (std::int64_t r = 0; r < sh.localRows; ++r)
                for (std::int64_t c = 0; c < sh.localCols; ++c) {
                    const auto [gr, gc] = half.params().globalPosition(ih, r, c);
                    const float a = half.params().value(ih)[r * sh.localCols + c];
                    const float b = whole.params().value(iw)[gr * whole.params().spec(iw).localCols + gc];
                    if (a != b)
                        QFAIL(name);
                }
        }
        GptStage llamaWhole({ .model = llamaModel(), .chunks = { { { 0, 1 }, true, true } } }, kernels);
        GptStage llamaHalf(
            { .model = llamaModel(), .chunks = { { { 0, 1 }, true, true } }, .tensor = { nullptr, 1, 2 } }, kernels);
        llamaWhole.params().initialise(42);
        llamaHalf.params().initialise(42);
        for (const auto* name : { "h1.k.w", "h0.gate.w", "h1.down.w", "lm_head" }) {
            const int iw = llamaWhole.params().find(name), ih = llamaHalf.params().find(name);
            QVERIFY2(iw >= 0 && ih >= 0, name);
            const auto& sh = llamaHalf.params().spec(ih);
            for (std::int64_t r = 0; r < sh.localRows; ++r)
                for (std::int64_t c = 0; c < sh.localCols; ++c) {
                    const auto [gr, gc] = llamaHalf.params().globalPosition(ih, r, c);
                    if (llamaHalf.params().value(ih)[r * sh.localCols + c]
                        != llamaWhole.params().value(iw)[gr * llamaWhole.params().spec(iw).localCols + gc])
                        QFAIL(name);
                }
        }
    }

    // A model that does not split over tp, or whose rotary head size is odd, is refused with a message.
    void refusesWhatCannotSplit()
    {
        CpuKernels kernels;
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
            GptStage({ .model = llamaModel(), .chunks = { { { 0, 1 }, true, true } }, .tensor = { nullptr, 0, 4 } },
                kernels)); // 2 KV heads
        plan::ModelSpec odd = llamaModel();
        odd.hidden = 12; // head size 3
        QVERIFY_THROWS_EXCEPTION(
            std::invalid_argument, GptStage({ .model = odd, .chunks = { { { 0, 1 }, true, true } } }, kernels));
    }
};

QTEST_GUILESS_MAIN(TestGradCheck)
#include "tst_gradcheck.moc"
