// The CUDA kernels' arithmetic (engine/device/KernelMath.h) on the host against CpuKernels, the vocab
// softmax, AdamW and the bf16 conversion of the CPU engine, on random inputs. Each case composes the
// per-element functions the way the CUDA kernel does (its sums taken serially here) and must agree with
// the CPU result within 1e-5 relative (plus 1e-6 absolute near zero).
#include "engine/device/KernelMath.h"
#include "engine/train/CpuKernels.h"
#include "engine/train/Optimizer.h"
#include "engine/train/Safetensors.h"
#include "engine/train/VocabSoftmax.h"

#include <QTest>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

using namespace loom;
namespace km = loom::device::math;

namespace {

std::vector<float> randomVector(std::size_t n, std::uint64_t seed, float scale = 1.0f, float shift = 0.0f)
{
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v)
        x = shift + scale * normal(rng);
    return v;
}

// The largest |a − b| / (|b| + 1e-6·…) over the arrays, reported with the index.
QString compare(const std::vector<float>& got, const std::vector<float>& want, double tol)
{
    if (got.size() != want.size())
        return QString("size %1, expected %2").arg(got.size()).arg(want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double err = std::abs(double(got[i]) - double(want[i]));
        if (!(err <= tol * std::abs(double(want[i])) + 1e-6))
            return QString("element %1: %2, expected %3").arg(i).arg(got[i], 0, 'g', 9).arg(want[i], 0, 'g', 9);
    }
    return {};
}

#define LOOM_COMPARE(got, want)                                                                                        \
    do {                                                                                                               \
        const QString why = compare(got, want, 1e-5);                                                                  \
        QVERIFY2(why.isEmpty(), qPrintable(why));                                                                      \
    } while (0)

} // namespace

class TstKernelMath : public QObject {
    Q_OBJECT
private slots:
    void elementwise_data()
    {
        QTest::addColumn<float>("scale");
        QTest::newRow("unit") << 1.0f;
        QTest::newRow("wide") << 6.0f;
        QTest::newRow("narrow") << 0.01f;
    }
    void elementwise()
    {
        QFETCH(float, scale);
        const std::size_t n = 4099;
        const auto x = randomVector(n, 1, scale), up = randomVector(n, 2, scale), dy = randomVector(n, 3);
        train::CpuKernels cpu;
        std::vector<float> want(n), got(n), want2(n), got2(n);

        cpu.geluForward(want.data(), x.data(), n);
        for (std::size_t i = 0; i < n; ++i)
            got[i] = km::geluForward(x[i]);
        LOOM_COMPARE(got, want);
        cpu.geluBackward(want.data(), dy.data(), x.data(), n);
        for (std::size_t i = 0; i < n; ++i)
            got[i] = km::geluBackward(dy[i], x[i]);
        LOOM_COMPARE(got, want);

        cpu.swigluForward(want.data(), x.data(), up.data(), n);
        for (std::size_t i = 0; i < n; ++i)
            got[i] = km::swigluForward(x[i], up[i]);
        LOOM_COMPARE(got, want);
        cpu.swigluBackward(want.data(), want2.data(), dy.data(), x.data(), up.data(), n);
        for (std::size_t i = 0; i < n; ++i)
            km::swigluBackward(dy[i], x[i], up[i], got[i], got2[i]);
        LOOM_COMPARE(got, want);
        LOOM_COMPARE(got2, want2);
    }

    void layerNorm_data()
    {
        QTest::addColumn<int>("cols");
        QTest::addColumn<float>("shift");
        QTest::newRow("768 centred") << 768 << 0.0f;
        QTest::newRow("odd, far from zero") << 97 << 50.0f;
    }
    void layerNorm()
    {
        QFETCH(int, cols);
        QFETCH(float, shift);
        const int rows = 13;
        const std::size_t n = std::size_t(rows) * cols;
        const auto x = randomVector(n, 4, 1.0f, shift), dy = randomVector(n, 5);
        const auto gamma = randomVector(std::size_t(cols), 6, 0.2f, 1.0f), beta = randomVector(std::size_t(cols), 7);
        train::CpuKernels cpu;
        std::vector<float> want(n), mean(rows), rstd(rows), dxWant(n, 0.0f), dgWant(cols, 0.0f), dbWant(cols, 0.0f);
        cpu.layerNormForward(
            want.data(), mean.data(), rstd.data(), x.data(), gamma.data(), beta.data(), rows, cols, 1e-5f);
        cpu.layerNormBackward(dxWant.data(), dgWant.data(), dbWant.data(), dy.data(), x.data(), mean.data(),
            rstd.data(), gamma.data(), rows, cols);

        std::vector<float> got(n), gotMean(rows), gotRstd(rows), dx(n), dg(cols, 0.0f), db(cols, 0.0f);
        for (int r = 0; r < rows; ++r) {
            const float* xr = x.data() + std::size_t(r) * cols;
            double sum = 0, dev = 0;
            for (int c = 0; c < cols; ++c)
                sum += xr[c];
            const float m = float(sum / cols);
            for (int c = 0; c < cols; ++c)
                dev += (double(xr[c]) - sum / cols) * (double(xr[c]) - sum / cols);
            const float s = km::layerNormRstd(dev, cols, 1e-5f);
            gotMean[r] = m;
            gotRstd[r] = s;
            double sumDn = 0, sumDnX = 0;
            for (int c = 0; c < cols; ++c) {
                const std::size_t i = std::size_t(r) * cols + c;
                got[i] = km::layerNormOut(xr[c], m, s, gamma[c], beta[c]);
                const float xhat = (xr[c] - m) * s;
                sumDn += dy[i] * gamma[c];
                sumDnX += dy[i] * gamma[c] * xhat;
                dg[c] += dy[i] * xhat;
                db[c] += dy[i];
            }
            for (int c = 0; c < cols; ++c) {
                const std::size_t i = std::size_t(r) * cols + c;
                dx[i] = km::layerNormDx(dy[i], gamma[c], (xr[c] - m) * s, float(sumDn / cols), float(sumDnX / cols), s);
            }
        }
        LOOM_COMPARE(gotMean, mean);
        LOOM_COMPARE(gotRstd, rstd);
        LOOM_COMPARE(got, want);
        LOOM_COMPARE(dx, dxWant);
        LOOM_COMPARE(dg, dgWant);
        LOOM_COMPARE(db, dbWant);
    }

    void rmsNorm()
    {
        const int rows = 9, cols = 320;
        const std::size_t n = std::size_t(rows) * cols;
        const auto x = randomVector(n, 8), dy = randomVector(n, 9), gamma = randomVector(cols, 10, 0.2f, 1.0f);
        train::CpuKernels cpu;
        std::vector<float> want(n), rstd(rows), dxWant(n, 0.0f), dgWant(cols, 0.0f);
        cpu.rmsNormForward(want.data(), rstd.data(), x.data(), gamma.data(), rows, cols, 1e-6f);
        cpu.rmsNormBackward(dxWant.data(), dgWant.data(), dy.data(), x.data(), rstd.data(), gamma.data(), rows, cols);
        std::vector<float> got(n), gotRstd(rows), dx(n), dg(cols, 0.0f);
        for (int r = 0; r < rows; ++r) {
            const float* xr = x.data() + std::size_t(r) * cols;
            double sq = 0, sumDnX = 0;
            for (int c = 0; c < cols; ++c)
                sq += double(xr[c]) * xr[c];
            const float s = km::rmsNormRstd(sq, cols, 1e-6f);
            gotRstd[r] = s;
            for (int c = 0; c < cols; ++c) {
                const std::size_t i = std::size_t(r) * cols + c;
                got[i] = xr[c] * s * gamma[c];
                sumDnX += dy[i] * gamma[c] * xr[c] * s;
                dg[c] += dy[i] * xr[c] * s;
            }
            for (int c = 0; c < cols; ++c) {
                const std::size_t i = std::size_t(r) * cols + c;
                dx[i] = km::rmsNormDx(dy[i], gamma[c], xr[c], s, float(sumDnX / cols));
            }
        }
        LOOM_COMPARE(gotRstd, rstd);
        LOOM_COMPARE(got, want);
        LOOM_COMPARE(dx, dxWant);
        LOOM_COMPARE(dg, dgWant);
    }

    void rope()
    {
        const int rows = 7, heads = 3, d = 16;
        const std::size_t n = std::size_t(rows) * heads * d;
        const auto x = randomVector(n, 11);
        std::vector<std::int32_t> positions = { 0, 1, 2, 5, 100, 1023, 4000 };
        std::vector<double> freq(d / 2);
        for (int i = 0; i < d / 2; ++i)
            freq[std::size_t(i)] = std::pow(10000.0, -2.0 * i / d);
        train::CpuKernels cpu;
        for (double sign : { 1.0, -1.0 }) {
            auto want = x;
            if (sign > 0)
                cpu.ropeForward(want.data(), positions.data(), rows, heads, d, freq.data());
            else
                cpu.ropeBackward(want.data(), positions.data(), rows, heads, d, freq.data());
            auto got = x;
            for (int r = 0; r < rows; ++r)
                for (int h = 0; h < heads; ++h)
                    for (int i = 0; i < d / 2; ++i) {
                        // the device takes the angle's cosine and sine in double too (CudaKernels.cu)
                        const double angle = sign * positions[std::size_t(r)] * freq[std::size_t(i)];
                        float* p = got.data() + (std::size_t(r) * heads + h) * d + 2 * i;
                        km::ropeTurn(p[0], p[1], float(std::cos(angle)), float(std::sin(angle)));
                    }
            LOOM_COMPARE(got, want);
        }
    }

    // The fused causal softmax of the attention kernel: an online (max, sum) over each row's first i+1
    // scaled scores, then P = exp(S − max)/sum, against the probabilities CpuKernels keeps.
    void causalSoftmax()
    {
        const int B = 2, s = 33, H = 2, d = 8;
        const auto qkv = randomVector(std::size_t(B) * s * 3 * H * d, 12);
        train::CpuKernels cpu;
        std::vector<float> out(std::size_t(B) * s * H * d), probs(std::size_t(B) * H * s * s);
        cpu.attentionForward(out.data(), probs.data(), qkv.data(), B, s, H, d);
        std::vector<float> got(probs.size());
        const int width = 3 * H * d;
        const float scale = 1.0f / std::sqrt(float(d));
        for (int b = 0; b < B; ++b)
            for (int h = 0; h < H; ++h)
                for (int i = 0; i < s; ++i) {
                    std::vector<float> row(std::size_t(s), 0.0f);
                    for (int j = 0; j <= i; ++j) {
                        double dot = 0;
                        for (int k = 0; k < d; ++k)
                            dot += double(qkv[std::size_t(b * s + i) * width + h * d + k])
                                * qkv[std::size_t(b * s + j) * width + H * d + h * d + k];
                        row[std::size_t(j)] = float(dot) * scale;
                    }
                    km::MaxSum ms = km::maxSumEmpty();
                    for (int j = 0; j <= i; j += 2) { // two halves merged, as two warps' parts are
                        km::MaxSum part = km::maxSumAdd(km::maxSumEmpty(), row[std::size_t(j)]);
                        if (j + 1 <= i)
                            part = km::maxSumAdd(part, row[std::size_t(j + 1)]);
                        ms = km::maxSumMerge(ms, part);
                    }
                    float* p = got.data() + ((std::size_t(b) * H + h) * s + i) * s;
                    for (int j = 0; j <= i; ++j)
                        p[j] = std::exp(row[std::size_t(j)] - ms.max) / ms.sum;
                }
        LOOM_COMPARE(got, probs);
    }

    void softmaxBackwardElement()
    {
        const float p = 0.3f, dp = 1.5f, inner = 0.25f, scale = 0.125f;
        QCOMPARE(km::softmaxBackward(p, dp, inner, scale), p * (dp - inner) * scale);
    }

    // The fused vocab softmax cross-entropy: one pass of online (max, sum) per row, then the gradient, against
    // the CPU's three passes (row max, exponentials and sums, gradient) over one vocab slice.
    void crossEntropy_data()
    {
        QTest::addColumn<int>("first");
        QTest::newRow("whole vocabulary") << 0;
        QTest::newRow("second slice, targets elsewhere too") << 500;
    }
    void crossEntropy()
    {
        QFETCH(int, first);
        const int T = 6, Vl = 1000;
        const std::int64_t vocab = 1400; // the second slice ends in padding
        auto z = randomVector(std::size_t(T) * Vl, 13, 3.0f);
        const std::vector<std::int32_t> targets = { 0, 10, 499, 500, 999, 1399 };
        std::vector<float> max(T), sums(T), shift(T, 0.0f);
        auto cpu = z;
        train::vocab::rowMax(cpu.data(), T, Vl, first, vocab, max.data(), 1);
        train::vocab::expSums(cpu.data(), T, Vl, max.data(), targets.data(), first, sums.data(), shift.data(), 1);
        train::vocab::gradient(cpu.data(), T, Vl, sums.data(), targets.data(), first, 0.5f, 1);

        const int real = int(std::min<std::int64_t>(vocab - first, Vl));
        std::vector<float> got(z.size(), 0.0f), gotMax(T), gotSum(T);
        for (int t = 0; t < T; ++t) {
            const float* r = z.data() + std::size_t(t) * Vl;
            km::MaxSum ms = km::maxSumEmpty();
            for (int v = 0; v < real; ++v)
                ms = km::maxSumAdd(ms, r[v]);
            gotMax[std::size_t(t)] = ms.max;
            gotSum[std::size_t(t)] = ms.sum;
            for (int v = 0; v < Vl; ++v) {
                const float zv = v < real ? r[v] : -INFINITY;
                got[std::size_t(t) * Vl + v]
                    = km::crossEntropyGrad(zv, ms.max, ms.sum, targets[std::size_t(t)] == first + v, 0.5f);
            }
        }
        LOOM_COMPARE(gotMax, max);
        LOOM_COMPARE(gotSum, sums);
        LOOM_COMPARE(got, cpu);
        // The loss of each row whose target is in the slice, against −log softmax in double.
        for (int t = 0; t < T; ++t) {
            const std::int64_t local = targets[std::size_t(t)] - first;
            if (local < 0 || local >= real)
                continue;
            const float* r = z.data() + std::size_t(t) * Vl;
            double sum = 0;
            for (int v = 0; v < real; ++v)
                sum += std::exp(double(r[v]) - max[std::size_t(t)]);
            const double want = std::log(sum) - (double(r[local]) - max[std::size_t(t)]);
            const float loss = km::crossEntropyLoss(r[local] - gotMax[std::size_t(t)], gotSum[std::size_t(t)]);
            QVERIFY2(std::abs(loss - want) <= 1e-5 * std::abs(want) + 1e-6, qPrintable(QString::number(loss)));
        }
    }

    void adamw_data()
    {
        QTest::addColumn<float>("gradScale");
        QTest::newRow("no clipping") << 1.0f;
        QTest::newRow("clipped") << 0.3f;
    }
    void adamw()
    {
        QFETCH(float, gradScale);
        const std::size_t n = 1000;
        auto params = randomVector(n, 14, 0.02f);
        const auto grads = randomVector(n, 15);
        std::vector<std::uint8_t> mask(n);
        for (std::size_t i = 0; i < n; ++i)
            mask[i] = std::uint8_t(i % 3 != 0);
        auto got = params;
        std::vector<float> m(n, 0.0f), v(n, 0.0f);
        train::AdamW cpu(0, n, 0.9, 0.95, 1e-8, 0.1);
        for (int step = 1; step <= 3; ++step) {
            const double lr = 1e-3 * step;
            cpu.step(params.data(), grads.data(), mask, lr, gradScale);
            const double c1 = 1.0 - std::pow(0.9, step), c2 = 1.0 - std::pow(0.95, step);
            const km::AdamStep k { 0.9f, 0.95f, float(1.0 - 0.9), float(1.0 - 0.95), float(1.0 / c1), float(1.0 / c2),
                float(lr), float(lr * 0.1), 1e-8f, gradScale };
            for (std::size_t i = 0; i < n; ++i)
                km::adamwUpdate(k, mask[i] ? k.decay : 0.0f, got[i], grads[i], m[i], v[i]);
        }
        LOOM_COMPARE(got, params);
        LOOM_COMPARE(m, cpu.firstMoment().toHost());
        LOOM_COMPARE(v, cpu.secondMoment().toHost());
    }

    void clipScale()
    {
        QCOMPARE(km::clipScale(0.5, 1.0), 1.0f);
        QCOMPARE(km::clipScale(5.0, 0.0), 1.0f);
        QVERIFY(std::abs(km::clipScale(4.0, 1.0) - 0.25f) < 1e-6f);
        QCOMPARE(km::clipScale(std::nan(""), 1.0), 1.0f); // a NaN norm is the overflow check's, not clipping's
    }

    void lossScale()
    {
        km::LossScale s;
        s = km::lossScaleNext(s, true, 3);
        QCOMPARE(s.scale, 32768.0f);
        for (int i = 0; i < 2; ++i)
            s = km::lossScaleNext(s, false, 3);
        QCOMPARE(s.scale, 32768.0f);
        s = km::lossScaleNext(s, false, 3);
        QCOMPARE(s.scale, 65536.0f);
        QCOMPARE(s.cleanSteps, 0);
        km::LossScale tiny { 1.0f, 0 };
        QCOMPARE(km::lossScaleNext(tiny, true, 3).scale, 1.0f);
        QVERIFY(km::isFiniteFloat(1e30f));
        QVERIFY(!km::isFiniteFloat(INFINITY));
        QVERIFY(!km::isFiniteFloat(std::nanf("")));
    }

    // bf16 bit for bit against the safetensors writer's conversion, on random and special values.
    void bf16()
    {
        std::mt19937 rng(16);
        for (int i = 0; i < 200000; ++i) {
            const float x = km::bitsFloat(rng());
            const std::uint16_t want = train::toBf16(x), got = km::toBf16(x);
            if (std::isnan(x)) {
                QVERIFY(std::isnan(km::fromBf16(got)));
                continue;
            }
            QCOMPARE(got, want);
            QCOMPARE(km::fromBf16(got), train::fromBf16(want));
        }
    }

#if defined(__FLT16_MAX__)
    // fp16 bit for bit against the compiler's _Float16 (round to nearest even, subnormals and overflow).
    void fp16()
    {
        std::mt19937 rng(17);
        std::uniform_real_distribution<float> exponent(-27.0f, 17.0f);
        for (int i = 0; i < 200000; ++i) {
            const float x = (i % 2 ? km::bitsFloat(rng()) : std::exp2(exponent(rng)) * (i % 4 == 0 ? -1.0f : 1.0f));
            const _Float16 h = static_cast<_Float16>(x);
            std::uint16_t want;
            std::memcpy(&want, &h, sizeof want);
            const std::uint16_t got = km::toFp16(x);
            if (std::isnan(x)) {
                QVERIFY(std::isnan(km::fromFp16(got)));
                continue;
            }
            QVERIFY2(got == want, qPrintable(QString("%1: %2, expected %3").arg(x, 0, 'g', 9).arg(got).arg(want)));
            QCOMPARE(km::fromFp16(got), static_cast<float>(h));
        }
    }
#endif
};

QTEST_GUILESS_MAIN(TstKernelMath)
#include "tst_kernelmath.moc"
