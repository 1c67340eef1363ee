// RunController under sbatch with stand-ins for Slurm's clients (sbatch, scontrol and scancel: scripts first on
// PATH), so it runs everywhere: the submission runs in the background (the event loop turns while sbatch has
// not answered), a cancel during it kills sbatch and ends the run with nothing left, and a job whose output has
// begun is signalled to save (scancel --batch --signal=USR1) even when scontrol has not said RUNNING yet.
#include "SlurmRequest.h"
#include "launcher/RunController.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <cerrno>
#include <csignal>

using loom::launcher::RunController;
using loom::profiles::RunState;
using loom::profiles::toString;

namespace {

bool writeFile(const QString& path, const QByteArray& text)
{
    QFile f(path);
    return f.open(QIODevice::WriteOnly | QIODevice::Truncate) && f.write(text) == text.size();
}

QByteArray readFile(const QString& path)
{
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

} // namespace

class TestLauncherSbatch : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    QByteArray m_path;
    int m_run = 0;

    QString file(const QString& name) const { return m_dir.filePath(name); }

    void writeTool(const QString& name, const QByteArray& body)
    {
        const QString path = file(QStringLiteral("bin/") + name);
        QVERIFY(writeFile(path, "#!/bin/bash\n" + body));
        QVERIFY(QFile::setPermissions(path, QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ExeOwner));
    }

    loom::launcher::LaunchRequest request()
    {
        // The engine is never started here: the job would run it.
        loom::launcher::LaunchRequest r = loomtest::slurmRequest("fake", 2, QStringLiteral("/nonexistent/loom-train"));
        r.steps = 3;
        r.cancelGraceSeconds = 30;
        r.workDir = file(QStringLiteral("runs/%1").arg(++m_run));
        return r;
    }

    static bool gone(const QByteArray& pidText)
    {
        bool ok = false;
        const pid_t pid = static_cast<pid_t>(pidText.trimmed().toLongLong(&ok));
        return ok && pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH;
    }

private slots:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        QVERIFY(QDir().mkpath(file(QStringLiteral("bin"))));
        const QByteArray dir = m_dir.path().toUtf8();
        // sbatch notes its pid, waits until the test lets it answer, then (when asked) starts the job's output.
        writeTool(QStringLiteral("sbatch"),
            "echo $$ > '" + dir
                + "/sbatch.pid'\n"
                  "out=; prev=; for a in \"$@\"; do [ \"$prev\" = --output ] && out=$a; prev=$a; done\n"
                  "while [ ! -e '"
                + dir
                + "/go' ]; do sleep 0.05; done\n"
                  "[ -e '"
                + dir
                + "/refuse' ] && { echo 'sbatch: error: invalid partition specified: loomtest' >&2; exit 1; }\n"
                  "[ -e '"
                + dir
                + "/job-writes' ] && echo 'the job began' > \"$out\"\n"
                  "echo '42;loomtest'\n");
        writeTool(QStringLiteral("scontrol"), "cat '" + dir + "/scontrol.answer'\n");
        writeTool(QStringLiteral("scancel"), "echo \"$*\" >> '" + dir + "/scancel.log'\n");
        m_path = qgetenv("PATH");
        qputenv("PATH", file(QStringLiteral("bin")).toUtf8() + ':' + m_path);
    }

    void cleanupTestCase() { qputenv("PATH", m_path); }

    void init()
    {
        for (const char* name : { "go", "job-writes", "refuse", "sbatch.pid", "scancel.log" })
            QFile::remove(file(QString::fromLatin1(name)));
        QVERIFY(writeFile(file(QStringLiteral("scontrol.answer")),
            "JobId=42 JobName=loom-fake JobState=PENDING Reason=Priority ExitCode=0:0\n"));
    }

    // While sbatch has not answered the window's timers tick, the run is active and says it is submitting; once
    // sbatch answers the job is followed to its end (scontrol: FAILED).
    void submitDoesNotBlock()
    {
        RunController controller(nullptr);
        QSignalSpy states(&controller, &RunController::jobStateChanged);
        QSignalSpy finished(&controller, &RunController::finished);
        int ticks = 0;
        QTimer tick;
        tick.setInterval(20);
        connect(&tick, &QTimer::timeout, this, [&ticks] { ++ticks; });
        tick.start();
        QElapsedTimer t;
        t.start();
        controller.start(request());
        QVERIFY2(t.elapsed() < 5000, "start() waited for sbatch");
        QVERIFY(controller.isActive() && controller.isSubmitting() && controller.jobId().isEmpty());
        QVERIFY(!states.isEmpty());
        QCOMPARE(states.first().at(1).toString(), QStringLiteral("SUBMITTING"));
        QTRY_VERIFY_WITH_TIMEOUT(QFile::exists(file(QStringLiteral("sbatch.pid"))), 20000);
        const int before = ticks;
        QTRY_VERIFY_WITH_TIMEOUT(ticks >= before + 5, 20000); // the event loop turns while sbatch waits
        QVERIFY(controller.isSubmitting() && finished.isEmpty());
        QVERIFY(writeFile(file(QStringLiteral("go")), ""));
        QTRY_VERIFY_WITH_TIMEOUT(controller.jobId() == QLatin1String("42"), 20000);
        QVERIFY(!controller.isSubmitting());
        QTRY_VERIFY_WITH_TIMEOUT(states.last().at(1).toString() == QLatin1String("PENDING"), 20000);
        QCOMPARE(states.at(1).at(1).toString(), QStringLiteral("SUBMITTED"));
        QCOMPARE(states.at(1).at(0).toString(), QStringLiteral("42"));
        QVERIFY(writeFile(
            file(QStringLiteral("scontrol.answer")), "JobId=42 JobState=FAILED Reason=NonZeroExitCode ExitCode=1:0\n"));
        QVERIFY(finished.wait(20000));
        QCOMPARE(toString(finished.first().at(0).value<RunState>()), toString(RunState::Failed));
        QVERIFY2(finished.first().at(1).toString().contains(QLatin1String("Slurm job 42 ended FAILED (exit code 1")),
            qPrintable(finished.first().at(1).toString()));
    }

    // A cancel while sbatch runs kills it: the run ends cancelled at once, nothing was queued, no process is left.
    void cancelWhileSubmitting()
    {
        RunController controller(nullptr);
        QSignalSpy finished(&controller, &RunController::finished);
        controller.start(request());
        QTRY_VERIFY_WITH_TIMEOUT(QFile::exists(file(QStringLiteral("sbatch.pid"))), 20000);
        QTRY_VERIFY_WITH_TIMEOUT(!readFile(file(QStringLiteral("sbatch.pid"))).trimmed().isEmpty(), 20000);
        QVERIFY(controller.isSubmitting());
        controller.cancel();
        QVERIFY(controller.isActive()); // until sbatch is gone
        QVERIFY(finished.wait(20000));
        QCOMPARE(toString(finished.first().at(0).value<RunState>()), toString(RunState::Cancelled));
        QVERIFY2(finished.first().at(1).toString().contains(QLatin1String("while sbatch was submitting")),
            qPrintable(finished.first().at(1).toString()));
        QVERIFY(!controller.isActive() && !controller.isSubmitting() && controller.jobId().isEmpty());
        QVERIFY2(gone(readFile(file(QStringLiteral("sbatch.pid")))), "sbatch is still running");
        QVERIFY(!QFile::exists(file(QStringLiteral("scancel.log")))); // no job to remove
    }

    // What sbatch says when it refuses the job, and that it is missing, end the run as they did when it blocked.
    void refusedOrMissingSbatchFails()
    {
        QVERIFY(writeFile(file(QStringLiteral("refuse")), ""));
        QVERIFY(writeFile(file(QStringLiteral("go")), ""));
        {
            RunController controller(nullptr);
            QSignalSpy finished(&controller, &RunController::finished);
            controller.start(request());
            QVERIFY(finished.wait(20000));
            QCOMPARE(finished.first().at(1).toString(),
                QStringLiteral("sbatch refused the job: sbatch: error: invalid partition specified: loomtest"));
            QVERIFY(controller.jobId().isEmpty() && !controller.isSubmitting());
        }
        const QByteArray path = qgetenv("PATH");
        qputenv("PATH", file(QStringLiteral("runs")).toUtf8()); // no sbatch there
        RunController controller(nullptr);
        QSignalSpy finished(&controller, &RunController::finished);
        controller.start(request());
        qputenv("PATH", path);
        QTRY_VERIFY_WITH_TIMEOUT(!finished.isEmpty(), 20000);
        QCOMPARE(toString(finished.first().at(0).value<RunState>()), toString(RunState::Failed));
        QVERIFY2(finished.first().at(1).toString().startsWith(QLatin1String("sbatch could not be started (")),
            qPrintable(finished.first().at(1).toString()));
        QVERIFY(!controller.isActive() && !controller.isSubmitting());
    }

    // The job's output has begun while every scontrol answer still said PENDING (a busy controller, answers
    // late): the job runs, so a cancel asks the ranks to save (USR1 to the batch step) instead of removing a
    // "pending" job, which would lose the checkpoint.
    void cancelOnceOutputBeganSignalsTheJob()
    {
        QVERIFY(writeFile(file(QStringLiteral("job-writes")), ""));
        QVERIFY(writeFile(file(QStringLiteral("go")), ""));
        RunController controller(nullptr);
        QSignalSpy states(&controller, &RunController::jobStateChanged);
        QSignalSpy finished(&controller, &RunController::finished);
        const loom::launcher::LaunchRequest r = request();
        controller.start(r);
        // Each poll reads the output file before it asks scontrol, and the file was written before sbatch answered.
        QTRY_VERIFY_WITH_TIMEOUT(states.last().at(1).toString() == QLatin1String("PENDING"), 20000);
        QVERIFY(QFile::exists(QDir(r.workDir).filePath(QStringLiteral("job.out"))));
        controller.cancel();
        QTRY_VERIFY_WITH_TIMEOUT(readFile(file(QStringLiteral("scancel.log"))).contains("42"), 20000);
        QCOMPARE(readFile(file(QStringLiteral("scancel.log"))).trimmed(), QByteArray("--batch --signal=USR1 42"));
        QVERIFY(finished.isEmpty()); // the ranks save and stop; scontrol then says the job ended
        QVERIFY(writeFile(
            file(QStringLiteral("scontrol.answer")), "JobId=42 JobState=CANCELLED Reason=None ExitCode=0:15\n"));
        QVERIFY(finished.wait(20000));
        QCOMPARE(toString(finished.first().at(0).value<RunState>()), toString(RunState::Cancelled));
    }
};

QTEST_GUILESS_MAIN(TestLauncherSbatch)
#include "tst_launcher_sbatch.moc"
