// Gradient compression under data parallelism (issue 4's acceptance): the same model trained with dp 2
// uncompressed, with int8 and error feedback, with topk:0.01 and error feedback, and with topk:0.01 without
// it. int8 and top-k with feedback end at most 2% above the uncompressed loss; top-k without feedback ends
// measurably worse. The final loss is the mean of the last 10 steps. Runs loom-train under mpirun.
//
// Built twice from this file: tst_compression_mini (label bench) runs the acceptance as written, gpt-mini
// for 300 steps (4-13 minutes on 2 cores, depending on load); tst_compression runs gpt-tiny for 300 steps (28 s),
// where int8's gap is close to the 2% line (measured +1.9%), so it allows int8 5% (kInt8Tolerance).
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <cstdio>
#include <vector>

#ifndef COMPRESSION_MODEL
#error "define COMPRESSION_MODEL (a built-in model profile) and COMPRESSION_INT8_TOLERANCE"
#endif

namespace {

constexpr int kSteps = 300;
constexpr int kLastSteps = 10; // the final loss: their mean
constexpr double kTolerance = 0.02; // the acceptance: at most 2% above uncompressed
constexpr double kInt8Tolerance = COMPRESSION_INT8_TOLERANCE;
constexpr double kWorseWithoutFeedback = 0.10; // "measurably worse": at least 10% above uncompressed

} // namespace

class TestCompression : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

    // Trains the model with dp 2 and the given comm settings; returns the final loss (negative on failure,
    // with `log` set).
    double train(const QString& name, const QString& codec, bool feedback, QString& log)
    {
        const QJsonObject layout { { "loom_layout", 1 }, { "name", name },
            { "model", QStringLiteral(COMPRESSION_MODEL) }, { "cluster", "local" },
            { "parallel",
                QJsonObject { { "tp", 1 }, { "pp", 1 }, { "dp", 2 }, { "micro_batch", 4 }, { "global_batch", 8 },
                    { "schedule", "1f1b" } } },
            { "comm", QJsonObject { { "dp_codec", codec }, { "error_feedback", feedback } } } };
        const QString file = m_dir.filePath(name + ".json"), metrics = m_dir.filePath(name + ".metrics");
        QFile f(file);
        f.open(QIODevice::WriteOnly);
        f.write(QJsonDocument(layout).toJson());
        f.close();
        QProcess proc;
        proc.setProcessChannelMode(QProcess::MergedChannels);
        proc.start(QStringLiteral(MPIEXEC),
            { QStringLiteral("--allow-run-as-root"), QStringLiteral("--oversubscribe"), QStringLiteral("-np"),
                QStringLiteral("2"), QStringLiteral(LOOM_TRAIN), QStringLiteral("--layout"), file,
                QStringLiteral("--steps"), QString::number(kSteps), QStringLiteral("--metrics"), metrics });
        const bool finished = proc.waitForFinished(900000);
        log = QString::fromUtf8(proc.readAll()).right(4000);
        if (!finished || proc.exitCode() != 0)
            return -1;
        std::vector<double> losses;
        QFile m(metrics);
        m.open(QIODevice::ReadOnly);
        for (const QByteArray& line : m.readAll().split('\n'))
            if (!line.trimmed().isEmpty())
                losses.push_back(QJsonDocument::fromJson(line).object().value("loss").toDouble());
        if (losses.size() != kSteps) {
            log += QStringLiteral("\n%1 steps in the metrics, expected %2").arg(losses.size()).arg(kSteps);
            return -1;
        }
        double sum = 0;
        for (int i = kSteps - kLastSteps; i < kSteps; ++i)
            sum += losses[static_cast<std::size_t>(i)];
        return sum / kLastSteps;
    }

private slots:
    void acceptance()
    {
        QVERIFY(m_dir.isValid());
        QString log;
        const double none = train("none", "none", true, log);
        QVERIFY2(none > 0, qPrintable(log));
        const double int8 = train("int8", "int8", true, log);
        QVERIFY2(int8 > 0, qPrintable(log));
        const double topk = train("topk-ef", "topk:0.01", true, log);
        QVERIFY2(topk > 0, qPrintable(log));
        const double topkNoFeedback = train("topk-no-ef", "topk:0.01", false, log);
        QVERIFY2(topkNoFeedback > 0, qPrintable(log));

        auto line = [none](const char* what, double loss) {
            std::printf("%-32s final loss %.4f (%+.1f%% against uncompressed)\n", what, loss, 100 * (loss / none - 1));
        };
        std::printf("%s, dp 2, global batch 8, %d steps, mean loss of the last %d steps:\n", COMPRESSION_MODEL, kSteps,
            kLastSteps);
        line("uncompressed", none);
        line("int8, error feedback", int8);
        line("topk:0.01, error feedback", topk);
        line("topk:0.01, no error feedback", topkNoFeedback);
        std::fflush(stdout);

        QVERIFY2(none < 5.0, "the uncompressed run must learn (the loss starts at ln 256 = 5.55)");
        QVERIFY2(int8 <= none * (1 + kInt8Tolerance), "int8 with error feedback ends too far above uncompressed");
        QVERIFY2(topk <= none * (1 + kTolerance), "topk:0.01 with error feedback ends more than 2% above uncompressed");
        QVERIFY2(topkNoFeedback >= none * (1 + kWorseWithoutFeedback),
            "topk:0.01 without error feedback should end measurably worse than uncompressed");
        QVERIFY2(topkNoFeedback > topk * (1 + kWorseWithoutFeedback),
            "topk:0.01 without error feedback should end measurably worse than with it");
    }
};

QTEST_GUILESS_MAIN(TestCompression)
#include "tst_compression.moc"
