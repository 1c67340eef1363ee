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

#include <tuple>

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

    void vShapedRanksKeepTheirStage()
    {
        // ZB-V at pp 2: rank 0 runs virtual stages 0 and 3, rank 1 stages 1 and 2. Each rank is its pipeline
        // rank's stage whatever chunk it ends on (3 mod 2 is rank 1's and 2 mod 2 rank 0's): rank 0 computes
        // 60 of 100 us (40 % idle), rank 1 80 (20 %).
        const std::vector<TraceEvent> events
            = { ev(0, EventKind::Forward, 0, 30, 0), ev(1, EventKind::Forward, 0, 40, 1),
                  ev(1, EventKind::Backward, 40, 80, 2), ev(0, EventKind::Backward, 70, 100, 3) };
        StatsContext c;
        c.pp = 2;
        c.microBatches = 1;
        const TraceStats s = computeStats(events, c);
        QCOMPARE(int(s.stages.size()), 2);
        QCOMPARE(s.stages[0].stage, 0);
        QVERIFY(std::fabs(s.stages[0].bubbleFraction - 0.4) < 1e-9);
        QCOMPARE(s.stages[1].stage, 1);
        QVERIFY(std::fabs(s.stages[1].bubbleFraction - 0.2) < 1e-9);
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
        // The clocks' alignment, checked by causality rather than by a time budget (a busy machine may take
        // milliseconds to answer a ping): stage 1 starts a micro-batch's forward only after stage 0 has finished
        // it and sent its activations, so on the aligned clock no stage-1 forward starts before the stage-0
        // forward of the same step and micro-batch ended on its peer (the rank of the same TP index: ranks are
        // placed tp fastest, so rank 2 receives from rank 0 and rank 3 from rank 1), give or take the error the
        // alignment states.
        const double errorUs = doc.value("otherData").toObject().value("clock_error_ns").toDouble(-1) / 1e3;
        QVERIFY(errorUs >= 0);
        QMap<std::tuple<int, int, int>, double> stage0End, stage1Start; // (step, micro-batch, tp index) → µs
        for (const auto& v : doc.value("traceEvents").toArray()) {
            const QJsonObject e = v.toObject(), a = e.value("args").toObject();
            if (e.value("ph").toString() != QLatin1String("X") || !e.value("name").toString().startsWith("forward"))
                continue;
            const std::tuple<int, int, int> key { a.value("step").toInt(), a.value("micro_batch").toInt(),
                e.value("pid").toInt() % 2 };
            const double ts = e.value("ts").toDouble(), end = ts + e.value("dur").toDouble();
            if (a.value("stage").toInt() == 0)
                stage0End[key] = end;
            else if (a.value("stage").toInt() == 1)
                stage1Start[key] = ts;
        }
        QCOMPARE(stage1Start.size(), 27 * 4 * 2); // 27 steps of 4 micro-batches on 2 TP ranks
        for (auto it = stage1Start.cbegin(); it != stage1Start.cend(); ++it) {
            QVERIFY(stage0End.contains(it.key()));
            QVERIFY2(it.value() >= stage0End.value(it.key()) - errorUs - 1.0, // 1 µs: the trace's rounding
                qPrintable(QStringLiteral("step %1 micro-batch %2: stage 1 starts at %3 µs, stage 0 ends at %4 µs "
                                          "(clock error %5 µs)")
                               .arg(std::get<0>(it.key()))
                               .arg(std::get<1>(it.key()))
                               .arg(it.value(), 0, 'f', 1)
                               .arg(stage0End.value(it.key()), 0, 'f', 1)
                               .arg(errorUs, 0, 'f', 1)));
        }
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
