// The mixture-of-experts block (engine/train/MoeLayer) against central finite differences of the loss,
// the load-balancing loss included: router, experts and everything around them (one process, ep 1), and the
// routing rules a layout comparison relies on (ties to the lower expert index, aux = 1 when balanced).
#include "engine/train/CpuKernels.h"
#include "engine/train/GptStage.h"
#include "engine/train/MoeLayer.h"

#include <QTest>

#include "GradCheckModel.h"

#include <cmath>
#include <random>

using namespace loom;
using namespace loom::train;

namespace {

plan::ModelSpec moeModel()
{
    plan::ModelSpec m = test::smallGradCheckModel();
    m.name = "moe-check";
    m.experts = 4;
    m.topK = 2;
    m.moeFfnHidden = 24;
    m.moeLayerFreq = 2; // block 0 MoE, block 1 dense
    m.auxLossCoeff = 0.5; // large, so that its gradient shows
    return m;
}

// Mixtral's form: Llama blocks (RMSNorm, rotary positions at Llama 3's base with its 3.1 scaling, grouped KV
// heads, no biases) with SwiGLU experts, renormalised top-2 gates and a z-loss.
plan::ModelSpec mixtralForm()
{
    plan::ModelSpec m = moeModel();
    m.name = "mixtral-check";
    m.mlp = plan::ModelSpec::Mlp::SwiGlu;
    m.norm = plan::ModelSpec::Norm::RmsNorm;
    m.position = plan::ModelSpec::Position::Rope;
    m.bias = false;
    m.tieEmbeddings = false;
    m.kvHeads = 1;
    m.ropeTheta = 500000;
    m.ropeScaling = { 8, 1, 4, 4 }; // an original context of 4 positions, so that every branch is taken
    m.normEps = 1e-6;
    m.routerNormTopK = true;
    m.routerZLoss = 0.2;
    return m;
}

// DeepSeek-MoE's form: block 0 dense, then MoE with a shared SwiGLU expert beside the routed ones.
plan::ModelSpec deepseekForm()
{
    plan::ModelSpec m = mixtralForm();
    m.name = "deepseek-check";
    m.moeLayerFreq = 1;
    m.firstDenseLayers = 1;
    m.sharedExperts = 2;
    m.sharedExpertHidden = 8;
    m.routerNormTopK = false;
    return m;
}

} // namespace

class TestMoeGradCheck : public QObject {
    Q_OBJECT
private slots:
    void everyTensor_data()
    {
        QTest::addColumn<int>("form");
        QTest::newRow("gpt2 gelu experts") << 0;
        QTest::newRow("mixtral form") << 1;
        QTest::newRow("deepseek form") << 2;
    }
    void everyTensor()
    {
        QFETCH(int, form);
        const plan::ModelSpec model = form == 0 ? moeModel() : form == 1 ? mixtralForm() : deepseekForm();
        CpuKernels kernels;
        GptStage stage({ .model = model, .chunks = { { { 0, 1 }, true, true } } }, kernels);
        ParamSet& params = stage.params();
        test::initialiseForGradCheck(params, 11);
        const int B = 2, T = B * static_cast<int>(model.seqLen);
        const test::GradCheckBatch batch = test::randomBatch(model, T, 5);
        auto loss = [&] {
            const double ce = stage.forward(0, 0, B, batch.tokens.data(), batch.targets.data(), nullptr, nullptr);
            return ce + stage.takeAuxLoss();
        };
        params.zeroGrads();
        const double base = loss();
        stage.backward(0, 0, nullptr, nullptr, 1.0f);
        const std::vector<float> analytic(params.grads.begin(), params.grads.end());

        std::mt19937 rng(9);
        int checked = 0, skipped = 0, router = 0, experts = 0, shared = 0;
        double worst = 0;
        for (int p = 0; p < static_cast<int>(params.specs().size()); ++p) {
            const auto& s = params.spec(p);
            for (int n = 0; n < 10; ++n) {
                const std::size_t i = s.offset + rng() % s.size();
                const float keep = params.values[i];
                const float eps = 2e-3f;
                params.values[i] = keep + eps;
                const double up = loss();
                params.values[i] = keep - eps;
                const double down = loss();
                params.values[i] = keep;
                // A step that changes a token's top-k choice makes the loss jump: the one-sided slopes
                // disagree. Such picks say nothing about the gradient; skip them.
                const double right = (up - base) / eps, left = (base - down) / eps;
                if (std::fabs(right - left) > 0.05 + 0.1 * std::fabs(right + left)) {
                    ++skipped;
                    continue;
                }
                const double numeric = (up - down) / (2.0 * eps), a = analytic[i];
                worst = std::max(worst, std::fabs(a - numeric) / (1e-3 + std::fabs(numeric)));
                if (!(std::fabs(a - numeric) <= 1e-3 + 2e-2 * std::fabs(numeric)))
                    QFAIL(qPrintable(QStringLiteral("%1[%2]: backward %3, finite difference %4")
                                         .arg(QString::fromStdString(s.name))
                                         .arg(i - s.offset)
                                         .arg(a)
                                         .arg(numeric)));
                ++checked;
                router += s.name.find("router") != std::string::npos;
                experts += s.name.find("expert") != std::string::npos;
                shared += s.name.find("shared") != std::string::npos;
            }
        }
        qInfo("checked %d elements (%d router, %d expert), skipped %d at routing changes; worst error %.3g of "
              "(1e-3 + |numeric|)",
            checked, router, experts, skipped, worst);
        QVERIFY(checked > 200);
        QVERIFY(router >= 8);
        QVERIFY(experts >= 60);
        if (form == 2) {
            QVERIFY(shared >= 20);
            QCOMPARE(params.find("h0.router.w"), -1); // first_dense_layers 1
            QVERIFY(params.find("h0.gate.w") >= 0);
        }
    }

    // Renormalised top-k: each token's gates sum to one. With every expert a copy of expert 0 (output y),
    // the MoE output is (Σ chosen gates)·y: y itself when renormalised, and the unrenormalised output divided
    // by its gates' sum gives the same y.
    void renormalisedGatesSumToOne()
    {
        plan::ModelSpec model = mixtralForm();
        model.routerZLoss = 0;
        model.auxLossCoeff = 0;
        CpuKernels kernels;
        const int T = 5, h = static_cast<int>(model.hidden), k = 2;
        std::vector<float> x(static_cast<std::size_t>(T * h));
        std::mt19937 rng(2);
        std::normal_distribution<float> normal;
        for (auto& v : x)
            v = normal(rng);
        std::vector<std::vector<float>> outs, gates;
        for (bool norm : { true, false }) {
            model.routerNormTopK = norm;
            ParamSet params(0, 1);
            MoeLayer layer(model, "m.", params, 0, 1, nullptr, kernels);
            params.allocate();
            params.initialise(4);
            for (int e = 1; e < model.experts; ++e)
                for (const std::string t : { "gate.w", "up.w", "down.w" }) {
                    const auto& from = params.spec(params.find("m.expert0." + t));
                    const auto& to = params.spec(params.find("m.expert" + std::to_string(e) + "." + t));
                    std::copy(params.values.begin() + static_cast<std::ptrdiff_t>(from.offset),
                        params.values.begin() + static_cast<std::ptrdiff_t>(from.offset + from.size()),
                        params.values.begin() + static_cast<std::ptrdiff_t>(to.offset));
                }
            std::vector<float> out(x.size());
            MoeCache cache;
            layer.forward(cache, x.data(), T, out.data());
            outs.push_back(out);
            gates.push_back(cache.gate);
        }
        for (int t = 0; t < T; ++t) {
            const auto at = [&](int j) { return static_cast<std::size_t>(t * k + j); };
            QVERIFY(std::fabs(gates[0][at(0)] + gates[0][at(1)] - 1.0f) < 1e-6f);
            const float sum = gates[1][at(0)] + gates[1][at(1)];
            QVERIFY(sum < 1.0f - 1e-3f);
            for (int c = 0; c < h; ++c) {
                const auto i = static_cast<std::size_t>(t * h + c);
                QVERIFY(std::fabs(outs[1][i] / sum - outs[0][i]) < 1e-5f * (1 + std::fabs(outs[0][i])));
            }
        }
    }

    // The z-loss is the mean of (log Σ exp(logit))²: with a zero router every token has E equal logits 0,
    // so z = (log E)².
    void zLossOfZeroRouter()
    {
        plan::ModelSpec model = mixtralForm();
        model.auxLossCoeff = 0;
        model.routerZLoss = 1.0;
        CpuKernels kernels;
        ParamSet params(0, 1);
        MoeLayer layer(model, "m.", params, 0, 1, nullptr, kernels);
        params.allocate();
        params.initialise(4);
        const auto& r = params.spec(params.find("m.router.w"));
        std::fill(params.values.begin() + static_cast<std::ptrdiff_t>(r.offset),
            params.values.begin() + static_cast<std::ptrdiff_t>(r.offset + r.size()), 0.0f);
        const int T = 3;
        std::vector<float> x(static_cast<std::size_t>(T * model.hidden), 0.5f), out(x.size());
        MoeCache cache;
        const double z = layer.forward(cache, x.data(), T, out.data());
        QVERIFY(std::fabs(z - std::pow(std::log(4.0), 2)) < 1e-6);
    }

    void balancedRouterAndTies()
    {
        // A zero router gives every expert the same probability: top-2 takes experts 0 and 1 for every token
        // (ties go to the lower index), so f = [1/2, 1/2, 0, 0], P = [1/4] * 4 and aux = 4 · (1/8 + 1/8) = 1.
        plan::ModelSpec model = moeModel();
        model.auxLossCoeff = 1.0;
        CpuKernels kernels;
        GptStage stage({ .model = model, .chunks = { { { 0, 1 }, true, true } } }, kernels);
        ParamSet& params = stage.params();
        params.initialise(3);
        const auto& router = params.spec(params.find("h0.router.w"));
        std::fill(params.values.begin() + static_cast<std::ptrdiff_t>(router.offset),
            params.values.begin() + static_cast<std::ptrdiff_t>(router.offset + router.size()), 0.0f);
        const int B = 2, T = B * static_cast<int>(model.seqLen);
        const test::GradCheckBatch batch = test::randomBatch(model, T, 8);
        params.zeroGrads();
        stage.forward(0, 0, B, batch.tokens.data(), batch.targets.data(), nullptr, nullptr);
        QCOMPARE(stage.takeAuxLoss(), 1.0);
        stage.backward(0, 0, nullptr, nullptr, 1.0f);
        auto gradNorm = [&](const char* name) {
            const auto& s = params.spec(params.find(name));
            double sum = 0;
            for (std::size_t k = 0; k < s.size(); ++k)
                sum += std::fabs(params.grads[s.offset + k]);
            return sum;
        };
        QVERIFY(gradNorm("h0.expert0.fc.w") > 0);
        QVERIFY(gradNorm("h0.expert1.proj.w") > 0);
        QCOMPARE(gradNorm("h0.expert2.fc.w"), 0.0); // no token chose experts 2 and 3
        QCOMPARE(gradNorm("h0.expert3.proj.b"), 0.0);
        QCOMPARE(params.find("h1.router.w"), -1); // block 1 is dense (moe_layer_freq 2)
        QVERIFY(params.find("h1.fc.w") >= 0);
    }
};

QTEST_GUILESS_MAIN(TestMoeGradCheck)
#include "tst_moe_gradcheck.moc"
