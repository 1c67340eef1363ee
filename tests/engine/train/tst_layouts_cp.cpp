// Context parallelism end to end: gpt-tiny, gpt-mini and llama-tiny trained for 20 steps with cp 2 and 4 (ring
// attention, each rank holding two of the 2·cp chunks of every sequence), and cp 2 combined with tp 2, with dp 2 and
// with a pipeline and ZeRO-1, gives the one-process loss at every step within 1e-4 relative. Runs loom-train under
// mpirun as a user would (tests/engine/train/TrainRun.h multiplies cp into the rank count).
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include <map>

#include "TrainRun.h"

namespace {

constexpr int kSteps = 20;

QJsonObject layout(const QString& name, int tp, int cp, int pp, int dp, int zero = 0, const QString& model = "gpt-tiny",
    bool sp = false)
{
    QJsonObject parallel { { "tp", tp }, { "pp", pp }, { "dp", dp }, { "micro_batch", 2 }, { "global_batch", 12 },
        { "schedule", "1f1b" } };
    if (cp > 1)
        parallel.insert("cp", cp);
    if (sp)
        parallel.insert("sp", true);
    QJsonObject l { { "loom_layout", 1 }, { "name", name }, { "model", model }, { "cluster", "local" },
        { "parallel", parallel } };
    if (zero > 0)
        l.insert("memory", QJsonObject { { "zero", zero } });
    return l;
}

} // namespace

class TestLayoutsCp : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    std::map<QString, std::vector<double>> m_baseline; // one process, per model

private slots:
    void initTestCase()
    {
        for (const QString model : { "gpt-tiny", "llama-tiny", "gpt-mini" }) {
            QString log;
            m_baseline[model]
                = loom::test::trainLosses(layout("single-" + model, 1, 1, 1, 1, 0, model), m_dir.path(), kSteps, log);
            QVERIFY2(m_baseline[model].size() == kSteps, qPrintable(log));
        }
    }

    void sameLossAsOneProcess_data()
    {
        QTest::addColumn<QJsonObject>("layout");
        QTest::newRow("cp2") << layout("cp2", 1, 2, 1, 1);
        QTest::newRow("cp4") << layout("cp4", 1, 4, 1, 1);
        QTest::newRow("tp2-cp2") << layout("tp2-cp2", 2, 2, 1, 1);
        QTest::newRow("cp2-dp2") << layout("cp2-dp2", 1, 2, 1, 2);
        QTest::newRow("cp2-pp2-zero1") << layout("cp2-pp2-zero1", 1, 2, 2, 1, 1);
        // Llama blocks: rotary positions at each chunk's global positions, grouped KV heads in the ring.
        QTest::newRow("llama cp2") << layout("llama-cp2", 1, 2, 1, 1, 0, "llama-tiny");
        QTest::newRow("llama cp4") << layout("llama-cp4", 1, 4, 1, 1, 0, "llama-tiny");
        QTest::newRow("llama tp2-cp2, sequence parallel")
            << layout("llama-tp2-cp2-sp", 2, 2, 1, 1, 0, "llama-tiny", true);
        QTest::newRow("gpt-mini cp2") << layout("mini-cp2", 1, 2, 1, 1, 0, "gpt-mini");
        QTest::newRow("gpt-mini cp4") << layout("mini-cp4", 1, 4, 1, 1, 0, "gpt-mini");
        QTest::newRow("llama cp2-dp2, ZeRO-3") << layout("llama-cp2-dp2-zero3", 1, 2, 1, 2, 3, "llama-tiny");
    }

    void sameLossAsOneProcess()
    {
        QFETCH(QJsonObject, layout);
        const std::vector<double>& baseline = m_baseline.at(layout.value("model").toString());
        QString log;
        const std::vector<double> losses = loom::test::trainLosses(layout, m_dir.path(), kSteps, log);
        QVERIFY2(losses.size() == kSteps, qPrintable(log));
        double worst = 0;
        for (int i = 0; i < kSteps; ++i) {
            const double rel = std::abs(losses[i] - baseline[i]) / std::abs(baseline[i]);
            worst = std::max(worst, rel);
            QVERIFY2(rel < 1e-4,
                qPrintable(QString("step %1: loss %2, one process %3 (relative %4)")
                               .arg(i)
                               .arg(losses[i], 0, 'g', 9)
                               .arg(baseline[i], 0, 'g', 9)
                               .arg(rel)));
        }
        qInfo("%s: first loss %.6f, last %.6f (one process %.6f), largest relative difference %.2e",
            qPrintable(layout.value("name").toString()), losses.front(), losses.back(), baseline.back(), worst);
    }
};

QTEST_GUILESS_MAIN(TestLayoutsCp)
#include "tst_layouts_cp.moc"
