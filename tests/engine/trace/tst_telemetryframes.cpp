// Typed telemetry frames: every frame type survives encode → StreamReader → decode unchanged; malformed,
// too deep, too big and newer-version frames are refused with a message naming the frame and the field.
#include "engine/trace/TelemetryFrames.h"

#include <QTest>

#include <cmath>

using namespace loom::trace;

Q_DECLARE_METATYPE(loom::trace::TelemetryFrame)

namespace {

TraceEvent sampleEvent(std::int32_t rank, EventKind kind, std::int32_t step)
{
    TraceEvent e;
    e.rank = rank;
    e.kind = kind;
    e.lane = laneOf(kind);
    e.step = step;
    e.microBatch = 1;
    e.stage = rank % 2;
    e.startNs = 1'000'000'000'123 + rank;
    e.endNs = e.startNs + 4567;
    if (e.lane == Lane::Comm) {
        e.bytes = 1ull << 33; // past 32 bits
        e.wireBytes = 1ull << 31;
        e.group = 2;
        e.groupSize = 4;
        e.algorithm = Algorithm::ChunkedRing;
        e.codec = "topk:0.01";
    }
    return e;
}

TelemetryFrame decodeLine(const std::string& line)
{
    StreamReader reader;
    reader.feed(line);
    Frame frame;
    if (!reader.next(frame))
        throw std::runtime_error("the reader found no frame in the line");
    return decode(frame);
}

} // namespace

class TestTelemetryFrames : public QObject {
    Q_OBJECT
private slots:
    void roundTrip_data()
    {
        QTest::addColumn<TelemetryFrame>("frame");
        QTest::addColumn<QString>("type");
        QTest::newRow("run") << TelemetryFrame(
            RunFrame { 1, R"({"loom_layout":1,"name":"four","parallel":{"tp":1,"pp":2}})", 4, 1, 20 })
                             << "run";
        QTest::newRow("run resumed") << TelemetryFrame(RunFrame { 1, "{}", 8, 11, 30 }) << "run";
        QTest::newRow("groups") << TelemetryFrame(GroupsFrame { { { 0, GroupKind::Tensor, { 0, 1 },
                                                                      "TP group of pp=0 dp=0" },
            { 1, GroupKind::Data, { 0, 2 }, "DP group of tp=0 pp=0" }, { 2, GroupKind::World, { 0, 1, 2, 3 }, "world" },
            { 3, GroupKind::CrossNode, { 1, 3 }, "cross-node leaders" } } })
                                << "groups";
        QTest::newRow("groups empty") << TelemetryFrame(GroupsFrame {}) << "groups";
        QTest::newRow("events") << TelemetryFrame(
            EventsFrame { { sampleEvent(0, EventKind::Forward, 3), sampleEvent(1, EventKind::AllReduce, 3),
                sampleEvent(3, EventKind::Recv, 3), sampleEvent(2, EventKind::Wait, 3) } })
                                << "events";
        QTest::newRow("events empty") << TelemetryFrame(EventsFrame {}) << "events";
        QTest::newRow("step") << TelemetryFrame(
            StepFrame { 7, 2.5, 1234.5, 0.125, 0.75, 3e-4, 9.5e9, { 31'000'000, 1ll << 40 } })
                              << "step";
        QTest::newRow("step without memory") << TelemetryFrame(StepFrame { 1, 10.25, 0, 0, 0, 0, 0, {} }) << "step";
        QTest::newRow("checkpoint") << TelemetryFrame(CheckpointFrame { 40, "/runs/7/checkpoints/step-40" })
                                    << "checkpoint";
        QTest::newRow("checkpoint quoted path")
            << TelemetryFrame(CheckpointFrame { 2, "/tmp/a \"b\"\n\\c/é" }) << "checkpoint";
        QTest::newRow("end finished") << TelemetryFrame(EndFrame { EndReason::Finished }) << "end";
        QTest::newRow("end sigterm") << TelemetryFrame(EndFrame { EndReason::Sigterm }) << "end";
        QTest::newRow("error") << TelemetryFrame(ErrorFrame { 3, "communication", "peer 1 did not answer in 60 s" })
                               << "error";
    }

    void roundTrip()
    {
        QFETCH(TelemetryFrame, frame);
        QFETCH(QString, type);
        QCOMPARE(QString::fromLatin1(toString(typeOf(frame)).data()), type);
        const std::string line = encode(frame);
        QVERIFY(line.starts_with("\x1eLOOM2 " + type.toStdString() + " "));
        QVERIFY(line.ends_with('\n'));
        QVERIFY(decodeLine(line) == frame);
        // The payload is the one encodeFrame wraps.
        QVERIFY(decode(type.toStdString(), payloadOf(frame)) == frame);
    }

    // The writer functions loom-train calls keep their text: a typed decoder reads what they wrote.
    void compatibleWriters()
    {
        const std::vector<TraceEvent> events { sampleEvent(0, EventKind::Backward, 1),
            sampleEvent(1, EventKind::AllGather, 1) };
        QCOMPARE(encodeEvents(events), payloadOf(EventsFrame { events }));
        QVERIFY(decodeEvents(encodeEvents(events)) == events);
        const auto step = decodeLine(encodeFrame("step",
            R"({"step": 3, "loss": 4.5, "tokens_per_s": 100.0, "step_time_s": 0.5, )"
            R"("grad_norm": 1.0, "lr": 0.001, "flops_per_s": 2e9, "memory_high_water_bytes": [100, 200]})"));
        QVERIFY((std::get<StepFrame>(step) == StepFrame { 3, 4.5, 100, 0.5, 1, 0.001, 2e9, { 100, 200 } }));
        const auto end = decodeLine(encodeFrame("end", "{\"reason\": \"sigterm\"}"));
        QVERIFY(std::get<EndFrame>(end).reason == EndReason::Sigterm);
        // A diverged loss is written as null (JSON has no NaN) and read back as NaN.
        QVERIFY(
            std::isnan(std::get<StepFrame>(decode("step", payloadOf(StepFrame { 1, NAN, 0, 0, 0, 0, 0, {} }))).loss));
        // Fields added within version 1 are optional: an older engine's step frame still reads.
        QCOMPARE(std::get<StepFrame>(decode("step", R"({"step": 2, "loss": 1.5})")).flopsPerSecond, 0.0);
        // A run frame without first_step starts at step 1.
        QCOMPARE(
            std::get<RunFrame>(decode("run", R"({"loom_stream": 1, "layout": {}, "ranks": 2, "steps": 5})")).firstStep,
            1);
    }

    void malformed_data()
    {
        QTest::addColumn<QString>("type");
        QTest::addColumn<QString>("payload");
        QTest::addColumn<QString>("message");
        QTest::newRow("unknown type") << "metrics"
                                      << "{}"
                                      << R"(unknown type "metrics")";
        QTest::newRow("not json") << "step"
                                  << R"({"step": 1,)"
                                  << "the step frame is not valid JSON";
        QTest::newRow("not an object") << "step"
                                       << "[1, 2]"
                                       << "the step frame has a payload that must be a JSON object, not array";
        QTest::newRow("missing field") << "step"
                                       << R"({"loss": 1.0})"
                                       << R"(the step frame lacks its field "step")";
        QTest::newRow("wrong type") << "step"
                                    << R"({"step": 1, "loss": "low"})"
                                    << R"(field "loss" that must be a number, not string)";
        QTest::newRow("negative step") << "checkpoint"
                                       << R"({"step": -4, "path": "/x"})"
                                       << R"(field "step" = -4; it must be in [0, )";
        QTest::newRow("float step") << "step"
                                    << R"({"step": 1.5, "loss": 1})"
                                    << R"(field "step" that must be an integer, not number)";
        QTest::newRow("path not text") << "checkpoint"
                                       << R"({"step": 4, "path": 7})"
                                       << R"(field "path" that must be a string)";
        QTest::newRow("long path") << "checkpoint" << QString(R"({"step": 4, "path": "%1"})").arg(QString(5000, 'a'))
                                   << R"(field "path" longer than 4096 bytes)";
        QTest::newRow("end reason") << "end"
                                    << R"({"reason": "tired"})"
                                    << R"(field "reason" = "tired"; it must be "finished" or "sigterm")";
        QTest::newRow("newer stream")
            << "run"
            << R"({"loom_stream": 3, "layout": {}, "ranks": 2, "steps": 5})"
            << "says telemetry stream version 3; this Loom reads versions up to 2: update Loom";
        QTest::newRow("layout not object") << "run"
                                           << R"({"loom_stream": 1, "layout": "tiny.json", "ranks": 2, "steps": 5})"
                                           << R"(field "layout" that must be a JSON object (the layout), not string)";
        QTest::newRow("zero ranks") << "run"
                                    << R"({"loom_stream": 1, "layout": {}, "ranks": 0, "steps": 5})"
                                    << R"(field "ranks" = 0)";
        QTest::newRow("groups not array") << "groups"
                                          << "{}"
                                          << "the groups frame has a payload that must be an array, not object";
        QTest::newRow("group not object") << "groups"
                                          << "[3]"
                                          << "has a group 0 that must be a JSON object, not number";
        QTest::newRow("group rank") << "groups"
                                    << R"([{"id": 0, "kind": "TP", "ranks": [0, -1]}])"
                                    << "a rank of group 0";
        QTest::newRow("group ranks missing") << "groups"
                                             << R"([{"id": 0, "kind": "TP"}])"
                                             << R"(lacks its field "ranks")";
        QTest::newRow("event shape") << "events"
                                     << "[[1,2]]"
                                     << "event 0 that must be an array of 17 values, not 2 values";
        QTest::newRow("event kind") << "events"
                                    << R"([[0,0,200,0,1,0,0,-1,10,20,0,0,-1,0,-1,0,""]])"
                                    << "event 0 of unknown kind 200";
        QTest::newRow("event lane") << "events"
                                    << R"([[0,7,0,0,1,0,0,-1,10,20,0,0,-1,0,-1,0,""]])"
                                    << R"(event 0's field "lane" = 7; it must be in [0, 1])";
        QTest::newRow("event bytes") << "events"
                                     << R"([[0,1,7,0,1,0,0,-1,10,20,-5,0,-1,0,-1,0,""]])"
                                     << R"(event 0's field "bytes" that must be a non-negative integer)";
        QTest::newRow("event rank range")
            << "events"
            << R"([[4294967296,1,7,0,1,0,0,-1,10,20,5,0,-1,0,-1,0,""]])"
            << R"(event 0's field "rank" = 4294967296; it must be in [-2147483648, 2147483647])";
        QTest::newRow("event algorithm") << "events"
                                         << R"([[0,1,7,0,1,0,0,-1,10,20,5,5,0,2,-1,99,""]])"
                                         << "event 0 with unknown algorithm 99";
        QTest::newRow("event codec") << "events"
                                     << R"([[0,1,7,0,1,0,0,-1,10,20,5,5,0,2,-1,1,null]])"
                                     << R"(event 0's field "codec" that must be a string, not null)";
        QTest::newRow("too deep") << "step" << QString(100, '[') + QString(100, ']')
                                  << "is nested deeper than 64 levels";
        QTest::newRow("deep brackets in a string are text")
            << "checkpoint" << QString(R"({"step": 1, "path": "%1", "x": [)").arg(QString(100, '['))
            << "the checkpoint frame is not valid JSON";
    }

    void malformed()
    {
        QFETCH(QString, type);
        QFETCH(QString, payload);
        QFETCH(QString, message);
        try {
            decode(type.toStdString(), payload.toStdString());
            QFAIL("the frame was accepted");
        } catch (const FrameError& e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(message), e.what());
        }
    }

    // Version 2 added the error frame; an engine of version 1 (frames "LOOM1", run frame "loom_stream": 1,
    // step frames without hardware_flops_per_s) still reads.
    void versionOneStillReads()
    {
        std::string line = encodeFrame("step", R"({"step": 3, "loss": 1.5, "flops_per_s": 2e9})");
        line.replace(line.find("LOOM2"), 5, "LOOM1");
        StreamReader reader;
        reader.feed(line);
        reader.feed(
            encodeFrame("run", R"({"loom_stream": 1, "layout": {}, "ranks": 2, "steps": 5})").replace(1, 5, "LOOM1"));
        Frame frame;
        QVERIFY(reader.next(frame));
        QCOMPARE(frame.version, 1);
        const auto step = std::get<StepFrame>(decode(frame));
        QCOMPARE(step.step, std::int64_t(3));
        QCOMPARE(step.flopsPerSecond, 2e9);
        QCOMPARE(step.hardwareFlopsPerSecond, 0.0);
        QVERIFY(reader.next(frame));
        QCOMPARE(std::get<RunFrame>(decode(frame)).streamVersion, 1);
        try {
            decode("error", R"({"rank": 1, "kind": "bored", "message": "x"})");
            QFAIL("an error frame of unknown kind was accepted");
        } catch (const FrameError& e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(R"(field "kind" = "bored")"), e.what());
        }
    }

    // The envelope's version: a newer stream's frames are found (not counted as damage) and refused by name.
    void newerVersion()
    {
        std::string line = encodeFrame("step", R"({"step": 1, "loss": 1})");
        line.replace(line.find("LOOM2"), 5, "LOOM3");
        StreamReader reader;
        reader.feed(line);
        Frame frame;
        QVERIFY(reader.next(frame));
        QCOMPARE(frame.version, 3);
        QCOMPARE(reader.damagedFrames(), std::uint64_t(0));
        try {
            decode(frame);
            QFAIL("a version 3 frame was accepted");
        } catch (const FrameError& e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(
                         "a step frame of telemetry stream version 3; this Loom reads versions 1 to 2"),
                e.what());
        }
        // "LOOM" without a number, or with junk after it, is damage.
        for (const char* bad : { "LOOM", "LOOM1x", "LOOM0" }) {
            std::string damaged = encodeFrame("end", "{}");
            damaged.replace(damaged.find("LOOM2"), 5, bad);
            StreamReader r;
            r.feed(damaged);
            QVERIFY2(!r.next(frame), bad);
            QCOMPARE(r.damagedFrames(), std::uint64_t(1));
        }
    }
};

QTEST_GUILESS_MAIN(TestTelemetryFrames)
#include "tst_telemetryframes.moc"
