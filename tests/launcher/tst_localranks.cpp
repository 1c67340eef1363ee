// RunController with a gloo layout on the local cluster, in process (no store, no CLI): the ranks are started
// without mpirun (LocalRanks), a run finishes, cancel stops it, and a SIGKILLed rank fails the run within 10 s
// naming the rank (also under mpirun); when finished() is emitted no process of the run is left, not even as a
// zombie.
#include "ProcessTree.h"
#include "engine/plan/LayoutParser.h"
#include "engine/profiles/BuiltinProfiles.h"
#include "launcher/RunController.h"

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <csignal>
#include <unistd.h>

using namespace loom;

namespace {

launcher::LaunchRequest request(
    const QString& workDir, std::int64_t steps, const QString& backend = QStringLiteral("gloo"))
{
    const auto r
        = plan::readLayout(QStringLiteral(R"({"loom_layout": 1, "name": "dp2", "model": "gpt-tiny", "cluster": "local",
        "parallel": {"tp": 1, "pp": 1, "dp": 2, "micro_batch": 2, "global_batch": 8}, "comm": {"backend": "%1"}})")
                               .arg(backend)
                               .toStdString(),
            profiles::BuiltinProfiles::instance());
    if (!r.ok())
        qFatal("%s", r.diagnostics.format().c_str());
    launcher::LaunchRequest q;
    q.layout = *r.layout;
    q.steps = steps;
    q.engine = QStringLiteral(LOOM_TRAIN);
    q.workDir = workDir;
    q.cancelGraceSeconds = 5;
    return q;
}

// The engine processes below this test: rank number -> pid.
std::map<int, qint64> ranks(QList<qint64>* all)
{
    std::map<int, qint64> out;
    *all = loomtest::descendants(QCoreApplication::applicationPid());
    for (const qint64 pid : *all)
        if (loomtest::commOf(pid) == QLatin1String("loom-train"))
            out[loomtest::environmentOf(pid, "LOOM_RANK").isEmpty()
                    ? loomtest::environmentOf(pid, "OMPI_COMM_WORLD_RANK").toInt()
                    : loomtest::environmentOf(pid, "LOOM_RANK").toInt()]
                = pid;
    return out;
}

} // namespace

class TestLocalRanks : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    int m_runs = 0;

    QString folder() { return m_dir.filePath(QStringLiteral("run%1").arg(++m_runs)); }

    // Starts `c` and waits for its step `step` (false if the run ended first or 90 s passed).
    static bool startAndWaitForStep(
        launcher::RunController& c, const launcher::LaunchRequest& q, QSignalSpy& finished, qint64 step)
    {
        qint64 last = 0;
        QObject::connect(&c, &launcher::RunController::stepFinished, &c,
            [&last](const profiles::StepRecord& s, qint64) { last = s.step; });
        c.start(q);
        QElapsedTimer t;
        t.start();
        while (t.elapsed() < 90000 && finished.isEmpty() && last < step)
            QTest::qWait(50);
        QObject::disconnect(&c, &launcher::RunController::stepFinished, &c, nullptr);
        return last >= step;
    }

private slots:
    void finishes()
    {
        launcher::RunController c(nullptr);
        QSignalSpy finished(&c, &launcher::RunController::finished);
        c.start(request(folder(), 3));
        QVERIFY2(!c.command().join(' ').contains("mpirun"), qPrintable(c.command().join(' ')));
        QVERIFY(c.command().first().startsWith("LOOM_RANK=0..1"));
        QVERIFY(finished.wait(120000));
        QCOMPARE(loom::profiles::toString(finished.first().at(0).value<loom::profiles::RunState>()),
            QStringLiteral("finished"));
    }

    void cancelStopsEveryRank()
    {
        launcher::RunController c(nullptr);
        QSignalSpy finished(&c, &launcher::RunController::finished);
        QVERIFY(startAndWaitForStep(c, request(folder(), 100000), finished, 2));
        QList<qint64> all;
        const auto r = ranks(&all);
        QCOMPARE(int(r.size()), 2);
        for (const qint64 pid : all)
            QVERIFY2(!loomtest::commOf(pid).contains("mpirun"), qPrintable(loomtest::commOf(pid)));
        c.cancel();
        QVERIFY(finished.wait(30000));
        QCOMPARE(loom::profiles::toString(finished.first().at(0).value<loom::profiles::RunState>()),
            QStringLiteral("cancelled"));
        const QStringList left = loomtest::stillThere(all);
        QVERIFY2(left.isEmpty(), qPrintable(left.join(", ")));
    }

    void killedRankFailsTheRun_data()
    {
        QTest::addColumn<QString>("backend");
        QTest::newRow("gloo, ranks started by Loom") << QStringLiteral("gloo");
        QTest::newRow("mpi, under mpirun") << QStringLiteral("mpi");
    }
    void killedRankFailsTheRun()
    {
        QFETCH(QString, backend);
        launcher::RunController c(nullptr);
        QSignalSpy finished(&c, &launcher::RunController::finished);
        QVERIFY(startAndWaitForStep(c, request(folder(), 100000, backend), finished, 2));
        QList<qint64> all;
        const auto r = ranks(&all);
        QVERIFY(r.count(1));
        QElapsedTimer t;
        t.start();
        ::kill(static_cast<pid_t>(r.at(1)), SIGKILL);
        QVERIFY(finished.wait(30000));
        QVERIFY2(t.elapsed() < 10000, qPrintable(QStringLiteral("%1 ms").arg(t.elapsed())));
        QCOMPARE(loom::profiles::toString(finished.first().at(0).value<loom::profiles::RunState>()),
            QStringLiteral("failed"));
        const QString cause = finished.first().at(1).toString();
        QVERIFY2(cause.contains(QRegularExpression("^rank \\d died \\(signal 9")), qPrintable(cause));
        const QStringList left = loomtest::stillThere(all);
        QVERIFY2(left.isEmpty(), qPrintable(left.join(", ")));
    }
};

QTEST_GUILESS_MAIN(TestLocalRanks)
#include "tst_localranks.moc"
