// ZeRO-1 with each rank completing its rows of the embedding's gradient, ZeRO-2 and ZeRO-3 (memory.zero 1, 2
// and 3) give the one-process loss: gpt-tiny trained for 20 steps under each layout equals the
// single-process run within 1e-4 relative at every step. Stage 2 reduce-scatters the gradients; stage 3 also
// gathers each block's parameters before its forward and backward. The rows mix them with tp, pp,
// interleaved and uneven stages, dp 2, 3 and 4 (pieces padded), overlap, full recompute, Loom's ring and the
// shared-memory segment for the reduce-scatters and all-gathers, and the Gloo backend. One row writes
// checkpoints from its shards; a run under another layout resumes from the middle one and continues with the
// same losses, and so does a ZeRO-1 run whose ranks share one copy of the parameters. Kept to a few mpirun
// launches (CI time).
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonObject>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

#include "TrainRun.h"

namespace {

constexpr int kSteps = 20;

QJsonObject layout(const QString& name, int tp, int pp, int dp, int zero, int microBatch = 2)
{
    return QJsonObject { { "loom_layout", 1 }, { "name", name }, { "model", "gpt-tiny" }, { "cluster", "local" },
        { "parallel",
            QJsonObject { { "tp", tp }, { "pp", pp }, { "dp", dp }, { "micro_batch", microBatch },
                { "global_batch", 12 }, { "schedule", "1f1b" } } },
        { "memory", QJsonObject { { "zero", zero }, { "recompute", "none" } } } };
}

QJsonObject with(QJsonObject layout, const QString& section, const QString& key, const QJsonValue& value)
{
    QJsonObject s = layout.value(section).toObject();
    s.insert(key, value);
    layout.insert(section, s);
    return layout;
}

} // namespace

class TestLayoutsZero : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    std::vector<double> m_baseline;
    QString m_baselineLog; // the one-process run's output

    static void compare(const std::vector<double>& losses, const std::vector<double>& reference, std::size_t from)
    {
        QCOMPARE(losses.size() + from, reference.size());
        for (std::size_t s = 0; s < losses.size(); ++s) {
            const double want = reference[s + from];
            QVERIFY2(std::abs(losses[s] - want) <= 1e-4 * std::abs(want),
                qPrintable(QStringLiteral("step %1: loss %2, one process %3")
                               .arg(s + from + 1)
                               .arg(losses[s], 0, 'g', 10)
                               .arg(want, 0, 'g', 10)));
        }
    }

private slots:
    void initTestCase()
    {
        m_baseline = loom::test::trainLosses(layout("single", 1, 1, 1, 0), m_dir.path(), kSteps, m_baselineLog);
        QVERIFY2(m_baseline.size() == kSteps, qPrintable(m_baselineLog));
        QVERIFY2(m_baseline.back() < m_baseline.front() - 0.3, "the loss must fall on the synthetic corpus");
    }

    // OpenBLAS takes its generic kernels (Prescott) on processors newer than its build; loom-train then
    // starts itself again with kernels the CPU runs (train/Threads.h), unless OPENBLAS_CORETYPE says otherwise.
    void blasKernelsAreNotGenericWhereTheCpuHasAvx2()
    {
        const QRegularExpression banner("OpenBLAS kernels (\\w+)( \\(chosen by loom-train)?");
        const auto match = banner.match(m_baselineLog);
        QVERIFY2(match.hasMatch(), qPrintable(m_baselineLog));
        __builtin_cpu_init();
        if (qEnvironmentVariableIsSet("OPENBLAS_CORETYPE"))
            QVERIFY2(match.captured(2).isEmpty(), qPrintable(m_baselineLog)); // a type set by hand stands
        else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
            QVERIFY2(match.captured(1) != "Prescott", qPrintable(m_baselineLog));
    }

    void sameLossAsOneProcess_data()
    {
        QTest::addColumn<QJsonObject>("layout");
        QTest::addColumn<QStringList>("args");
        QTest::newRow("zero2-tp2-pp2-dp2") << layout("zero2-tp2-pp2-dp2", 2, 2, 2, 2) << QStringList {};
        // Checkpoints every 10 steps from dp 3 pieces: resumed below under another layout.
        QTest::newRow("zero3-dp3-pp2") << layout("zero3-dp3-pp2", 1, 2, 3,
            3) << QStringList { "--checkpoint-dir", m_dir.filePath("ckpt"), "--checkpoint-every", "10" };
        // comm.allreduce applies to the reduce-scatters and all-gathers too: "hierarchical" runs them on the ring.
        QJsonObject overlap = with(layout("zero3-tp2-dp2-overlap", 2, 1, 2, 3), "comm", "overlap", true);
        QTest::newRow("zero3-tp2-dp2-overlap") << with(overlap, "comm", "allreduce", "hierarchical") << QStringList {};
        QJsonObject interleaved = with(layout("zero3-interleaved-dp2", 1, 2, 2, 3, 1), "parallel", "vpp", 2);
        QTest::newRow("zero3-interleaved-dp2")
            << with(interleaved, "parallel", "schedule", "interleaved") << QStringList {};
        QTest::newRow("zero2-uneven-dp3-ring") << with(
            with(layout("zero2-uneven-dp3-ring", 1, 2, 3, 2), "parallel", "stages",
                QJsonArray { QJsonArray { 0, 0 }, QJsonArray { 1, 3 } }),
            "comm", "allreduce", "ring") << QStringList {};
        QJsonObject recompute = with(layout("zero3-recompute-pp2-dp2-gloo", 1, 2, 2, 3), "memory", "recompute", "full");
        QTest::newRow("zero3-recompute-pp2-dp2-gloo")
            << with(with(recompute, "comm", "backend", "gloo"), "comm", "overlap", false) << QStringList {};
    }
    void sameLossAsOneProcess()
    {
        QFETCH(QJsonObject, layout);
        QFETCH(QStringList, args);
        QString log;
        const auto losses = loom::test::trainLosses(layout, m_dir.path(), kSteps, log, args);
        QVERIFY2(losses.size() == kSteps, qPrintable(log));
        compare(losses, m_baseline, 0);
    }

    // ZeRO-1 without tp or pp, where trading each rank's rows of the embedding's and the blocks' weight
    // gradients moves fewer bytes than reduce-scattering them (a vocabulary of 4,096, hidden 128 and 16 tokens
    // a micro-batch): each rank completes its rows from every rank's tokens, and the losses are the one
    // process's. At dp 2 through the shared-memory segment with two micro-batches accumulating; at dp 4 (one
    // micro-batch) on Loom's ring.
    void embeddingRowsSameLossAsOneProcess()
    {
        const QJsonObject model { { "name", "gpt-wide-vocab" }, { "layers", 2 }, { "hidden", 128 }, { "heads", 4 },
            { "ffn_hidden", 512 }, { "vocab", 4096 }, { "seq_len", 16 } };
        auto rowsLayout = [&](const QString& name, int dp, const QString& algorithm) { // 4 sequences of 16 a step
            QJsonObject l = with(layout(name, 1, 1, dp, dp > 1 ? 1 : 0, 1), "comm", "bucket_mb", 0.01);
            l.insert("model", model);
            return with(with(l, "parallel", "global_batch", 4), "comm", "allreduce", algorithm);
        };
        QString log;
        const auto one = loom::test::trainLosses(rowsLayout("rows-one", 1, "auto"), m_dir.path(), kSteps, log);
        QVERIFY2(one.size() == kSteps, qPrintable(log));
        QVERIFY2(!log.contains("completes its own rows"), qPrintable(log));
        const struct {
            const char* name;
            int dp;
            const char* algorithm;
        } runs[] = { { "rows-dp2-shm", 2, "shm" }, { "rows-dp4-ring", 4, "ring" } };
        for (const auto& r : runs) {
            const auto losses
                = loom::test::trainLosses(rowsLayout(r.name, r.dp, r.algorithm), m_dir.path(), kSteps, log);
            QVERIFY2(losses.size() == kSteps, qPrintable(log));
            QVERIFY2(log.contains("completes its own rows of the token embedding's gradient"), qPrintable(log));
            QVERIFY2(log.contains("completes its own rows of 8 of the blocks' weight gradients"), qPrintable(log));
            QVERIFY2(log.contains("keep one copy of the parameters in shared memory"), qPrintable(log));
            compare(losses, one, 0);
        }
    }

    // The zero3-dp3-pp2 row's checkpoint after step 10 (each DP rank wrote its pieces) resumes under
    // ZeRO-2 with tp 2 and dp 2, and under ZeRO-1 at dp 2 (whose ranks keep one copy of the parameters in
    // shared memory and both load it), and steps 11-20 give the one-process losses.
    void resumeZero3CheckpointUnderAnotherLayout_data()
    {
        QTest::addColumn<QJsonObject>("layout");
        QTest::newRow("zero2-tp2-dp2") << layout("zero2-tp2-dp2-resumed", 2, 1, 2, 2);
        QTest::newRow("zero1-dp2-shared") << layout("zero1-dp2-resumed", 1, 1, 2, 1);
    }
    void resumeZero3CheckpointUnderAnotherLayout()
    {
        QFETCH(QJsonObject, layout);
        const QString dir = m_dir.filePath("ckpt");
        QVERIFY2(QFile::exists(dir + "/step-10/checkpoint.json"), "the zero3-dp3-pp2 row wrote no checkpoint");
        QDir(dir + "/step-20").removeRecursively();
        QFile latest(dir + "/latest");
        QVERIFY(latest.open(QIODevice::WriteOnly | QIODevice::Truncate));
        latest.write("step-10\n");
        latest.close();
        QString log;
        const auto losses
            = loom::test::trainLosses(layout, m_dir.path(), kSteps, log, { "--checkpoint-dir", dir, "--resume" });
        QVERIFY2(log.contains("after step 10"), qPrintable(log));
        if (layout.value("memory").toObject().value("zero").toInt() == 1)
            QVERIFY2(log.contains("keep one copy of the parameters in shared memory"), qPrintable(log));
        QVERIFY2(losses.size() == kSteps - 10, qPrintable(log));
        compare(losses, m_baseline, 10);
    }
};

QTEST_GUILESS_MAIN(TestLayoutsZero)
#include "tst_layouts_zero.moc"
