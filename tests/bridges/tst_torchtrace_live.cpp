// make-torch-traces.py run now (Debian's python3-torch, gloo, CPU) and its fresh traces imported: the
// pipeline's ranks, steps, sends and receives, and each stage's bubble from computeStats within 5 points of
// the job's own clock. Minutes of CPU time, so it runs on request: ctest -L torch (installer/bootstrap.sh
// --torch installs the package; without it the test is skipped, and says so).
#include "engine/bridges/TorchTrace.h"
#include "engine/trace/TraceStats.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

using namespace loom::trace;

class TestTorchTraceLive : public QObject {
    Q_OBJECT

private slots:
    void pipelineMadeNow()
    {
        QProcess probe;
        probe.start(QStringLiteral("/usr/bin/python3"), { "-c", "import torch.distributed" });
        if (!probe.waitForFinished(120000) || probe.exitCode() != 0)
            QSKIP("python3-torch is not installed (installer/bootstrap.sh --torch installs it)");
        QTemporaryDir dir;
        QProcess job;
        job.setProcessChannelMode(QProcess::MergedChannels);
        job.start(QStringLiteral("/usr/bin/python3"),
            { QStringLiteral(LOOM_SOURCE_DIR "/tests/bridges/make-torch-traces.py"), dir.path(), "pipeline-2" });
        QVERIFY(job.waitForFinished(1500000));
        QVERIFY2(job.exitCode() == 0, job.readAll().constData());

        std::vector<TorchTraceFile> files;
        for (int r = 0; r < 2; ++r) {
            QFile f(dir.filePath(QStringLiteral("pipeline-2.rank%1.json").arg(r)));
            QVERIFY(f.open(QIODevice::ReadOnly));
            files.push_back({ f.fileName().toStdString(), f.readAll().toStdString(), {} });
        }
        QFile e(dir.filePath(QStringLiteral("pipeline-2.expected.json")));
        QVERIFY(e.open(QIODevice::ReadOnly));
        const auto want = QJsonDocument::fromJson(e.readAll()).object();

        TorchImportOptions options;
        options.stageOfRank = { 0, 1 };
        const auto i = importTorchTraces(files, options);
        QCOMPARE(i.ranks, 2);
        QCOMPARE(i.steps, want.value("steps").toInt());
        for (int r = 0; r < 2; ++r)
            for (auto [kind, key] : { std::pair { EventKind::Send, "send" }, { EventKind::Recv, "recv" } })
                QCOMPARE(int(std::count_if(i.events.begin(), i.events.end(),
                             [&](const TraceEvent& x) { return x.rank == r && x.kind == kind; })),
                    want.value("collectives_per_rank").toObject().value(key).toInt());
        StatsContext c;
        c.pp = 2;
        c.microBatches = want.value("micro_batches").toInt();
        const auto stats = computeStats(i.events, c);
        QCOMPARE(stats.stages.size(), std::size_t(2));
        for (int s = 0; s < 2; ++s) {
            const double job = want.value("bubble_per_stage").toArray()[s].toDouble();
            qInfo("stage %d: bubble %.1f %% from the trace, %.1f %% from the job's clock", s,
                100 * stats.stages[s].bubbleFraction, 100 * job);
            QVERIFY(std::abs(stats.stages[s].bubbleFraction - job) < 0.05);
        }
    }
};

QTEST_GUILESS_MAIN(TestTorchTraceLive)
#include "tst_torchtrace_live.moc"
