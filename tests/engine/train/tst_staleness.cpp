// Asynchronous data parallelism (comm.staleness 1): each step applies the previous step's averaged gradient.
// Checked against references that do not share the delay's code path:
//  - the first step applies nothing, and the second applies exactly the first step's averaged gradient: the
//    weights and AdamW moments after two stale steps equal those after one synchronous step (dp 2 both);
//  - a third stale step applies a gradient taken at the unchanged weights, so it must differ from two
//    synchronous steps (a delay that is not there would make them equal);
//  - dp 2 (MPI and Gloo) gives the one-process stale run's loss at every step, and the loss falls (also with int8 and
//    error feedback).
// Runs loom-train under mpirun, as a user would.
#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include "TrainRun.h"

#include <cmath>
#include <cstring>

namespace {

QJsonObject layout(const QString& name, int dp, int staleness, int zero = 0)
{
    return QJsonObject { { "loom_layout", 1 }, { "name", name }, { "model", "gpt-tiny" }, { "cluster", "local" },
        { "parallel",
            QJsonObject { { "tp", 1 }, { "pp", 1 }, { "dp", dp }, { "micro_batch", 2 }, { "global_batch", 8 } } },
        { "memory", QJsonObject { { "zero", zero }, { "recompute", "none" } } },
        { "comm", QJsonObject { { "staleness", staleness }, { "bucket_mb", 0.05 } } } };
}

std::vector<float> floats(const QString& file)
{
    QFile f(file);
    if (!f.open(QIODevice::ReadOnly))
        return {};
    const QByteArray bytes = f.readAll();
    std::vector<float> v(static_cast<std::size_t>(bytes.size()) / sizeof(float));
    std::memcpy(v.data(), bytes.constData(), v.size() * sizeof(float));
    return v;
}

// The largest difference between two checkpoints' tensors (parameters and moments), relative to the
// tensor's largest magnitude; -1 when their files differ in name or size.
double checkpointDifference(const QString& a, const QString& b)
{
    const QStringList names = QDir(a).entryList({ QStringLiteral("*.f32") }, QDir::Files, QDir::Name);
    if (names.isEmpty() || names != QDir(b).entryList({ QStringLiteral("*.f32") }, QDir::Files, QDir::Name)) {
        qWarning("%s: %lld tensors, %s: %lld", qPrintable(a), qlonglong(names.size()), qPrintable(b),
            qlonglong(QDir(b).entryList({ QStringLiteral("*.f32") }, QDir::Files).size()));
        return -1;
    }
    double worst = 0;
    for (const QString& n : names) {
        const auto x = floats(a + QLatin1Char('/') + n), y = floats(b + QLatin1Char('/') + n);
        if (x.size() != y.size() || x.empty())
            return -1;
        double scale = 1e-30, diff = 0;
        for (std::size_t i = 0; i < x.size(); ++i) {
            scale = std::max(scale, double(std::fabs(x[i])));
            diff = std::max(diff, double(std::fabs(x[i] - y[i])));
        }
        worst = std::max(worst, diff / scale);
    }
    return worst;
}

} // namespace

class TestStaleness : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

    // Runs loom-train on the layout for `steps` steps with a checkpoint after each; returns the losses.
    std::vector<double> train(const QJsonObject& l, int steps, QString& log)
    {
        return loom::test::trainLosses(l, m_dir.path(), steps, log,
            { QStringLiteral("--checkpoint-dir"), m_dir.filePath(l.value("name").toString()),
                QStringLiteral("--checkpoint-every"), QStringLiteral("1") });
    }

    QString checkpoint(const QString& name, int step) const
    {
        return m_dir.filePath(name + QStringLiteral("/step-%1").arg(step));
    }

private slots:
    void firstUpdateIsTheFirstStepsGradient_data()
    {
        QTest::addColumn<int>("zero");
        QTest::newRow("AdamW on every rank") << 0;
        QTest::newRow("ZeRO-1") << 1;
    }
    void firstUpdateIsTheFirstStepsGradient()
    {
        // Both runs take 3 steps (the learning-rate schedule spans the run) with a checkpoint after each.
        QFETCH(int, zero);
        const QString z = QString::number(zero);
        QString log;
        QVERIFY2(train(layout("sync-z" + z, 2, 0, zero), 3, log).size() == 3, qPrintable(log));
        QVERIFY2(train(layout("stale-z" + z, 2, 1, zero), 3, log).size() == 3, qPrintable(log));
        // Two stale steps = one synchronous step: nothing applied at step 1, step 1's average at step 2.
        const double same = checkpointDifference(checkpoint("sync-z" + z, 1), checkpoint("stale-z" + z, 2));
        QVERIFY2(same >= 0 && same <= 1e-6,
            qPrintable(QStringLiteral("stale after 2 steps vs synchronous after 1: %1").arg(same)));
        // Three stale steps apply a gradient taken at the initial weights; two synchronous steps do not.
        const double other = checkpointDifference(checkpoint("sync-z" + z, 2), checkpoint("stale-z" + z, 3));
        qInfo("stale after 2 steps vs synchronous after 1: %g; stale after 3 vs synchronous after 2: %g", same, other);
        QVERIFY2(other > 1e-4, qPrintable(QStringLiteral("stale after 3 steps vs synchronous after 2: %1").arg(other)));
    }

    void sameLossAsOneProcessAndItFalls_data()
    {
        QTest::addColumn<QString>("backend");
        QTest::newRow("mpi") << QStringLiteral("mpi");
        QTest::newRow("gloo") << QStringLiteral("gloo");
    }
    void sameLossAsOneProcessAndItFalls()
    {
        QFETCH(QString, backend);
        constexpr int kSteps = 20;
        QString log;
        const auto one = train(layout("stale-dp1-" + backend, 1, 1), kSteps, log);
        QVERIFY2(one.size() == kSteps, qPrintable(log));
        QJsonObject l = layout("stale-dp2-" + backend, 2, 1);
        QJsonObject c = l.value("comm").toObject();
        c.insert("backend", backend);
        l.insert("comm", c);
        const auto two = train(l, kSteps, log);
        QVERIFY2(two.size() == kSteps, qPrintable(log));
        for (int s = 0; s < kSteps; ++s) {
            const double a = two[static_cast<std::size_t>(s)], b = one[static_cast<std::size_t>(s)];
            if (!(std::fabs(a - b) <= 1e-4 * std::fabs(b)))
                QFAIL(qPrintable(QStringLiteral("step %1: dp 2 loss %2, one process %3")
                                     .arg(s + 1)
                                     .arg(a, 0, 'g', 9)
                                     .arg(b, 0, 'g', 9)));
        }
        QVERIFY2(two.back() < two.front() - 0.3, "the loss must fall with one-step-stale gradients");
    }

    void errorFeedbackKeepsWorking()
    {
        // int8 with error feedback: each bucket's residual is used by one all-reduce at a time, now one step late.
        QJsonObject l = layout("stale-int8", 2, 1);
        QJsonObject c = l.value("comm").toObject();
        c.insert("dp_codec", "int8");
        c.insert("error_feedback", true);
        l.insert("comm", c);
        QString log;
        const auto losses = train(l, 20, log);
        QVERIFY2(losses.size() == 20, qPrintable(log));
        QVERIFY2(losses.back() < losses.front() - 0.3, "the loss must fall with int8, error feedback and staleness 1");
    }
};

QTEST_GUILESS_MAIN(TestStaleness)
#include "tst_staleness.moc"
