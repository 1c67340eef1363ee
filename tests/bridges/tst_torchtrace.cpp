// loom trace import: PyTorch profiler traces of real torch.distributed jobs (tests/bridges/fixtures, made by
// make-torch-traces.py with Debian's python3-torch 1.13 and the gloo backend) read as Loom's trace: ranks,
// steps, compute and collectives as the jobs ran them, the pipeline's bubble per stage from loom trace stats
// against the same trace measured by hand here, the Kineto form, and refusals of files that are not traces.
#include "engine/bridges/TorchTrace.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <map>

using namespace loom::trace;

namespace {

const QString kDir = QStringLiteral(LOOM_SOURCE_DIR "/tests/bridges/");

QByteArray readAll(const QString& path)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly))
        qFatal("cannot read %s", qPrintable(path));
    return f.readAll();
}

std::vector<TorchTraceFile> fixture(const QString& job, int ranks)
{
    std::vector<TorchTraceFile> files;
    for (int r = 0; r < ranks; ++r) {
        const QString name = job + ".rank" + QString::number(r) + ".json";
        files.push_back({ name.toStdString(), readAll(kDir + "fixtures/" + name).toStdString(), {} });
    }
    return files;
}

QJsonObject expected(const QString& job)
{
    return QJsonDocument::fromJson(readAll(kDir + "fixtures/" + job + ".expected.json")).object();
}

int count(const TorchImport& i, std::int32_t rank, EventKind kind)
{
    return int(std::count_if(
        i.events.begin(), i.events.end(), [&](const TraceEvent& e) { return e.rank == rank && e.kind == kind; }));
}

// The raw events of one rank's event-list trace, by name prefix.
struct Raw {
    QString name;
    double start, end;
};
std::vector<Raw> raw(const QString& job, int rank, const QString& prefix)
{
    std::vector<Raw> out;
    const auto list
        = QJsonDocument::fromJson(readAll(kDir + "fixtures/" + job + ".rank" + QString::number(rank) + ".json"))
              .array();
    for (const auto& v : list) {
        const auto o = v.toObject();
        if (o.value("name").toString().startsWith(prefix))
            out.push_back({ o.value("name").toString(), o.value("ts").toDouble(),
                o.value("ts").toDouble() + o.value("dur").toDouble() });
    }
    std::sort(out.begin(), out.end(), [](const Raw& a, const Raw& b) { return a.start < b.start; });
    return out;
}

struct Run {
    int code = -1;
    QByteArray out, err;
};
Run runLoom(const QStringList& args)
{
    QProcess p;
    p.start(QStringLiteral(LOOM_EXE), args);
    if (!p.waitForFinished(120000))
        p.kill();
    return { p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2, p.readAllStandardOutput(),
        p.readAllStandardError() };
}

} // namespace

class TestTorchTrace : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

private slots:
    void ddp_data()
    {
        QTest::addColumn<QString>("job");
        QTest::addColumn<int>("ranks");
        QTest::newRow("ddp-2") << QStringLiteral("ddp-2") << 2;
        QTest::newRow("ddp-4") << QStringLiteral("ddp-4") << 4;
    }

    // Plain DDP: every rank's steps, forward and backward, and one gradient all-reduce per step.
    void ddp()
    {
        QFETCH(QString, job);
        QFETCH(int, ranks);
        const auto want = expected(job);
        const auto i = importTorchTraces(fixture(job, ranks));
        QCOMPARE(i.form, std::string("event list"));
        QCOMPARE(i.ranks, want.value("ranks").toInt());
        QCOMPARE(i.steps, want.value("steps").toInt());
        const int steps = want.value("steps").toInt();
        for (int r = 0; r < ranks; ++r) {
            QCOMPARE(count(i, r, EventKind::AllReduce),
                want.value("collectives_per_rank").toObject().value("all_reduce").toInt());
            QCOMPARE(count(i, r, EventKind::Forward), steps);
            QCOMPARE(count(i, r, EventKind::Backward), steps);
            QCOMPARE(count(i, r, EventKind::Optimizer), steps);
            // Every collective the process group ran, and nothing else, is a communication event.
            const int comm = int(std::count_if(i.events.begin(), i.events.end(),
                [&](const TraceEvent& e) { return e.rank == r && e.lane == Lane::Comm; }));
            QCOMPARE(comm, int(raw(job, r, QStringLiteral("gloo:")).size()));
        }
        // What an event-list trace does not record is said, not guessed.
        const auto lacks = [&](const char* what) {
            return std::any_of(i.lacks.begin(), i.lacks.end(), [&](const std::string& l) { return l.find(what) == 0; });
        };
        QVERIFY(lacks("message sizes"));
        QVERIFY(lacks("process groups"));
        QVERIFY(std::all_of(
            i.events.begin(), i.events.end(), [](const TraceEvent& e) { return e.bytes == 0 && e.group == -1; }));
    }

    // The two-stage pipeline: micro-batches, send / recv per micro-batch, the barrier per step.
    void pipeline()
    {
        const auto want = expected(QStringLiteral("pipeline-2"));
        TorchImportOptions options;
        options.stageOfRank = { 0, 1 };
        const auto i = importTorchTraces(fixture(QStringLiteral("pipeline-2"), 2), options);
        QCOMPARE(i.ranks, 2);
        QCOMPARE(i.steps, want.value("steps").toInt());
        const int m = want.value("micro_batches").toInt(), steps = want.value("steps").toInt();
        const auto per = want.value("collectives_per_rank").toObject();
        for (int r = 0; r < 2; ++r) {
            QCOMPARE(count(i, r, EventKind::Send), per.value("send").toInt());
            QCOMPARE(count(i, r, EventKind::Recv), per.value("recv").toInt());
            QCOMPARE(count(i, r, EventKind::Barrier), per.value("barrier").toInt());
            QCOMPARE(count(i, r, EventKind::Forward), m * steps);
            QCOMPARE(count(i, r, EventKind::Backward), m * steps);
            for (const auto& e : i.events) {
                if (e.rank != r || e.lane != Lane::Compute || e.kind == EventKind::Optimizer)
                    continue;
                QCOMPARE(e.stage, r);
                QVERIFY(e.microBatch >= 0 && e.microBatch < m);
            }
        }
    }

    // loom trace import + loom trace stats: the bubble per stage against this trace measured by hand (ranks
    // aligned on the ends of the barriers, each stage's idle share of the pipeline phase of every step after
    // the first) and against the job's own clock readings (make-torch-traces.py), within 5 points.
    void pipelineBubble()
    {
        const QString out = m_dir.filePath(QStringLiteral("pipeline.json"));
        const auto imported = runLoom({ "trace", "import", kDir + "fixtures/pipeline-2.rank0.json",
            kDir + "fixtures/pipeline-2.rank1.json", "--layout", kDir + "layouts/pipeline-2-gloo.json", "--out", out });
        QVERIFY2(imported.code == 0, imported.err.constData());
        QVERIFY(imported.err.contains("2 ranks, 3 steps"));
        const auto stats = runLoom({ "trace", "stats", out, "--json" });
        QVERIFY2(stats.code == 0, stats.err.constData());
        const auto stages = QJsonDocument::fromJson(stats.out).object().value("stages").toArray();
        QCOMPARE(stages.size(), 2);

        // By hand: shift rank 1 so that its barriers end with rank 0's (mean offset), then per step after the first.
        const auto b0 = raw("pipeline-2", 0, "gloo:barrier"), b1 = raw("pipeline-2", 1, "gloo:barrier");
        QCOMPARE(b0.size(), b1.size());
        double shift = 0;
        for (std::size_t k = 0; k < b0.size(); ++k)
            shift += (b0[k].end - b1[k].end) / double(b0.size());
        const auto steps0 = raw("pipeline-2", 0, "ProfilerStep#");
        std::vector<std::vector<Raw>> compute(2);
        for (int r = 0; r < 2; ++r)
            for (const QString& kind : { QStringLiteral("forward mb"), QStringLiteral("backward mb") })
                for (auto e : raw("pipeline-2", r, kind)) {
                    if (r == 1)
                        e.start += shift, e.end += shift;
                    compute[r].push_back(e);
                }
        const auto byStep = [&](const Raw& e) { // the step of rank 0 whose range it starts in (after alignment)
            int s = 0;
            for (std::size_t k = 0; k < steps0.size(); ++k)
                if (e.start >= steps0[k].start - 1000) // the barrier precedes the step's compute
                    s = int(k);
            return s;
        };
        const auto want = expected(QStringLiteral("pipeline-2")).value("bubble_per_stage").toArray();
        for (int stage = 0; stage < 2; ++stage) {
            double sum = 0;
            int n = 0;
            for (int step = 1; step < int(steps0.size()); ++step) {
                double lo = 1e300, hi = -1e300, busy = 0;
                for (int r = 0; r < 2; ++r)
                    for (const auto& e : compute[r])
                        if (byStep(e) == step) {
                            lo = std::min(lo, e.start), hi = std::max(hi, e.end);
                            if (r == stage)
                                busy += e.end - e.start;
                        }
                sum += 1.0 - busy / (hi - lo);
                ++n;
            }
            const double byHand = sum / n, fromStats = stages[stage].toObject().value("bubble_fraction").toDouble();
            const double byJob = want[stage].toDouble();
            qInfo("stage %d: bubble %.1f %% (loom trace stats), %.1f %% (by hand), %.1f %% (the job's own clock)",
                stage, 100 * fromStats, 100 * byHand, 100 * byJob);
            QVERIFY(std::abs(fromStats - byHand) < 0.05);
            QVERIFY(std::abs(fromStats - byJob) < 0.05);
        }
    }
    // The Kineto object of current PyTorch releases, with the fields it documents: distributedInfo's rank (the
    // files are given in the other order), a ProfilerStep, a record_function annotation, record_param_comms'
    // collective, sizes and group, and kernels on a GPU stream linked to their launches by correlation: the
    // compute kernels take the kind of the range that launched them, the NCCL kernel times the transfer.
    void kineto()
    {
        const auto rankFile = [](int rank) {
            const QString r = QString::number(rank);
            QString t = QStringLiteral(
                R"json({"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": RANK, "world_size": 2},
              "traceEvents": [
                {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#5", "pid": 10, "tid": 10, "ts": 1000.0, "dur": 900.0},
                {"ph": "X", "cat": "user_annotation", "name": "forward", "pid": 10, "tid": 10, "ts": 1010.0, "dur": 200.0},
                {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 10, "tid": 10, "ts": 1020.0, "dur": 50.0},
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 10, "ts": 1030.0, "dur": 5.0, "args": {"correlation": 1}},
                {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn", "pid": 0, "tid": 7, "ts": 1040.0, "dur": 100.0, "args": {"stream": 7, "correlation": 1}},
                {"ph": "X", "cat": "user_annotation", "name": "backward", "pid": 10, "tid": 10, "ts": 1220.0, "dur": 400.0},
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 10, "ts": 1230.0, "dur": 5.0, "args": {"correlation": 2}},
                {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_tn", "pid": 0, "tid": 7, "ts": 1240.0, "dur": 300.0, "args": {"stream": 7, "correlation": 2}},
                {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 10, "tid": 10, "ts": 1630.0, "dur": 5.0,
                 "args": {"Collective name": "allreduce", "dtype": "Float", "In msg nelems": 1048576, "Out msg nelems": 1048576,
                          "Group size": 2, "Process Group Name": "0", "Process Group Description": "default_pg",
                          "Process Group Ranks": "[0, 1]"}},
                {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
                 "pid": 0, "tid": 7, "ts": 1640.0, "dur": 250.0, "args": {"device": 0, "stream": 7, "correlation": 3}},
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 10, "ts": 1631.0, "dur": 2.0, "args": {"correlation": 3}},
                {"ph": "i", "name": "marker", "pid": 10, "tid": 10, "ts": 1000.0}
              ]})json");
            t.replace(QStringLiteral("RANK"), r);
            return TorchTraceFile { ("kineto.rank" + r + ".json").toStdString(), t.toStdString(), {} };
        };
        const auto i = importTorchTraces({ rankFile(1), rankFile(0) });
        QCOMPARE(i.form, std::string("kineto"));
        QCOMPARE(i.ranks, 2);
        QCOMPARE(i.steps, 1);
        QCOMPARE(i.groups.size(), std::size_t(1));
        QVERIFY(i.groups[0].kind == GroupKind::World);
        QCOMPARE(i.groups[0].ranks, (std::vector<std::int32_t> { 0, 1 }));
        for (int r = 0; r < 2; ++r) {
            QCOMPARE(count(i, r, EventKind::Forward), 1);
            QCOMPARE(count(i, r, EventKind::Backward), 1);
            QCOMPARE(count(i, r, EventKind::AllReduce), 1);
        }
        for (const auto& e : i.events) {
            QCOMPARE(e.step, 5);
            if (e.kind != EventKind::AllReduce)
                continue;
            QCOMPARE(e.bytes, std::uint64_t(4 << 20));
            QCOMPARE(e.groupSize, 2);
            QCOMPARE(e.group, 0);
            QCOMPARE(e.durationNs(), std::int64_t(250000)); // the kernel's time, not the launch's
        }
        for (int r = 0; r < 2; ++r) // each kernel's cudaLaunchKernel is kept, on the rank's host row
            QCOMPARE(count(i, r, EventKind::Launch), 3);
        for (const auto& e : i.events) {
            QCOMPARE(e.stream, e.kind == EventKind::Launch ? -1 : 7);
            if (e.kind == EventKind::Forward)
                QCOMPARE(e.durationNs(), std::int64_t(100000)); // the GEMM kernel's, not the host range's
        }
        QVERIFY(std::none_of(
            i.lacks.begin(), i.lacks.end(), [](const std::string& l) { return l.find("message sizes") == 0; }));
    }

    // Files that are not PyTorch profiler traces are refused with the file, the field and what was expected.
    void refused_data()
    {
        QTest::addColumn<QString>("first");
        QTest::addColumn<QString>("second");
        QTest::addColumn<QString>("message");
        QTest::newRow("not JSON")
            << "{\"traceEvents\": [" << QString()
            << "a.json: the text: not JSON; expected a PyTorch profiler trace (a list of events, or "
               "an object with \"traceEvents\")";
        QTest::newRow("foreign object") << R"({"name": "my-layout", "layers": 4})" << QString()
                                        << "a.json: traceEvents: missing; expected the list of events of a PyTorch "
                                           "profiler trace";
        QTest::newRow("a number")
            << "42" << QString() << "a.json: the document: expected a list of events or an object with \"traceEvents\"";
        QTest::newRow("Loom's own trace") << R"({"otherData": {"loom_trace": 1}, "traceEvents": []})" << QString()
                                          << "a.json: otherData.loom_trace: this is already a Loom trace; open it with "
                                             "loom trace stats";
        QTest::newRow("another program's trace") << R"([{"ph": "X", "name": "paint", "ts": 1, "dur": 2}])" << QString()
                                                 << "a.json: the event list: no PyTorch profiler events (aten:: ops, "
                                                    "ProfilerStep#N ranges, cpu_op or kernel events); expected a trace "
                                                    "written by torch.profiler";
        QTest::newRow("event without ts") << R"([{"ph": "X", "name": "aten::mm", "dur": 2}])" << QString()
                                          << "a.json: [0].ts: expected a number (microseconds)";
        QTest::newRow("negative dur") << R"({"traceEvents": [{"ph": "X", "name": "aten::mm", "ts": 1, "dur": -2}]})"
                                      << QString()
                                      << "a.json: traceEvents[0].dur: expected a non-negative number (microseconds)";
        QTest::newRow("event not an object") << R"([{"ph": "X", "name": "aten::mm", "ts": 1, "dur": 2}, 7])"
                                             << QString() << "a.json: [1]: expected an event object";
        QTest::newRow("no phase") << R"([{"name": "aten::mm", "ts": 1, "dur": 2}])" << QString()
                                  << "a.json: [0].ph: expected the event's phase (a string such as \"X\")";
        QTest::newRow("rank not a number") << R"({"distributedInfo": {"rank": "one"}, "traceEvents": []})" << QString()
                                           << "a.json: distributedInfo.rank: expected a non-negative integer";
        QTest::newRow("nesting") << QString(200, '[') + QString(200, ']') << QString()
                                 << "a.json: nesting: deeper than 64 levels; a profiler trace is a list of flat events";
        const QString rank0
            = R"({"distributedInfo": {"rank": 0}, "traceEvents": [{"ph": "X", "name": "aten::mm", "ts": 1, "dur": 2}]})";
        QTest::newRow("same rank twice") << rank0 << rank0
                                         << "b.json: rank 0: a.json is the same rank; expected one trace per rank";
    }

    void refused()
    {
        QFETCH(QString, first);
        QFETCH(QString, second);
        QFETCH(QString, message);
        std::vector<TorchTraceFile> files { { "a.json", first.toStdString(), {} } };
        if (!second.isEmpty())
            files.push_back({ "b.json", second.toStdString(), {} });
        try {
            importTorchTraces(files);
            QFAIL("accepted");
        } catch (const TorchTraceError& e) {
            QCOMPARE(QString::fromStdString(e.what()), message);
        }
    }

    // The command line: the same refusal with exit code 2, a layout whose rank count differs, usage.
    void commandLine()
    {
        const QString foreign = m_dir.filePath(QStringLiteral("layout.json"));
        QFile f(foreign);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(R"({"loom_layout": 1, "name": "x"})");
        f.close();
        auto r = runLoom({ "trace", "import", foreign });
        QCOMPARE(r.code, 2);
        QCOMPARE(r.err,
            QByteArray("error: " + foreign.toUtf8()
                + ": traceEvents: missing; expected the list of events of a PyTorch profiler trace\n"));
        r = runLoom({ "trace", "import", kDir + "fixtures/ddp-4.rank0.json", "--layout",
            kDir + "layouts/pipeline-2-gloo.json" });
        QCOMPARE(r.code, 2);
        QVERIFY(r.err.contains("the layout \"pipeline-2-gloo\" has 2 ranks (tp·pp·dp) but 1 traces were given"));
        QCOMPARE(runLoom({ "trace", "import" }).code, 64);
        // Without --out the trace goes to standard output, which loom trace stats reads back.
        r = runLoom({ "trace", "import", kDir + "fixtures/ddp-2.rank0.json", kDir + "fixtures/ddp-2.rank1.json" });
        QCOMPARE(r.code, 0);
        QVERIFY(r.out.startsWith("{\"displayTimeUnit\""));
        QVERIFY(r.err.contains("lacks: process groups"));
    }
};

QTEST_GUILESS_MAIN(TestTorchTrace)
#include "tst_torchtrace.moc"
