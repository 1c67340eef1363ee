// fp16/bf16 conversions and the gradient codecs, without MPI: round trips, documented error bounds,
// malformed encodings.
#include "engine/comm/CommError.h"
#include "engine/comm/DType.h"
#include "engine/comm/GradientCodec.h"

#include <QTest>

#include <cmath>
#include <cstring>
#include <random>

using namespace loom::comm;
using loom::plan::Codec;

class TestCodecs : public QObject {
    Q_OBJECT
private slots:
    void halfRoundTripsEveryValue()
    {
        // Every one of the 65,536 halves converts to float and back unchanged (NaNs stay NaN).
        for (std::uint32_t h = 0; h < 65536; ++h) {
            const float f = halfToFloat(static_cast<std::uint16_t>(h));
            const std::uint16_t back = floatToHalf(f);
            if (std::isnan(f))
                QVERIFY(std::isnan(halfToFloat(back)));
            else if (back != h)
                QFAIL(qPrintable(QStringLiteral("half 0x%1 -> %2 -> 0x%3")
                                     .arg(h, 4, 16, QLatin1Char('0'))
                                     .arg(f)
                                     .arg(back, 4, 16, QLatin1Char('0'))));
        }
    }

    void halfRounding_data()
    {
        QTest::addColumn<float>("in");
        QTest::addColumn<float>("out");
        QTest::newRow("one") << 1.0f << 1.0f;
        QTest::newRow("tie to even down") << 1.0f + std::ldexp(1.0f, -11) << 1.0f;
        QTest::newRow("tie to even up") << 1.0f + 3 * std::ldexp(1.0f, -11) << 1.0f + std::ldexp(1.0f, -9);
        QTest::newRow("largest") << 65504.0f << 65504.0f;
        QTest::newRow("saturates") << 1e9f << 65504.0f;
        QTest::newRow("saturates negative") << -70000.0f << -65504.0f;
        QTest::newRow("smallest subnormal") << std::ldexp(1.0f, -24) << std::ldexp(1.0f, -24);
        QTest::newRow("below half the smallest") << std::ldexp(1.0f, -26) << 0.0f;
        QTest::newRow("negative zero") << -0.0f << -0.0f;
        QTest::newRow("infinity") << INFINITY << INFINITY;
    }
    void halfRounding()
    {
        QFETCH(float, in);
        QFETCH(float, out);
        QCOMPARE(halfToFloat(floatToHalf(in)), out);
    }

    void bf16Rounding()
    {
        QCOMPARE(bf16ToFloat(floatToBf16(1.0f)), 1.0f);
        QCOMPARE(bf16ToFloat(floatToBf16(1.0f + std::ldexp(1.0f, -8))), 1.0f); // tie to even
        QCOMPARE(bf16ToFloat(floatToBf16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
        QVERIFY(std::isnan(bf16ToFloat(floatToBf16(NAN))));
        std::mt19937 rng(3);
        std::uniform_real_distribution<float> d(-1e6f, 1e6f);
        for (int i = 0; i < 100000; ++i) {
            const float x = d(rng);
            QVERIFY(std::fabs(bf16ToFloat(floatToBf16(x)) - x) <= std::ldexp(std::fabs(x), -8));
        }
    }

    void reduceHalf()
    {
        std::uint16_t a[3] = { floatToHalf(1.5f), floatToHalf(-2), floatToHalf(7) };
        const std::uint16_t b[3] = { floatToHalf(2.5f), floatToHalf(5), floatToHalf(-7) };
        reduceHost(a, b, 3, DType::F16, ReduceOp::Sum);
        QCOMPARE(halfToFloat(a[0]), 4.0f);
        QCOMPARE(halfToFloat(a[1]), 3.0f);
        QCOMPARE(halfToFloat(a[2]), 0.0f);
        float x[2] = { 1, 5 }, y[2] = { 3, 2 };
        reduceHost(x, y, 2, DType::F32, ReduceOp::Max);
        QCOMPARE(x[0], 3.0f);
        QCOMPARE(x[1], 5.0f);
    }

    void codecBounds_data()
    {
        QTest::addColumn<QString>("codec");
        QTest::addColumn<int>("count");
        for (const char* c : { "fp16", "bf16", "int8", "int4", "lz4" })
            for (int n : { 0, 1, 255, 256, 257, 10007 })
                QTest::newRow(qPrintable(QStringLiteral("%1 x%2").arg(c).arg(n))) << QString::fromLatin1(c) << n;
    }
    void codecBounds()
    {
        // One encode/decode stays within the bound GradientCodec.h documents, for every element.
        QFETCH(QString, codec);
        QFETCH(int, count);
        const std::size_t block = 256;
        auto c = makeCodec(*Codec::parse(codec.toStdString()), block);
        QVERIFY(c);
        std::mt19937 rng(count);
        std::normal_distribution<float> d(0, 3);
        std::vector<float> x(static_cast<std::size_t>(count)), y(x.size());
        for (auto& v : x)
            v = d(rng);
        if (count > 10)
            x[7] = 0; // zeros and a whole zero block must survive too
        std::vector<std::uint8_t> enc(c->maxEncodedBytes(x.size()));
        const std::size_t bytes = c->encode(x.data(), x.size(), enc.data());
        QVERIFY(bytes <= enc.size());
        c->decode(enc.data(), bytes, y.data(), y.size());
        for (std::size_t i = 0; i < x.size(); ++i) {
            float blockMax = 0;
            for (std::size_t j = i / block * block; j < std::min(x.size(), (i / block + 1) * block); ++j)
                blockMax = std::max(blockMax, std::fabs(x[j]));
            const double err = std::fabs(double(y[i]) - double(x[i]));
            if (!(err <= c->errorBound(x[i], blockMax)))
                QFAIL(qPrintable(QStringLiteral("element %1: %2 -> %3, error %4 > bound %5")
                                     .arg(i)
                                     .arg(x[i])
                                     .arg(y[i])
                                     .arg(err)
                                     .arg(c->errorBound(x[i], blockMax))));
        }
        if (codec == QLatin1String("lz4")) {
            QVERIFY(x == y);
        }
    }

    void compressionRatios()
    {
        // Bytes on the wire per fp32 value: the reason to compress.
        const std::size_t n = 1 << 16;
        QCOMPARE(makeCodec(*Codec::parse("fp16"))->maxEncodedBytes(n), 2 * n);
        QCOMPARE(makeCodec(*Codec::parse("int8"), 256)->maxEncodedBytes(n), n + 4 * n / 256);
        QCOMPARE(makeCodec(*Codec::parse("int4"), 256)->maxEncodedBytes(n), n / 2 + 4 * n / 256);
        QCOMPARE(makeCodec(*Codec::parse("topk:0.01"))->maxEncodedBytes(n), 4 + 8 * std::size_t(std::ceil(0.01 * n)));
    }

    void topkKeepsTheLargest()
    {
        auto c = makeCodec(*Codec::parse("topk:0.25"));
        const std::vector<float> x = { 0.1f, -9, 3, 0.2f, 8, -0.5f, 1, 0 };
        std::vector<std::uint8_t> enc(c->maxEncodedBytes(x.size()));
        std::vector<float> y(x.size());
        c->decode(enc.data(), c->encode(x.data(), x.size(), enc.data()), y.data(), y.size());
        QCOMPARE(y, (std::vector<float> { 0, -9, 0, 0, 8, 0, 0, 0 }));
    }

    void malformedEncodingsAreErrors()
    {
        std::vector<float> out(16);
        for (const char* name : { "fp16", "int8", "int4", "topk:0.5", "lz4" }) {
            auto c = makeCodec(*Codec::parse(name));
            std::vector<std::uint8_t> junk(c->maxEncodedBytes(16) / 2 + 1, 0xff);
            bool threw = false;
            try {
                c->decode(junk.data(), junk.size(), out.data(), out.size());
            } catch (const CommError&) {
                threw = true;
            }
            QVERIFY2(threw, name);
        }
    }

    void int8Throughput()
    {
        // Not a performance claim (tests/bench/bench_codec prints the ratio); just that the fast path works.
        std::vector<float> x(1 << 20), y(x.size()), scales(x.size() / 256);
        std::vector<std::int8_t> q(x.size());
        for (std::size_t i = 0; i < x.size(); ++i)
            x[i] = std::sin(float(i));
        quantizeInt8(x.data(), x.size(), 256, scales.data(), q.data());
        dequantizeInt8(scales.data(), q.data(), x.size(), 256, y.data());
        for (std::size_t i = 0; i < x.size(); ++i)
            QVERIFY(std::fabs(x[i] - y[i]) <= 1.0 / 254 + 1e-6);
    }
};

QTEST_GUILESS_MAIN(TestCodecs)
#include "tst_codecs.moc"
