// AdamW and the gradient norm: the vectorised, threaded float pass against a plain double loop; the same
// bits for any thread count; ZeRO-1 shards (one range, or pieces of every bucket) that add up to the whole
// update; threads per rank.
#include "engine/plan/EngineSupport.h"
#include "engine/plan/LayoutParser.h"
#include "engine/profiles/BuiltinProfiles.h"
#include "engine/train/Optimizer.h"
#include "engine/train/Threads.h"

#include <QTest>

#include <algorithm>
#include <cmath>
#include <random>
#include <thread>

using namespace loom;
using namespace loom::train;

namespace {

struct Problem {
    std::vector<float> params, grads;
    std::vector<std::uint8_t> mask;
};

Problem problem(std::size_t n, std::uint64_t seed)
{
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    Problem p;
    for (std::size_t i = 0; i < n; ++i) {
        p.params.push_back(0.02f * normal(rng));
        p.grads.push_back(normal(rng));
        p.mask.push_back(std::uint8_t(i % 3 != 0));
    }
    return p;
}

// The textbook update in double, for comparison.
void plainAdamW(std::vector<double>& w, std::vector<double>& m, std::vector<double>& v, const Problem& p, int t,
    double lr, double scale)
{
    const double c1 = 1 - std::pow(0.9, t), c2 = 1 - std::pow(0.95, t);
    for (std::size_t i = 0; i < w.size(); ++i) {
        const double g = double(p.grads[i]) * scale;
        m[i] = 0.9 * m[i] + 0.1 * g;
        v[i] = 0.95 * v[i] + 0.05 * g * g;
        if (p.mask[i])
            w[i] -= lr * 0.1 * w[i];
        w[i] -= lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + 1e-8);
    }
}

} // namespace

class TstOptimizer : public QObject {
    Q_OBJECT
private slots:
    void cleanup() { setComputeThreads(1); }

    void matchesThePlainUpdate_data()
    {
        QTest::addColumn<int>("threads");
        QTest::addColumn<int>("n");
        QTest::newRow("1 thread") << 1 << 300001;
        QTest::newRow("2 threads") << 2 << 300001;
        QTest::newRow("3 threads, small tensor") << 3 << 1000;
        QTest::newRow("4 threads") << 4 << (1 << 20);
    }
    void matchesThePlainUpdate()
    {
        QFETCH(int, threads);
        QFETCH(int, n);
        setComputeThreads(threads);
        Problem p = problem(std::size_t(n), 7);
        std::vector<double> w(p.params.begin(), p.params.end()), m(w.size()), v(w.size());
        AdamW adam(0, p.params.size());
        for (int t = 1; t <= 3; ++t) {
            adam.step(p.params.data(), p.grads.data(), p.mask, 1e-3, 0.5f);
            plainAdamW(w, m, v, p, t, 1e-3, 0.5);
        }
        double worst = 0;
        for (std::size_t i = 0; i < w.size(); ++i)
            worst = std::max(worst, std::fabs(double(p.params[i]) - w[i]));
        QVERIFY2(worst < 1e-6, qPrintable(QString::number(worst))); // three steps of lr 1e-3: float rounding only
        QCOMPARE(adam.steps(), std::int64_t(3));
    }

    void sameBitsForAnyThreadCount()
    {
        const Problem start = problem(500000, 3);
        std::vector<float> first;
        for (int threads : { 1, 2, 3, 8 }) {
            setComputeThreads(threads);
            Problem p = start;
            AdamW adam(0, p.params.size());
            adam.step(p.params.data(), p.grads.data(), p.mask, 1e-3, 1.0f);
            adam.step(p.params.data(), p.grads.data(), p.mask, 1e-3, 0.25f);
            if (first.empty())
                first = p.params;
            else
                QVERIFY(p.params == first);
        }
    }

    void zeroShardsMakeTheWhole()
    {
        setComputeThreads(2);
        const Problem start = problem(200003, 11);
        Problem whole = start, sharded = start;
        AdamW all(0, whole.params.size());
        all.step(whole.params.data(), whole.grads.data(), whole.mask, 1e-3, 1.0f);
        const std::size_t n = start.params.size(), shard = (n + 2) / 3;
        for (std::size_t r = 0; r < 3; ++r) {
            AdamW mine(std::min(n, r * shard), std::min(n, (r + 1) * shard));
            mine.step(sharded.params.data(), sharded.grads.data(), sharded.mask, 1e-3, 1.0f);
            QCOMPARE(mine.firstMoment().size(), mine.end() - mine.begin());
        }
        QVERIFY(sharded.params == whole.params);
    }

    // ZeRO-1 over bucket pieces: member r of 3 owns piece r of each of four uneven "buckets"; the members'
    // ranges together give the whole update bit for bit, with the moments of each member's pieces in order.
    void bucketPiecesMakeTheWhole()
    {
        setComputeThreads(2);
        const Problem start = problem(200003, 11);
        Problem whole = start, sharded = start;
        AdamW all(0, whole.params.size());
        for (int step = 0; step < 2; ++step)
            all.step(whole.params.data(), whole.grads.data(), whole.mask, 1e-3, 0.5f);
        const std::size_t n = start.params.size();
        const std::vector<std::size_t> bounds { 0, 7, 50001, 150000, n };
        for (std::size_t r = 0; r < 3; ++r) {
            AdamW::Ranges pieces;
            for (std::size_t b = 0; b + 1 < bounds.size(); ++b) {
                const std::size_t piece = (bounds[b + 1] - bounds[b] + 2) / 3;
                const std::size_t from = std::min(bounds[b + 1], bounds[b] + r * piece);
                const std::size_t to = std::min(bounds[b + 1], from + piece);
                if (from < to)
                    pieces.emplace_back(from, to);
            }
            AdamW mine(pieces);
            for (int step = 0; step < 2; ++step)
                mine.step(sharded.params.data(), sharded.grads.data(), sharded.mask, 1e-3, 0.5f);
            std::size_t held = 0;
            for (const auto& [from, to] : mine.ranges())
                held += to - from;
            QCOMPARE(mine.firstMoment().size(), held);
        }
        QVERIFY(sharded.params == whole.params);
    }

    void sumOfSquaresIsExact()
    {
        const Problem p = problem(1000003, 5);
        double plain = 0;
        for (float g : p.grads)
            plain += double(g) * double(g);
        for (int threads : { 1, 2, 5 }) {
            const double s = sumOfSquares(p.grads.data(), p.grads.size(), threads);
            QVERIFY2(std::fabs(s - plain) <= 1e-12 * plain, qPrintable(QString::number(s - plain)));
            QCOMPARE(sumOfSquares(p.grads.data(), p.grads.size(), threads), s); // reproducible
        }
        QCOMPARE(sumOfSquares(p.grads.data(), 0, 2), 0.0);
        QCOMPARE(sumOfSquares(p.grads.data(), 3, 2),
            double(p.grads[0]) * p.grads[0] + double(p.grads[1]) * p.grads[1] + double(p.grads[2]) * p.grads[2]);
    }

    void parallelForCoversEachIndexOnce()
    {
        for (std::size_t n : { std::size_t(0), std::size_t(1), std::size_t(65535), std::size_t(65536 * 3 + 7) })
            for (int threads : { 1, 2, 3, 16 }) {
                std::vector<int> hits(n, 0);
                parallelFor(n, threads, [&](std::size_t, std::size_t b, std::size_t e) {
                    for (std::size_t i = b; i < e; ++i)
                        ++hits[i];
                });
                QVERIFY(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; }));
            }
    }

    void threadsPerRank_data()
    {
        QTest::addColumn<int>("cores");
        QTest::addColumn<int>("ranks");
        QTest::addColumn<int>("requested");
        QTest::addColumn<int>("expected");
        QTest::newRow("one rank takes the node") << 2 << 1 << 0 << 2;
        QTest::newRow("dp 2 on 2 cores") << 2 << 2 << 0 << 1;
        QTest::newRow("8 ranks on 2 cores: still one") << 2 << 8 << 0 << 1;
        QTest::newRow("4 ranks on 16 cores") << 16 << 4 << 0 << 4;
        QTest::newRow("uneven: rounded down") << 16 << 3 << 0 << 5;
        QTest::newRow("the user's count wins") << 16 << 4 << 2 << 2;
    }
    void threadsPerRank()
    {
        QFETCH(int, cores);
        QFETCH(int, ranks);
        QFETCH(int, requested);
        QFETCH(int, expected);
        QCOMPARE(loom::train::threadsPerRank(cores, ranks, requested), expected);
    }

    void bindingIsReported()
    {
        // The count never exceeds the cores this process may use; the note says how to get more.
        qunsetenv("LOOM_THREADS");
        qunsetenv("OPENBLAS_NUM_THREADS");
        std::string note;
        const int threads = configureComputeThreads(1, note);
        QVERIFY(threads >= 1 && threads <= availableCores());
        QCOMPARE(computeThreads(), threads);
        if (availableCores() < int(std::thread::hardware_concurrency()))
            QVERIFY2(note.find("--bind-to none") != std::string::npos, note.c_str());
        qputenv("LOOM_THREADS", "3");
        QCOMPARE(configureComputeThreads(1, note), 3);
        QVERIFY(note.empty());
        qunsetenv("LOOM_THREADS");
    }

    // The layout's optimizer section: the default schedule is the one before it existed (warm-up, cosine to
    // a tenth at the last step), and each decay style ends at the minimum at lr_decay_iters.
    void schedules()
    {
        const plan::OptimizerSpec defaults;
        const auto s = plan::lrSchedule(defaults, 1e-3, 10, 100);
        const LearningRate before { 1e-3, 1e-4, 10, 100 };
        for (std::int64_t step : { 0, 5, 9, 10, 37, 99, 150 })
            QCOMPARE(s.at(step), before.at(step));
        plan::OptimizerSpec o;
        o.lr = 2.0;
        o.minLrFraction = 0.25;
        o.lrWarmupIters = 2;
        o.lrDecayIters = 10;
        for (auto style : { plan::OptimizerSpec::DecayStyle::Linear, plan::OptimizerSpec::DecayStyle::Cosine,
                 plan::OptimizerSpec::DecayStyle::Wsd }) {
            o.lrDecayStyle = style;
            const auto t = plan::lrSchedule(o, 1e-3, 10, 100);
            QCOMPARE(t.at(0), 1.0); // (0+1)/2 of the peak
            QCOMPARE(t.at(10), 0.5);
            QCOMPARE(t.at(20), 0.5);
        }
        o.lrDecayStyle = plan::OptimizerSpec::DecayStyle::Linear;
        QCOMPARE(plan::lrSchedule(o, 1e-3, 10, 100).at(6), 0.5 + 1.5 * 0.5); // halfway from step 2 to 10
        o.lrDecayStyle = plan::OptimizerSpec::DecayStyle::Wsd;
        o.lrWsdDecayIters = 4;
        const auto w = plan::lrSchedule(o, 1e-3, 10, 100);
        QCOMPARE(w.at(5), 2.0); // stable until step 6
        QCOMPARE(w.at(8), 0.5 + 1.5 * 0.5); // linear over steps 6 to 10
        o.lrDecayStyle = plan::OptimizerSpec::DecayStyle::Constant;
        QCOMPARE(plan::lrSchedule(o, 1e-3, 10, 100).at(50), 2.0);
    }

    void decayGroups()
    {
        using G = plan::OptimizerSpec::DecayGroup;
        QCOMPARE(decayGroupOf("wte"), G::Embedding);
        QCOMPARE(decayGroupOf("wpe"), G::Embedding);
        QCOMPARE(decayGroupOf("lm_head"), G::LmHead);
        QCOMPARE(decayGroupOf("h3.router.w"), G::Router);
        QCOMPARE(decayGroupOf("h0.ln1.g"), G::Norm);
        QCOMPARE(decayGroupOf("h0.ln2.b"), G::Norm);
        QCOMPARE(decayGroupOf("lnf.b"), G::Norm);
        QCOMPARE(decayGroupOf("h1.qkv.b"), G::Bias);
        QCOMPARE(decayGroupOf("h1.expert2.down.w"), G::Matrices);
        QCOMPARE(decayGroupOf("h1.shared.gate.w"), G::Matrices);
    }

    // The section in a layout file: read, written back the same, mistakes named, bf16 states refused by
    // loom-train only.
    void optimizerSection_data()
    {
        QTest::addColumn<QString>("section");
        QTest::addColumn<QString>("error");
        QTest::newRow("ok") << R"("optimizer": {"adam_beta2": 0.99, "adam_eps": 1e-5, "weight_decay_on": ["matrices"],
            "clip_grad": 0, "lr": 0.01, "min_lr": 0.001, "lr_decay_style": "WSD", "lr_wsd_decay_iters": 5,
            "lr_wsd_decay_style": "cosine"}, "init": {"method": "normal", "std": 0.01})"
                            << "";
        QTest::newRow("group") << R"("optimizer": {"weight_decay_on": ["everything"]})"
                               << "optimizer.weight_decay_on";
        QTest::newRow("both minima") << R"("optimizer": {"min_lr": 0.1, "min_lr_fraction": 0.1})"
                                     << "optimizer.min_lr_fraction";
        QTest::newRow("wsd field") << R"("optimizer": {"lr_wsd_decay_iters": 3})"
                                   << "optimizer.lr_wsd_decay_iters";
        QTest::newRow("style") << R"("optimizer": {"lr_decay_style": "inverse-square-root"})"
                               << "optimizer.lr_decay_style";
        QTest::newRow("eps") << R"("optimizer": {"adam_eps": 0})"
                             << "optimizer.adam_eps";
        QTest::newRow("init") << R"("init": {"method": "xavier"})"
                              << "init.method";
    }
    void optimizerSection()
    {
        QFETCH(QString, section);
        QFETCH(QString, error);
        const std::string text = R"({"loom_layout": 1, "name": "o", "model": "gpt-tiny", "cluster": "local",
            "parallel": {"tp": 1, "pp": 1, "dp": 1, "micro_batch": 1, "global_batch": 1}, )"
            + section.toStdString() + "}";
        const auto& profiles = profiles::BuiltinProfiles::instance();
        const auto r = plan::readLayout(text, profiles);
        if (!error.isEmpty()) {
            QVERIFY(r.diagnostics.hasErrors());
            QVERIFY2(
                r.diagnostics.format().find(error.toStdString()) != std::string::npos, r.diagnostics.format().c_str());
            return;
        }
        QVERIFY2(r.layout && !r.diagnostics.hasErrors(), r.diagnostics.format().c_str());
        const auto& o = r.layout->optimizer;
        QCOMPARE(o.adamBeta2, 0.99);
        QCOMPARE(o.clipGrad, 0.0);
        QVERIFY(o.weightDecayOn
            == std::vector<plan::OptimizerSpec::DecayGroup> { plan::OptimizerSpec::DecayGroup::Matrices });
        QCOMPARE(r.layout->init.std, 0.01);
        const auto again = plan::readLayout(plan::writeLayout(*r.layout), profiles);
        QVERIFY(again.layout && again.layout->optimizer == o && again.layout->init == r.layout->init);
        plan::Layout bf16 = *r.layout;
        bf16.optimizer.expAvgSqDtype = plan::OptimizerSpec::StateDtype::Bf16;
        const plan::EngineSupport support = plan::engineSupport(bf16);
        QVERIFY2(!support.trainable(), "bf16 moments accepted");
        QVERIFY(QString::fromStdString(support.reason()).contains("optimizer.exp_avg_sq_dtype"));
    }
};

QTEST_GUILESS_MAIN(TstOptimizer)
#include "tst_optimizer.moc"
