// Every parameter tensor's gradient against central finite differences of the loss (one process, tp=1).
#include "engine/train/CpuKernels.h"
#include "engine/train/GptStage.h"

#include <QTest>

#include <cmath>
#include <random>

using namespace loom;
using namespace loom::train;

namespace {

plan::ModelSpec smallModel()
{
    plan::ModelSpec m;
    m.name = "check";
    m.layers = 2;
    m.hidden = 16;
    m.heads = 2;
    m.ffnHidden = 32;
    m.vocab = 20;
    m.vocabPadMultiple = 8; // padded to 24: the padding must not change the loss
    m.seqLen = 6;
    return m;
}

} // namespace

class TestGradCheck : public QObject {
    Q_OBJECT
private slots:
    void everyTensor_data()
    {
        QTest::addColumn<bool>("recompute");
        QTest::newRow("stored activations") << false;
        QTest::newRow("full recompute") << true;
    }
    void everyTensor()
    {
        QFETCH(bool, recompute);
        const plan::ModelSpec model = smallModel();
        CpuKernels kernels;
        GptStage stage(model, { { { 0, 1 }, true, true } }, 0, 1, nullptr, kernels, recompute);
        ParamSet& params = stage.params();
        params.initialise(7);
        // Larger weights than GPT-2's 0.02 so every path carries a visible gradient.
        for (auto& v : params.values)
            v *= 10.0f;
        for (const auto& s : params.specs())
            if (s.name.find(".g") != std::string::npos) // norm gains back near 1
                for (std::size_t k = 0; k < s.size(); ++k)
                    params.values[s.offset + k] = 1.0f + 0.1f * params.values[s.offset + k];
        const int B = 2, T = B * static_cast<int>(model.seqLen);
        std::vector<std::int32_t> tokens(static_cast<std::size_t>(T)), targets(tokens.size());
        std::mt19937 rng(3);
        for (int t = 0; t < T; ++t) {
            tokens[static_cast<std::size_t>(t)] = static_cast<std::int32_t>(rng() % model.vocab);
            targets[static_cast<std::size_t>(t)] = static_cast<std::int32_t>(rng() % model.vocab);
        }
        auto loss = [&] { return stage.forward(0, 0, B, tokens.data(), targets.data(), nullptr, nullptr); };

        params.zeroGrads();
        loss();
        stage.backward(0, 0, nullptr, nullptr, 1.0f);
        const std::vector<float> analytic = params.grads;

        int checked = 0;
        for (const auto& s : params.specs()) {
            std::vector<std::size_t> picks;
            for (std::size_t k = 0; k < std::min<std::size_t>(s.size(), 10); ++k)
                picks.push_back(s.offset + rng() % s.size());
            if (s.name == "wte") // a padding row: its logit is masked, so its gradient is exactly 0
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
    }

    void initialisationIgnoresTheLayout()
    {
        // The same element of a tensor gets the same value whichever TP rank holds it.
        const plan::ModelSpec model = smallModel();
        CpuKernels kernels;
        GptStage whole(model, { { { 0, 1 }, true, true } }, 0, 1, nullptr, kernels, false);
        GptStage half(model, { { { 0, 1 }, true, true } }, 1, 2, nullptr, kernels, false);
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
    }
};

QTEST_GUILESS_MAIN(TestGradCheck)
#include "tst_gradcheck.moc"
