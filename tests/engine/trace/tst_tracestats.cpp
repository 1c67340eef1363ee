// Metrics from events (hand-made timelines with known answers), the Chrome trace round trip, and a real
// 4-rank run's trace: one process per rank, every recorded event present.
#include "engine/trace/ChromeTrace.h"
#include "engine/trace/TraceStats.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QSet>
#include <QTemporaryDir>
#include <QTest>

#include <sstream>

using namespace loom::trace;

namespace {

TraceEvent ev(std::int32_t rank, EventKind kind, std::int64_t startUs, std::int64_t endUs, std::int32_t stage = -1,
    std::int32_t step = 1)
{
    TraceEvent e;
    e.rank = rank;
    e.kind = kind;
    e.lane = laneOf(kind);
    e.startNs = startUs * 1000;
    e.endNs = endUs * 1000;
    e.stage = stage;
    e.step = step;
    return e;
}

} // namespace

class TestTraceStats : public QObject {
    Q_OBJECT
private slots:
    void bubbleOverlapAndBandwidth()
    {
        // Two stages over a 100 us pipeline phase: stage 0 computes 0-60, stage 1 40-100 (40 % idle each).
        std::vector<TraceEvent> events = { ev(0, EventKind::Forward, 0, 30, 0), ev(0, EventKind::Backward, 30, 60, 0),
            ev(1, EventKind::Forward, 40, 70, 1), ev(1, EventKind::Backward, 70, 100, 1) };
        TraceEvent ar = ev(0, EventKind::AllReduce, 50, 90); // half of it under stage 0's compute
        ar.bytes = 4000;
        ar.groupSize = 4;
        events.push_back(ar);
        StatsContext c;
        c.pp = 2;
        c.microBatches = 4;
        c.tokensPerStep = 1000;
        const TraceStats s = computeStats(events, c);
        QCOMPARE(int(s.stages.size()), 2);
        QVERIFY(std::fabs(s.stages[0].bubbleFraction - 0.4) < 1e-9);
        QVERIFY(std::fabs(s.stages[1].bubbleFraction - 0.4) < 1e-9);
        QVERIFY(std::fabs(s.stages[0].bubbleTheory - 1.0 / 5.0) < 1e-12); // (p-1)/(m+p-1)
        QVERIFY(std::fabs(s.overlap - 0.25) < 1e-9); // 10 of 40 us under compute
        QCOMPARE(int(s.collectives.size()), 1);
        QVERIFY(std::fabs(s.collectives[0].algbwGBs - 4000.0 / 40e-6 / 1e9) < 1e-9);
        QVERIFY(std::fabs(s.collectives[0].busbwGBs - s.collectives[0].algbwGBs * 1.5) < 1e-9); // 2(n-1)/n, n = 4
        QVERIFY(std::fabs(s.tokensPerSecond - 1000 / 100e-6) < 1e-3);
    }

    void chromeRoundTrip()
    {
        TraceEvent e = ev(3, EventKind::Send, 10, 25, 2, 7);
        e.bytes = e.wireBytes = 1234;
        e.peer = 4;
        e.microBatch = 5;
        e.chunk = 1;
        e.groupSize = 2;
        e.algorithm = Algorithm::Ring;
        e.codec = "int8";
        std::ostringstream out;
        writeChromeTrace(out, { e }, {}, "{\"x\": 1}");
        std::string other;
        const auto back = readChromeTrace(out.str(), &other);
        QCOMPARE(int(back.size()), 1);
        QVERIFY(back[0] == e);
        QCOMPARE(QString::fromStdString(other), QStringLiteral("{\"x\":1}"));
        QVERIFY_THROWS_EXCEPTION(std::runtime_error, readChromeTrace("{\"no\": 1}"));
        QVERIFY_THROWS_EXCEPTION(std::runtime_error, readChromeTrace("garbage"));
    }

    void fourRankRunTrace()
    {
        QTemporaryDir dir;
        const QString layout = dir.filePath("four.json"), trace = dir.filePath("trace.json");
        QFile f(layout);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(R"({"loom_layout": 1, "name": "four", "model": "gpt-tiny", "cluster": "local",
                    "parallel": {"tp": 2, "pp": 2, "dp": 1, "micro_batch": 2, "global_batch": 8}})");
        f.close();
        QProcess p;
        p.setProcessChannelMode(QProcess::MergedChannels);
        p.start(QStringLiteral(MPIEXEC),
            { "--allow-run-as-root", "--oversubscribe", "-np", "4", QStringLiteral(LOOM_TRAIN), "--layout", layout,
                "--steps", "27", "--trace-out", trace });
        QVERIFY(p.waitForFinished(120000));
        QCOMPARE(p.exitCode(), 0);
        QFile t(trace);
        QVERIFY(t.open(QIODevice::ReadOnly));
        const QJsonObject doc = QJsonDocument::fromJson(t.readAll()).object();
        const QJsonArray perRank = doc.value("otherData").toObject().value("events_per_rank").toArray();
        QCOMPARE(perRank.size(), 4);
        QMap<int, int> counted;
        for (const auto& v : doc.value("traceEvents").toArray())
            if (v.toObject().value("ph").toString() == QLatin1String("X"))
                ++counted[v.toObject().value("pid").toInt()];
        QCOMPARE(counted.size(), 4); // one process per rank
        for (int r = 0; r < 4; ++r)
            QCOMPARE(counted.value(r), perRank[r].toInt());
        QVERIFY(doc.value("otherData").toObject().value("clock_error_ns").toDouble() < 1e6);
        // 27 steps cross one clock refresh (every 25): the events of all steps are still there, and every
        // rank's memory high-water mark is recorded.
        QSet<int> steps;
        for (const auto& v : doc.value("traceEvents").toArray())
            steps.insert(v.toObject().value("args").toObject().value("step").toInt(-1));
        QVERIFY(steps.contains(0) && steps.contains(26));
        const QJsonArray memory = doc.value("otherData").toObject().value("memory_high_water_bytes").toArray();
        QCOMPARE(memory.size(), 4);
        for (const auto& m : memory)
            QVERIFY(m.toDouble() > 1e6);
    }
};

QTEST_GUILESS_MAIN(TestTraceStats)
#include "tst_tracestats.moc"
