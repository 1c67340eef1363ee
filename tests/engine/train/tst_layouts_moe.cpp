// Expert parallelism: moe-tiny (4 GELU experts, top-2, MoE in blocks 0 and 2) trained for 20 steps with
// ep 2 and 4, combined with tensor, pipeline and data parallelism, gives the one-process loss at every step
// (within 1e-4 relative). Routing is dropless and deterministic, so every layout computes the same function;
// the loss includes the load-balancing loss. Five mpirun launches (CI time).
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include "TrainRun.h"

#include <cmath>

namespace {

constexpr int kSteps = 20;

QJsonObject layout(const QString& name, int tp, int pp, int dp, int ep, const QString& backend = "mpi")
{
    return QJsonObject { { "loom_layout", 1 }, { "name", name }, { "model", "moe-tiny" }, { "cluster", "local" },
        { "parallel",
            QJsonObject { { "tp", tp }, { "pp", pp }, { "dp", dp }, { "ep", ep }, { "micro_batch", 2 },
                { "global_batch", 8 }, { "schedule", "1f1b" } } },
        { "comm", QJsonObject { { "backend", backend } } } };
}

} // namespace

class TestLayoutsMoe : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    std::vector<double> m_baseline;

private slots:
    void initTestCase()
    {
        QString log;
        m_baseline = loom::test::trainLosses(layout("moe-single", 1, 1, 1, 1), m_dir.path(), kSteps, log);
        QVERIFY2(m_baseline.size() == kSteps, qPrintable(log));
        QVERIFY2(m_baseline.back() < m_baseline.front() - 0.3, "the loss must fall on the synthetic corpus");
    }

    void sameLossAsOneProcess_data()
    {
        QTest::addColumn<QJsonObject>("layout");
        QTest::newRow("dp2-ep2") << layout("dp2-ep2", 1, 1, 2, 2);
        QTest::newRow("dp4-ep4") << layout("dp4-ep4", 1, 1, 4, 4);
        QTest::newRow("tp2-dp2-ep2") << layout("tp2-dp2-ep2", 2, 1, 2, 2);
        QTest::newRow("pp2-dp2-ep2") << layout("pp2-dp2-ep2", 1, 2, 2, 2);
        // Expert-data-parallel groups of two (dp 4, ep 2), on Gloo's all-to-all, with full recomputation
        // (the dispatch and combine run again in backward).
        QJsonObject gloo = layout("dp4-ep2-gloo-recompute", 1, 1, 4, 2, "gloo");
        gloo.insert("memory", QJsonObject { { "zero", 0 }, { "recompute", "full" } });
        QTest::newRow("dp4-ep2 gloo, recompute") << gloo;
    }
    void sameLossAsOneProcess()
    {
        QFETCH(QJsonObject, layout);
        QString log;
        const auto losses = loom::test::trainLosses(layout, m_dir.path(), kSteps, log);
        QVERIFY2(losses.size() == kSteps, qPrintable(log));
        for (int s = 0; s < kSteps; ++s) {
            const double a = losses[static_cast<std::size_t>(s)], b = m_baseline[static_cast<std::size_t>(s)];
            if (!(std::fabs(a - b) <= 1e-4 * std::fabs(b)))
                QFAIL(qPrintable(
                    QStringLiteral("step %1: loss %2, one process %3").arg(s + 1).arg(a, 0, 'g', 9).arg(b, 0, 'g', 9)));
        }
    }
};

QTEST_GUILESS_MAIN(TestLayoutsMoe)
#include "tst_layouts_moe.moc"
