// Hostile stored runs read back through the `loom` command line: events no launcher would store (written
// by an older Loom, or into the database by hand) and a diverged loss. Each case failed before its fix. And
// what `runs list` and `runs show` say of a stored remote run: its cluster, each rank's log under srun.
#include "ProcessRun.h"

#include "profiles/RunStore.h"

#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <limits>

namespace {

using loomtest::Run;

loom::trace::TraceEvent makeEvent(std::int32_t rank, std::int64_t start, std::int64_t end)
{
    loom::trace::TraceEvent e;
    e.rank = rank;
    e.kind = loom::trace::EventKind::Forward;
    e.step = 0;
    e.startNs = start;
    e.endNs = end;
    return e;
}

} // namespace

using namespace loom;

class TestHostileRuns : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

    QString storePath() const { return m_dir.filePath(QStringLiteral("runs.db")); }

    Run loom(const QStringList& args)
    {
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("LOOM_DB"), storePath());
        return loomtest::runProcess(QStringLiteral(LOOM_EXE), args, env, m_dir.path(), 60000);
    }

    // A finished two-rank run of gpt-tiny holding `events` and `steps`, recorded as a launcher would.
    qint64 storeRun(const std::vector<trace::TraceEvent>& events, const std::vector<profiles::StepRecord>& steps)
    {
        profiles::Store store(storePath());
        profiles::RunStore runs(store);
        const qint64 id = runs.startRun(QStringLiteral("hostile"),
            QStringLiteral(R"({"loom_layout": 1, "name": "hostile", "model": "gpt-tiny", "cluster": "local",
                "parallel": {"tp": 1, "pp": 1, "dp": 2, "micro_batch": 1, "global_batch": 2}})"),
            QStringLiteral("local"), QStringLiteral("mpirun"));
        runs.addEvents(id, events);
        for (const auto& s : steps)
            runs.addStep(id, s);
        runs.finishRun(id, profiles::RunState::Finished, {});
        return id;
    }

private slots:
    void initTestCase() { QVERIFY(m_dir.isValid()); }

    // Events outside the run's world, starting before its clock or ending before they start are left out
    // of `loom runs export` (saying how many and why), so `loom trace stats` reads what it wrote.
    void exportReadsBackInStats_data()
    {
        QTest::addColumn<int>("rank");
        QTest::addColumn<qint64>("start");
        QTest::addColumn<qint64>("end");
        QTest::addColumn<QString>("why");
        QTest::newRow("rank -5") << -5 << qint64(1000) << qint64(2000) << "rank -5 is outside the run's 2 ranks";
        QTest::newRow("rank 7") << 7 << qint64(1000) << qint64(2000) << "rank 7 is outside the run's 2 ranks";
        QTest::newRow("end before start") << 1 << qint64(5000) << qint64(2000) << "it ends (2000 ns) before it starts";
        QTest::newRow("start -5") << 1 << qint64(-5) << qint64(2000) << "it starts at -5 ns";
    }
    void exportReadsBackInStats()
    {
        QFETCH(int, rank);
        QFETCH(qint64, start);
        QFETCH(qint64, end);
        QFETCH(QString, why);
        QFile::remove(storePath());
        const qint64 id
            = storeRun({ makeEvent(0, 1000, 2000), makeEvent(rank, start, end), makeEvent(1, 1500, 2500) }, {});
        const QString trace = m_dir.filePath(QStringLiteral("export.json"));
        const Run exported = loom({ QStringLiteral("runs"), QStringLiteral("export"), QString::number(id),
            QStringLiteral("--chrome"), trace });
        QVERIFY2(exported.exitCode == 0, qPrintable(exported.all()));
        QVERIFY2(exported.err.contains(
                     QStringLiteral("left out 1 stored events that cannot belong to run %1 (first, event ").arg(id)),
            qPrintable(exported.all()));
        QVERIFY2(exported.err.contains(why), qPrintable(exported.all()));
        QVERIFY2(exported.out.contains(QStringLiteral("wrote 2 events")), qPrintable(exported.all()));
        const Run stats = loom({ QStringLiteral("trace"), QStringLiteral("stats"), trace });
        QVERIFY2(stats.exitCode == 0, qPrintable(stats.all()));
    }

    // A diverged loss (the stream's null) is stored as null and shown as "diverged", never as loss 0.
    // `runs list` names the cluster a run ran on; `runs show` of a run under srun lists each rank's log
    // (srun --error=<run folder>/logs/rank.%t.stderr), which it did not find before.
    void remoteRunListedWithClusterAndRankLogs()
    {
        const QString logs = m_dir.filePath(QStringLiteral("runs/srun-1/logs"));
        QVERIFY(QDir().mkpath(logs));
        for (const char* name : { "rank.0.stderr", "rank.1.stderr" }) {
            QFile f(logs + QLatin1Char('/') + QLatin1String(name));
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write("hello\n");
        }
        qint64 id = 0;
        {
            profiles::Store store(storePath());
            profiles::RunStore runs(store);
            id = runs.startRun(QStringLiteral("remote"),
                QStringLiteral(R"({"loom_layout": 1, "name": "remote", "model": "gpt-tiny", "cluster": "local",
                    "parallel": {"tp": 1, "pp": 1, "dp": 2, "micro_batch": 1, "global_batch": 2}})"),
                QStringLiteral("slurm-lab"),
                QStringLiteral("srun --mpi=pmix --error=%1/rank.%t.stderr loom-train --layout x").arg(logs));
            runs.finishRun(id, profiles::RunState::Cancelled, QStringLiteral("cancelled after step 3"));
        }
        const Run list = loom({ QStringLiteral("runs"), QStringLiteral("list") });
        QVERIFY2(list.out.contains(QStringLiteral("remote  on slurm-lab  ")), qPrintable(list.out));
        const Run show = loom({ QStringLiteral("runs"), QStringLiteral("show"), QString::number(id) });
        QVERIFY2(show.out.contains(QStringLiteral("log of rank.0 (stderr): %1/rank.0.stderr").arg(logs))
                && show.out.contains(QStringLiteral("log of rank.1 (stderr): %1/rank.1.stderr").arg(logs)),
            qPrintable(show.out));
    }

    void divergedLossIsNotZero()
    {
        QFile::remove(storePath());
        profiles::StepRecord good;
        good.step = 1;
        good.loss = 2.5;
        profiles::StepRecord diverged;
        diverged.step = 2;
        diverged.loss = std::numeric_limits<double>::quiet_NaN();
        const qint64 id = storeRun({}, { good, diverged });
        {
            profiles::Store store(storePath());
            const auto steps = profiles::RunStore(store).steps(id);
            QCOMPARE(int(steps.size()), 2);
            QCOMPARE(steps[0].loss, 2.5);
            QVERIFY(std::isnan(steps[1].loss));
        }
        const Run shown = loom({ QStringLiteral("runs"), QStringLiteral("show"), QString::number(id) });
        QVERIFY2(shown.exitCode == 0, qPrintable(shown.all()));
        QVERIFY2(shown.out.contains(QStringLiteral("step 1: loss 2.5,")), qPrintable(shown.out));
        QVERIFY2(shown.out.contains(QStringLiteral("step 2: loss diverged (null),")), qPrintable(shown.out));
        QCOMPARE(profiles::lossText(std::numeric_limits<double>::infinity()), QStringLiteral("diverged (null)"));
        QCOMPARE(profiles::lossText(2.25), QStringLiteral("2.2500"));
    }
};

QTEST_GUILESS_MAIN(TestHostileRuns)
#include "tst_hostile_runs.moc"
