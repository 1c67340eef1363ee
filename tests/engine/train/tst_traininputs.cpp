// loom-train refuses what it cannot train on, before step 1 and with a message, instead of training on
// garbage and exiting 0: NaN weights from --init-llmc, a checkpoint whose step is negative or beyond the
// run, `latest` naming a missing folder, an llm.c token file cut below its header, an unwritable
// --checkpoint-dir, a used one with --new-checkpoint-dir; and it stops a run whose loss or gradient norm is no longer
// finite, naming the step and rank.
#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <cstring>
#include <limits>

namespace {

struct Result {
    int exitCode = -1;
    QString log;
};

class TestTrainInputs : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    QString m_layout;

    Result train(const QStringList& args)
    {
        QProcess p;
        p.setProcessChannelMode(QProcess::MergedChannels);
        p.start(QStringLiteral(MPIEXEC),
            QStringList { QStringLiteral("--allow-run-as-root"), QStringLiteral("--oversubscribe"),
                QStringLiteral("-np"), QStringLiteral("1"), QStringLiteral(LOOM_TRAIN), QStringLiteral("--layout"),
                m_layout }
                + args);
        if (!p.waitForFinished(240000))
            p.kill();
        p.waitForFinished();
        return { p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, QString::fromUtf8(p.readAll()) };
    }

    QString path(const QString& name) const { return m_dir.filePath(name); }

    // A finished run of 2 steps with checkpoints in `dir` (step-2, latest).
    void checkpointed(const QString& dir)
    {
        const Result r
            = train({ QStringLiteral("--steps"), QStringLiteral("2"), QStringLiteral("--checkpoint-dir"), dir });
        QVERIFY2(r.exitCode == 0, qPrintable(r.log));
        QVERIFY(QFile::exists(dir + QStringLiteral("/step-2/checkpoint.json")));
    }

    void setStep(const QString& dir, qint64 step)
    {
        QFile f(dir + QStringLiteral("/step-2/checkpoint.json"));
        QVERIFY(f.open(QIODevice::ReadOnly));
        QJsonObject meta = QJsonDocument::fromJson(f.readAll()).object();
        f.close();
        meta[QStringLiteral("step")] = step;
        QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
        f.write(QJsonDocument(meta).toJson());
    }

    static bool trained(const Result& r) { return r.log.contains(QLatin1String("step    1/")); }

private slots:
    void initTestCase()
    {
        m_layout = path(QStringLiteral("tiny.json"));
        QFile f(m_layout);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(R"({"loom_layout": 1, "name": "inputs", "model": "gpt-tiny", "cluster": "local",
                    "parallel": {"tp": 1, "pp": 1, "dp": 1, "micro_batch": 2, "global_batch": 2}})");
    }

    void negativeOrFutureCheckpointStepRefused_data()
    {
        QTest::addColumn<qint64>("step");
        QTest::addColumn<QString>("expected");
        QTest::newRow("negative") << qint64(-3) << QStringLiteral("step is -3");
        QTest::newRow("beyond the run") << qint64(900) << QStringLiteral("beyond this run's --steps 4");
    }
    void negativeOrFutureCheckpointStepRefused()
    {
        QFETCH(qint64, step);
        QFETCH(QString, expected);
        const QString dir = path(QStringLiteral("ck-%1").arg(step));
        checkpointed(dir);
        setStep(dir, step);
        const Result r = train({ QStringLiteral("--steps"), QStringLiteral("4"), QStringLiteral("--checkpoint-dir"),
            dir, QStringLiteral("--resume") });
        QVERIFY2(r.exitCode != 0 && r.log.contains(expected) && !trained(r), qPrintable(r.log));
    }

    void latestNamingAMissingFolderRefused()
    {
        const QString dir = path(QStringLiteral("ck-latest"));
        checkpointed(dir);
        QFile latest(dir + QStringLiteral("/latest"));
        QVERIFY(latest.open(QIODevice::WriteOnly | QIODevice::Truncate));
        latest.write("step-7\n");
        latest.close();
        const Result r = train({ QStringLiteral("--steps"), QStringLiteral("4"), QStringLiteral("--checkpoint-dir"),
            dir, QStringLiteral("--resume") });
        QVERIFY2(r.exitCode != 0 && r.log.contains(QLatin1String("step-7, which is missing"))
                && r.log.contains(QLatin1String("step-2")) && !trained(r),
            qPrintable(r.log));
    }

    // --new-checkpoint-dir (loom run without --resume): a folder holding an earlier run's checkpoints is
    // refused before step 1 and left as it was; with --resume the run continues from it; an empty folder is fine.
    void usedCheckpointDirRefusedUnlessResumed()
    {
        const QString dir = path(QStringLiteral("ck-used"));
        checkpointed(dir);
        const Result r = train({ QStringLiteral("--steps"), QStringLiteral("4"), QStringLiteral("--checkpoint-dir"),
            dir, QStringLiteral("--new-checkpoint-dir") });
        QVERIFY2(r.exitCode != 0
                && r.log.contains(QLatin1String("already holds an earlier run's checkpoints (latest: step-2)"))
                && !trained(r),
            qPrintable(r.log));
        QVERIFY(!QFile::exists(dir + QStringLiteral("/step-4")));
        const Result resumed
            = train({ QStringLiteral("--steps"), QStringLiteral("4"), QStringLiteral("--checkpoint-dir"), dir,
                QStringLiteral("--new-checkpoint-dir"), QStringLiteral("--resume") });
        QVERIFY2(resumed.exitCode == 0 && resumed.log.contains(QLatin1String("resumed from")), qPrintable(resumed.log));
        QVERIFY(QFile::exists(dir + QStringLiteral("/step-4/checkpoint.json")));
        const Result fresh = train({ QStringLiteral("--steps"), QStringLiteral("2"), QStringLiteral("--checkpoint-dir"),
            path(QStringLiteral("ck-fresh")), QStringLiteral("--new-checkpoint-dir") });
        QVERIFY2(fresh.exitCode == 0 && trained(fresh), qPrintable(fresh.log));
    }

    void unwritableCheckpointDirFoundBeforeStepOne()
    {
        const QString file = path(QStringLiteral("a-file"));
        QFile f(file);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.close();
        const Result r
            = train({ QStringLiteral("--steps"), QStringLiteral("3"), QStringLiteral("--checkpoint-dir"), file });
        QVERIFY2(r.exitCode != 0 && r.log.contains(QLatin1String("is a file, not a folder")) && !trained(r),
            qPrintable(r.log));
        const Result under = train({ QStringLiteral("--steps"), QStringLiteral("3"), QStringLiteral("--checkpoint-dir"),
            file + QStringLiteral("/sub") });
        QVERIFY2(under.exitCode != 0 && under.log.contains(QLatin1String("cannot create the checkpoint folder"))
                && !trained(under),
            qPrintable(under.log));
    }

    void tokenFileCutBelowItsHeaderRefused()
    {
        QByteArray header(512, '\0');
        const qint32 magic = 20240520, version = 1, count = 100;
        std::memcpy(header.data(), &magic, 4);
        std::memcpy(header.data() + 4, &version, 4);
        std::memcpy(header.data() + 8, &count, 4);
        const QString file = path(QStringLiteral("cut.bin"));
        QFile f(file);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(header);
        f.close();
        const Result r = train({ QStringLiteral("--steps"), QStringLiteral("1"), QStringLiteral("--data"), file });
        QVERIFY2(r.exitCode != 0 && r.log.contains(QLatin1String("less than its 1024-byte header")) && !trained(r),
            qPrintable(r.log));
    }

    void nanWeightsFromLlmcRefused()
    {
        const QString model = path(QStringLiteral("tiny.llmc"));
        Result r = train({ QStringLiteral("--steps"), QStringLiteral("1"), QStringLiteral("--export-llmc"), model });
        QVERIFY2(r.exitCode == 0, qPrintable(r.log));
        QFile f(model);
        QVERIFY(f.open(QIODevice::ReadWrite));
        QVERIFY(f.seek(1024 + 4 * 100)); // a weight of wte
        const float nan = std::numeric_limits<float>::quiet_NaN();
        f.write(reinterpret_cast<const char*>(&nan), 4);
        f.close();
        r = train({ QStringLiteral("--steps"), QStringLiteral("2"), QStringLiteral("--init-llmc"), model });
        QVERIFY2(
            r.exitCode != 0 && r.log.contains(QLatin1String("holds NaN in wte")) && !trained(r), qPrintable(r.log));
    }

    // A learning rate of 1e30 blows the weights up within a few steps: the run stops at the first
    // non-finite loss or gradient norm, naming the step and the rank.
    void nonFiniteLossStopsTheRun()
    {
        const Result r = train({ QStringLiteral("--steps"), QStringLiteral("20"), QStringLiteral("--lr"),
            QStringLiteral("1e30"), QStringLiteral("--warmup"), QStringLiteral("1") });
        QVERIFY2(r.exitCode != 0 && r.log.contains(QLatin1String("on rank 0:"))
                && r.log.contains(QLatin1String("training stopped")),
            qPrintable(r.log));
        QVERIFY2(!r.log.contains(QLatin1String("step   20/20")), qPrintable(r.log));
    }
};

} // namespace

QTEST_GUILESS_MAIN(TestTrainInputs)
#include "tst_traininputs.moc"
