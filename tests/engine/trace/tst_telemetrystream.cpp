// The telemetry stream: frames survive any chunking and interleaving with other output; garbage,
// truncation and damage are skipped and counted, never fatal; a real 4-rank run streams every step.
#include "engine/trace/TelemetryStream.h"

#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <nlohmann/json.hpp>

#include <random>
#include <set>

using namespace loom::trace;

namespace {

std::vector<TraceEvent> someEvents(int n, int seed)
{
    std::mt19937 rng(static_cast<unsigned>(seed));
    std::vector<TraceEvent> v;
    for (int i = 0; i < n; ++i) {
        TraceEvent e;
        e.rank = static_cast<std::int32_t>(rng() % 8);
        e.kind = static_cast<EventKind>(rng() % 14);
        e.lane = laneOf(e.kind);
        e.step = i / 10;
        e.startNs = static_cast<std::int64_t>(rng());
        e.endNs = e.startNs + 1000;
        e.bytes = rng();
        e.codec = i % 3 ? "" : "topk:0.01";
        v.push_back(e);
    }
    return v;
}

} // namespace

class TestTelemetryStream : public QObject {
    Q_OBJECT
private slots:
    void roundTripEvents()
    {
        const auto events = someEvents(50, 1);
        QVERIFY(decodeEvents(encodeEvents(events)) == events);
        QVERIFY_THROWS_EXCEPTION(std::runtime_error, decodeEvents("[[1,2]]"));
    }

    void fuzz()
    {
        // 200 frames mixed with other ranks' lines, a partial line without newline before a frame, garbage
        // bytes and a damaged copy of a frame; fed in random chunks. Every well-formed frame comes out, in order.
        std::mt19937 rng(20261129);
        std::string stream;
        std::vector<std::string> sent;
        for (int i = 0; i < 200; ++i) {
            const std::string payload
                = i % 2 ? encodeEvents(someEvents(1 + i % 7, i)) : "{\"step\": " + std::to_string(i) + "}";
            const std::string frame = encodeFrame(i % 2 ? "events" : "step", payload);
            switch (rng() % 5) {
            case 0:
                stream += "rank 3: step " + std::to_string(i) + " loss 2.5\n";
                break;
            case 1:
                stream += "partial output without newline ";
                break; // a frame then follows on the same line
            case 2: {
                std::string garbage(static_cast<std::size_t>(rng() % 300), '\0');
                for (auto& c : garbage)
                    c = static_cast<char>(rng() % 255 + 1);
                stream += garbage + "\n";
                break;
            }
            case 3: {
                std::string damaged = frame; // a flipped byte in the payload
                damaged[damaged.size() - 3] ^= 0x01;
                stream += damaged;
                break;
            }
            default:
                break;
            }
            stream += frame;
            sent.push_back(payload);
        }
        stream += encodeFrame("end", "{}").substr(0, 10); // truncated at the end of the stream
        for (int trial = 0; trial < 20; ++trial) {
            StreamReader reader;
            std::vector<std::string> got;
            std::size_t at = 0;
            while (at < stream.size()) {
                const std::size_t n = std::min<std::size_t>(stream.size() - at, 1 + rng() % (trial % 2 ? 7 : 4096));
                reader.feed(std::string_view(stream).substr(at, n));
                at += n;
                Frame f;
                while (reader.next(f))
                    got.push_back(f.payload);
            }
            QCOMPARE(got.size(), sent.size());
            QVERIFY(got == sent);
            QVERIFY(reader.damagedFrames() > 0);
            QVERIFY(reader.otherLines() > 0);
        }
    }

    void overlongGarbageIsDropped()
    {
        StreamReader reader;
        const std::string big(StreamReader::kMaxLine + 10, 'x');
        reader.feed(big);
        reader.feed("\n");
        reader.feed(encodeFrame("step", "{}"));
        Frame f;
        QVERIFY(reader.next(f));
        QCOMPARE(QString::fromStdString(f.type), QStringLiteral("step"));
        QVERIFY(reader.droppedBytes() >= big.size());
    }

    // A frame longer than the reader's limit is refused as it arrives (by its header when that declares too
    // much, else when the line passes the limit), remembered by type and size, and the next frame reads.
    void oversizedFrameRefused_data()
    {
        QTest::addColumn<bool>("honestHeader");
        QTest::newRow("header declares the size") << true;
        QTest::newRow("header declares 10 bytes") << false;
    }
    void oversizedFrameRefused()
    {
        QFETCH(bool, honestHeader);
        const std::size_t limit = 1 << 20;
        StreamReader reader(limit);
        std::string big = encodeFrame("events", std::string(2 * limit, 'x'));
        if (!honestHeader)
            big.replace(big.find(std::to_string(2 * limit)), std::to_string(2 * limit).size(), "10");
        big += encodeFrame("step", "{}");
        for (std::size_t at = 0; at < big.size(); at += 65536)
            reader.feed(std::string_view(big).substr(at, 65536));
        RefusedFrame refused;
        QVERIFY(reader.nextRefused(refused));
        QCOMPARE(QString::fromStdString(refused.type), QStringLiteral("events"));
        QCOMPARE(refused.declaredBytes, honestHeader ? std::uint64_t(2 * limit) : std::uint64_t(10));
        QVERIFY(!reader.nextRefused(refused));
        Frame f;
        QVERIFY(reader.next(f));
        QCOMPARE(QString::fromStdString(f.type), QStringLiteral("step"));
        QVERIFY(!reader.next(f));
        QVERIFY(reader.droppedBytes() >= 2 * limit);
    }

    void liveRun()
    {
        QTemporaryDir dir;
        const QString layout = dir.filePath("four.json");
        QFile file(layout);
        QVERIFY(file.open(QIODevice::WriteOnly));
        file.write(R"({"loom_layout": 1, "name": "four", "model": "gpt-tiny", "cluster": "local",
                       "parallel": {"tp": 1, "pp": 2, "dp": 2, "micro_batch": 2, "global_batch": 8}})");
        file.close();
        QProcess p;
        p.start(QStringLiteral(MPIEXEC),
            { "--allow-run-as-root", "--oversubscribe", "-np", "4", QStringLiteral(LOOM_TRAIN), "--layout", layout,
                "--steps", "4", "--stream" });
        StreamReader reader;
        std::vector<Frame> frames;
        while (p.state() != QProcess::NotRunning || p.bytesAvailable()) {
            p.waitForReadyRead(200);
            const QByteArray chunk = p.readAllStandardOutput();
            reader.feed(std::string_view(chunk.constData(), static_cast<std::size_t>(chunk.size())));
            Frame f;
            while (reader.next(f))
                frames.push_back(f);
            if (p.state() == QProcess::NotRunning && !p.bytesAvailable())
                break;
        }
        QCOMPARE(p.exitCode(), 0);
        // run, groups (once), 4 × (events, step), end.
        QVERIFY2(frames.size() == 1 + 1 + 4 * 2 + 1, qPrintable(QString::number(frames.size())));
        QCOMPARE(QString::fromStdString(frames.front().type), QStringLiteral("run"));
        QCOMPARE(QString::fromStdString(frames[1].type), QStringLiteral("groups"));
        const auto groups = nlohmann::json::parse(frames[1].payload);
        QVERIFY(groups.is_array() && !groups.empty());
        QVERIFY(groups[0].contains("kind") && groups[0].contains("ranks"));
        QCOMPARE(QString::fromStdString(frames.back().type), QStringLiteral("end"));
        int steps = 0;
        std::set<std::int32_t> ranks;
        for (const auto& f : frames) {
            if (f.type == "step") {
                ++steps;
                const auto step = nlohmann::json::parse(f.payload);
                QCOMPARE(int(step["memory_high_water_bytes"].size()), 4); // every rank's peak memory
                QVERIFY(step["memory_high_water_bytes"][3].get<double>() > 1e6);
            }
            if (f.type == "events")
                for (const auto& e : decodeEvents(f.payload))
                    ranks.insert(e.rank);
        }
        QCOMPARE(steps, 4);
        QCOMPARE(int(ranks.size()), 4);
        QVERIFY(reader.otherLines() > 0); // the human-readable progress lines share the stream
    }
};

QTEST_GUILESS_MAIN(TestTelemetryStream)
#include "tst_telemetrystream.moc"
