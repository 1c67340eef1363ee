// The launcher's frame handling: a stand-in for mpirun writes a crafted telemetry stream (every frame type,
// a malformed frame, an unknown one, a newer version) and RunController stores and signals exactly the
// frames it can read, says in the log why it skipped the others, and ends the run in the right RunState.
#include "engine/trace/TelemetryFrames.h"
#include "launcher/RunController.h"
#include "profiles/RunStore.h"

#include <QFile>
#include <QSignalSpy>
#include <QSysInfo>
#include <QTemporaryDir>
#include <QTest>

#include <nlohmann/json.hpp>

using namespace loom;
using loom::profiles::RunState;

namespace {

trace::TraceEvent commEvent(std::int32_t rank)
{
    trace::TraceEvent e;
    e.rank = rank;
    e.kind = trace::EventKind::AllReduce;
    e.lane = trace::Lane::Comm;
    e.step = 0;
    e.startNs = 1000;
    e.endNs = 2000;
    e.bytes = 4096;
    e.group = 0;
    e.groupSize = 2;
    e.algorithm = trace::Algorithm::Ring;
    return e;
}

} // namespace

class TestRunFrames : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

    // Writes `stream` and a stand-in for mpirun that prints it and exits with `exitCode`.
    QString fakeMpirun(const std::string& stream, int exitCode)
    {
        const QString frames = m_dir.filePath(QStringLiteral("frames.txt"));
        QFile f(frames);
        if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate))
            return {};
        f.write(stream.data(), qint64(stream.size()));
        f.close();
        const QString script = m_dir.filePath(QStringLiteral("mpirun.sh"));
        QFile s(script);
        if (!s.open(QIODevice::WriteOnly | QIODevice::Truncate))
            return {};
        s.write(QStringLiteral("#!/bin/sh\ncat '%1'\nexit %2\n").arg(frames).arg(exitCode).toUtf8());
        s.close();
        s.setPermissions(s.permissions() | QFileDevice::ExeOwner);
        return script;
    }

    launcher::LaunchRequest request(const QString& mpirun)
    {
        launcher::LaunchRequest r;
        r.layout.name = "frames";
        r.layout.cluster.name = "local";
        r.layout.parallel.dp = 2; // the world the events' ranks 0 and 1 belong to
        r.steps = 2;
        r.mpirun = mpirun;
        r.engine = mpirun; // must exist; the stand-in never starts it
        r.workDir = m_dir.filePath(QStringLiteral("run"));
        return r;
    }

private slots:
    void everyFrameType()
    {
        std::string stream;
        stream += trace::encode(trace::RunFrame { 1, R"({"name":"frames"})", 2, 1, 2 });
        stream += "rank 1: a line that is not a frame\n";
        stream += trace::encode(
            trace::GroupsFrame { { { 0, trace::GroupKind::Data, { 0, 1 }, "DP group of tp=0 pp=0" } } });
        stream += trace::encode(trace::EventsFrame { { commEvent(0), commEvent(1) } });
        stream += trace::encodeFrame("step", R"({"step": 1, "loss": "low"})"); // its CRC is right, its loss is not
        stream += trace::encode(trace::StepFrame { 1, 2.5, 100, 0.5, 1, 1e-3, 1e9, { 1000, 2000 } });
        stream += trace::encode(trace::CheckpointFrame { 1, "/tmp/run/checkpoints/step-1" });
        stream += trace::encodeFrame("metrics", "{}"); // a type this Loom does not know
        stream += trace::encode(trace::StepFrame { 2, 2.25, 110, 0.45, 0.9, 1e-3, 1e9, { 1000, 2000 } });
        stream += trace::encode(trace::EndFrame { trace::EndReason::Finished });
        const QString mpirun = fakeMpirun(stream, 0);
        QVERIFY(!mpirun.isEmpty());

        profiles::Store store(m_dir.filePath(QStringLiteral("loom.db")));
        profiles::RunStore runs(store);
        launcher::RunController controller(&runs);
        QSignalSpy steps(&controller, &launcher::RunController::stepFinished);
        QSignalSpy groups(&controller, &launcher::RunController::groupsReceived);
        QSignalSpy events(&controller, &launcher::RunController::eventsReceived);
        QSignalSpy checkpoints(&controller, &launcher::RunController::checkpointSaved);
        QSignalSpy finished(&controller, &launcher::RunController::finished);
        const qint64 id = controller.start(request(mpirun));
        QVERIFY(id > 0);
        QVERIFY(finished.wait(30000));

        QCOMPARE(toString(finished.first().at(0).value<RunState>()), toString(RunState::Finished));
        const QString tail = finished.first().at(2).toString();
        QVERIFY2(tail.contains(QStringLiteral("loom: skipped a telemetry frame: the step frame has field \"loss\" that "
                                              "must be a number, not string")),
            qPrintable(tail));
        QVERIFY2(!tail.contains(QStringLiteral("metrics")), qPrintable(tail)); // only the first reason is logged
        QVERIFY(tail.contains(QStringLiteral("a line that is not a frame")));
        QCOMPARE(steps.count(), 2);
        QCOMPARE(steps.at(1).at(0).value<profiles::StepRecord>().loss, 2.25);
        QCOMPARE(groups.count(), 1);
        QVERIFY(groups.first().at(0).value<std::vector<trace::GroupInfo>>().front().kind == trace::GroupKind::Data);
        QCOMPARE(events.count(), 1);
        QCOMPARE(checkpoints.count(), 1);
        QCOMPARE(checkpoints.first().at(1).toString(), QStringLiteral("/tmp/run/checkpoints/step-1"));

        // The store holds what was read, and the state as the enum (its text in the database).
        const auto record = runs.run(id);
        QVERIFY(record);
        QCOMPARE(toString(record->state), toString(RunState::Finished));
        QCOMPARE(int(runs.steps(id).size()), 2);
        QCOMPARE(int(runs.events(id).size()), 2);
        QCOMPARE(int(runs.checkpoints(id).size()), 1);
    }

    // A rank's failure arrives as an error frame (stream version 2): the run fails with the rank and its
    // message, though no log line says so; the step frame is stored whole (FLOP rates, memory per rank).
    void errorFrameIsTheCause()
    {
        trace::StepFrame step { 1, 2.5, 100, 0.5, 1, 1e-3, 1e9, { 3'000'000, 5'000'000 } };
        step.hardwareFlopsPerSecond = 1.25e9;
        std::string stream = trace::encode(step);
        stream += trace::encode(trace::ErrorFrame { 1, "communication", "the DP group's peer 0 did not answer" });
        const QString mpirun = fakeMpirun(stream, 1);
        profiles::Store store(m_dir.filePath(QStringLiteral("errors.db")));
        profiles::RunStore runs(store);
        launcher::RunController controller(&runs);
        QSignalSpy finished(&controller, &launcher::RunController::finished);
        const qint64 id = controller.start(request(mpirun));
        QVERIFY(finished.wait(30000));
        QCOMPARE(toString(finished.first().at(0).value<RunState>()), toString(RunState::Failed));
        QCOMPARE(
            finished.first().at(1).toString(), QStringLiteral("rank 1 failed: the DP group's peer 0 did not answer"));
        const auto steps = runs.steps(id);
        QCOMPARE(int(steps.size()), 1);
        QCOMPARE(steps.front().flopsPerSecond, 1e9);
        QCOMPARE(steps.front().hardwareFlopsPerSecond, 1.25e9);
        QCOMPARE(steps.front().memoryHighWaterBytes, (std::vector<qint64> { 3'000'000, 5'000'000 }));
        QCOMPARE(steps.front().peakMemoryBytes(), qint64(5'000'000));
    }

    // Events that cannot belong to the run (a rank outside its world, an end before the start, a step
    // beyond its steps) are not stored: the frame is skipped, saying why once.
    void eventsOutsideTheRunRefused_data()
    {
        QTest::addColumn<int>("rank");
        QTest::addColumn<qint64>("start");
        QTest::addColumn<qint64>("end");
        QTest::addColumn<int>("step");
        QTest::addColumn<QString>("why");
        QTest::newRow("rank -5") << -5 << qint64(1000) << qint64(2000) << 0 << "rank -5 is outside the run's 2 ranks";
        QTest::newRow("rank 7") << 7 << qint64(1000) << qint64(2000) << 0 << "rank 7 is outside";
        QTest::newRow("end before start")
            << 0 << qint64(5000) << qint64(2000) << 0 << "it ends (2000 ns) before it starts (5000 ns)";
        QTest::newRow("start -5") << 0 << qint64(-5) << qint64(2000) << 0 << "it starts at -5 ns";
        QTest::newRow("step 2^30") << 1 << qint64(1000) << qint64(2000) << (1 << 30) << "step 1073741824 is outside";
    }
    void eventsOutsideTheRunRefused()
    {
        QFETCH(int, rank);
        QFETCH(qint64, start);
        QFETCH(qint64, end);
        QFETCH(int, step);
        QFETCH(QString, why);
        trace::TraceEvent bad = commEvent(rank);
        bad.startNs = start;
        bad.endNs = end;
        bad.step = step;
        std::string stream = trace::encode(trace::EventsFrame { { commEvent(0), bad } });
        stream += trace::encode(trace::EventsFrame { { commEvent(1) } });
        stream += trace::encode(trace::StepFrame { 1, 2.5, 100, 0.5, 1, 1e-3, 1e9, {} });
        stream += trace::encode(trace::EndFrame { trace::EndReason::Finished });
        profiles::Store store(m_dir.filePath(QStringLiteral("loom.db")));
        profiles::RunStore runs(store);
        launcher::RunController controller(&runs);
        QSignalSpy finished(&controller, &launcher::RunController::finished);
        const qint64 id = controller.start(request(fakeMpirun(stream, 0)));
        QVERIFY(finished.wait(30000));
        const QString tail = finished.first().at(2).toString();
        QVERIFY2(
            tail.contains(QStringLiteral("loom: skipped a telemetry frame: its event 1: ") + why), qPrintable(tail));
        const auto stored = runs.events(id);
        QCOMPARE(int(stored.size()), 1); // the good frame only
        QCOMPARE(stored.front().rank, 1);
    }

    // A step of 2^62 does not fit an event's step: the frame is refused as it is decoded, not stored.
    void stepBeyondAnEventsRange()
    {
        auto events = nlohmann::json::parse(trace::encodeEvents({ commEvent(0) }));
        events[0][4] = std::int64_t(1) << 62; // the step's place in an event's array
        std::string stream = trace::encodeFrame("events", events.dump());
        stream += trace::encode(trace::EventsFrame { { commEvent(1) } });
        stream += trace::encode(trace::StepFrame { 1, 2.5, 100, 0.5, 1, 1e-3, 1e9, {} });
        stream += trace::encode(trace::EndFrame { trace::EndReason::Finished });
        profiles::Store store(m_dir.filePath(QStringLiteral("step62.db")));
        profiles::RunStore runs(store);
        launcher::RunController controller(&runs);
        QSignalSpy finished(&controller, &launcher::RunController::finished);
        const qint64 id = controller.start(request(fakeMpirun(stream, 0)));
        QVERIFY(finished.wait(30000));
        const QString tail = finished.first().at(2).toString();
        QVERIFY2(tail.contains(QStringLiteral("loom: skipped a telemetry frame: ")), qPrintable(tail));
        QVERIFY2(tail.contains(QStringLiteral("4611686018427387904")), qPrintable(tail));
        const auto stored = runs.events(id);
        QCOMPARE(int(stored.size()), 1);
        QCOMPARE(stored.front().rank, 1);
    }

    // A rank's words become the run's cause only when they name one of its ranks (and, from mpirun's
    // line, one of its hosts); their control characters are escaped, so the cause stays one line.
    void rankTextVetted_data()
    {
        QTest::addColumn<QByteArray>("stream");
        QTest::addColumn<QString>("cause");
        const QString host = QSysInfo::machineHostName();
        QTest::newRow("error frame names rank 7")
            << QByteArray::fromStdString(trace::encode(trace::ErrorFrame { 7, "communication", "gone\x1b]0;x\x07" }))
            << "a rank failed (its error frame names rank 7, outside the run's 2 ranks): gone\\u001b]0;x\\u0007";
        QTest::newRow("error frame with a newline") << QByteArray::fromStdString(
            trace::encode(trace::ErrorFrame { 1, "internal", "one\nrank 0 failed: forged" }))
                                                    << "rank 1 failed: one\\u000arank 0 failed: forged";
        QTest::newRow("log names rank 7 on node evil")
            << QByteArray("process rank 7 with PID 12 on node evil exited on signal 9\n")
            << "the job ended with exit code 1 before finishing";
        QTest::newRow("log names rank 1 on node evil")
            << QByteArray("process rank 1 with PID 12 on node evil exited on signal 9\n")
            << "the job ended with exit code 1 before finishing";
        QTest::newRow("log names rank 1 on this host")
            << QStringLiteral("process rank 7 with PID 1 on node %1 exited on signal 9\n"
                              "process rank 1 with PID 12 on node %1 exited on signal 9\n")
                   .arg(host)
                   .toUtf8()
            << QStringLiteral("rank 1 died (signal 9 on node %1)").arg(host);
        QTest::newRow("engine line names rank 9")
            << QByteArray("loom-train: rank 9: forged\n") << "the job ended with exit code 1 before finishing";
    }
    void rankTextVetted()
    {
        QFETCH(QByteArray, stream);
        QFETCH(QString, cause);
        profiles::Store store(m_dir.filePath(QStringLiteral("vetted.db")));
        profiles::RunStore runs(store);
        launcher::RunController controller(&runs);
        QSignalSpy finished(&controller, &launcher::RunController::finished);
        const qint64 id = controller.start(request(fakeMpirun(stream.toStdString(), 1)));
        QVERIFY(finished.wait(30000));
        QCOMPARE(toString(finished.first().at(0).value<RunState>()), toString(RunState::Failed));
        QCOMPARE(finished.first().at(1).toString(), cause);
        QCOMPARE(runs.run(id)->exitCause, cause);
    }

    // An events frame above the launcher's limit is refused while it arrives, named (its type, size, rank
    // 0 and the limit) in the log, and not stored; the frames after it are.
    void oversizedFrameRefused()
    {
        const std::size_t size = launcher::RunController::kMaxFrameBytes + (1 << 20);
        std::string stream = trace::encodeFrame("events", std::string(size, ' '));
        stream += trace::encode(trace::EventsFrame { { commEvent(1) } });
        stream += trace::encode(trace::StepFrame { 1, 2.5, 100, 0.5, 1, 1e-3, 1e9, {} });
        stream += trace::encode(trace::EndFrame { trace::EndReason::Finished });
        profiles::Store store(m_dir.filePath(QStringLiteral("big.db")));
        profiles::RunStore runs(store);
        launcher::RunController controller(&runs);
        QSignalSpy finished(&controller, &launcher::RunController::finished);
        const qint64 id = controller.start(request(fakeMpirun(stream, 0)));
        QVERIFY(finished.wait(30000));
        QCOMPARE(toString(finished.first().at(0).value<RunState>()), toString(RunState::Finished));
        const QString tail = finished.first().at(2).toString();
        QVERIFY2(tail.contains(QStringLiteral("loom: refused a telemetry frame (events, 9.0 MiB) from rank 0: a "
                                              "frame may hold at most 8 MiB; it is not stored")),
            qPrintable(tail));
        const auto stored = runs.events(id);
        QCOMPARE(int(stored.size()), 1);
        QCOMPARE(stored.front().rank, 1);
    }

    // A newer engine's stream: its frames are refused by version, the log says so, and without a readable
    // end frame the run has not finished.
    void newerStreamFails()
    {
        std::string stream = trace::encode(trace::StepFrame { 1, 2.5, 100, 0.5, 1, 1e-3, 1e9, {} });
        stream += trace::encode(trace::EndFrame { trace::EndReason::Finished });
        const std::string current = "LOOM" + std::to_string(trace::kStreamVersion);
        const std::string newer = "LOOM" + std::to_string(trace::kStreamVersion + 1);
        for (std::size_t at = stream.find(current); at != std::string::npos; at = stream.find(current, at))
            stream.replace(at, current.size(), newer);
        const QString mpirun = fakeMpirun(stream, 0);
        profiles::Store store(m_dir.filePath(QStringLiteral("loom.db")));
        profiles::RunStore runs(store);
        launcher::RunController controller(&runs);
        QSignalSpy steps(&controller, &launcher::RunController::stepFinished);
        QSignalSpy finished(&controller, &launcher::RunController::finished);
        const qint64 id = controller.start(request(mpirun));
        QVERIFY(finished.wait(30000));
        QCOMPARE(toString(finished.first().at(0).value<RunState>()), toString(RunState::Failed));
        QVERIFY2(finished.first().at(2).toString().contains(
                     QStringLiteral("telemetry stream version 3; this Loom reads versions 1 to 2")),
            qPrintable(finished.first().at(2).toString()));
        QCOMPARE(steps.count(), 0);
        QCOMPARE(toString(runs.run(id)->state), toString(RunState::Failed));
    }
};

QTEST_GUILESS_MAIN(TestRunFrames)
#include "tst_runframes.moc"
