// Real GPU traces read as HTA reads them. The fixtures (tests/bridges/fixtures/hta, see its README) are
// PyTorch profiler traces of GPU jobs from HolisticTraceAnalysis' tests/data, as published (.json.gz). The
// expected figures are HTA's own: TraceAnalysis.get_temporal_breakdown, get_comm_comp_overlap and
// get_gpu_kernel_breakdown, run from HTA's source (facebookresearch/HolisticTraceAnalysis at commit
// f4d0062c382f42bd8a74838bcdad1916c7d5d2da) with Debian 12's python3-pandas 1.5.3 and numpy 1.24.2, by
// default (the profiler steps but the last) and with include_last_profiler_step=True (--all-steps).
// Collective counts by kind are those of an independent walk from each NCCL kernel's correlation to its
// launch and the c10d / nccl / record_param_comms op around it.
#include "engine/bridges/TorchTrace.h"
#include "engine/trace/LaunchStats.h"
#include "engine/trace/TraceFlows.h"

#include <nlohmann/json.hpp>
#include <zlib.h>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <map>
#include <set>

using namespace loom::trace;

namespace {

const QString kDir = QStringLiteral(LOOM_SOURCE_DIR "/tests/bridges/fixtures/hta/");

struct Rank {
    int rank;
    double idle, compute, nonCompute, overlap; // overlap -1: HTA's NaN (no communication kernels)
};
using Ranks = QList<Rank>;
using Kinds = std::map<std::string, int>;

QByteArray runLoom(const QStringList& args, int* code = nullptr)
{
    QProcess p;
    p.start(QStringLiteral(LOOM_EXE), args);
    p.waitForFinished(120000);
    if (code)
        *code = p.exitCode();
    if (p.exitCode() != 0)
        qWarning("%s", p.readAllStandardError().constData());
    return p.readAllStandardOutput();
}

// The launch -> device-work pairs of one raw trace, walked here without the importer: device events are complete
// events with a stream (kernels, copies, sets; not GPU annotations), launches the host events with the same
// args.correlation (the first of each id).
struct Pairs {
    std::int64_t pairs = 0, launches = 0;
    double meanDelayNs = 0; // the device event's ts less the launch's ts + dur
};

Pairs rawPairs(const QString& path)
{
    std::string text;
    gzFile gz = gzopen(path.toLocal8Bit().constData(), "rb"); // plain files read through as they are
    char buf[1 << 16];
    for (int n; gz && (n = gzread(gz, buf, sizeof buf)) > 0;)
        text.append(buf, std::size_t(n));
    if (gz)
        gzclose(gz);
    const auto doc = nlohmann::json::parse(text);
    const auto& list = doc.is_array() ? doc : doc.at("traceEvents");
    std::map<std::int64_t, const nlohmann::json*> host;
    std::vector<const nlohmann::json*> device;
    for (const auto& e : list) {
        if (!e.is_object() || e.value("ph", "") != "X" || !e.contains("args") || !e["args"].is_object())
            continue;
        std::string cat = e.value("cat", "");
        for (auto& c : cat)
            c = char(std::tolower(static_cast<unsigned char>(c)));
        const auto& a = e["args"];
        const bool gpu
            = cat == "kernel" || cat == "memcpy" || cat == "memset" || cat == "cuda_sync" || cat.rfind("gpu_", 0) == 0;
        const bool correlated = a.contains("correlation") && a["correlation"].is_number_integer();
        if (gpu && cat != "gpu_user_annotation" && a.contains("stream") && a["stream"].is_number_integer()
            && a["stream"].get<std::int64_t>() >= 0 && correlated)
            device.push_back(&e);
        else if (!gpu && correlated)
            host.emplace(a["correlation"].get<std::int64_t>(), &e);
    }
    Pairs p;
    std::set<std::int64_t> launched;
    double delays = 0;
    for (const auto* d : device) {
        const auto it = host.find((*d)["args"]["correlation"].get<std::int64_t>());
        if (it == host.end())
            continue;
        ++p.pairs;
        launched.insert(it->first);
        const auto& h = *it->second;
        delays += ((*d)["ts"].get<double>() - (h["ts"].get<double>() + h["dur"].get<double>())) * 1000.0;
    }
    p.launches = std::int64_t(launched.size());
    p.meanDelayNs = p.pairs ? delays / double(p.pairs) : 0;
    return p;
}

} // namespace

Q_DECLARE_METATYPE(Ranks)
Q_DECLARE_METATYPE(Kinds)

class TorchTraceHta : public QObject {
    Q_OBJECT

private slots:
    void perRank_data()
    {
        QTest::addColumn<QStringList>("files");
        QTest::addColumn<bool>("allSteps");
        QTest::addColumn<Ranks>("hta");
        const QStringList sampled { "sampled-rank0.json.gz", "sampled-rank1.json.gz" };
        QTest::newRow("two ranks of 128, all-to-all (A100)")
            << sampled << false << Ranks { { 0, 53.56, 17.71, 28.74, 11.81 }, { 1, 54.72, 22.57, 22.72, 20.05 } };
        QTest::newRow("two ranks of 128, all steps")
            << sampled << true << Ranks { { 0, 55.21, 17.2, 27.59, 14.95 }, { 1, 52.89, 22.09, 25.02, 19.93 } };
        QTest::newRow("all-reduce and broadcast, pg_config")
            << QStringList { "nccl-data-rank0.json.gz" } << false << Ranks { { 0, 77.78, 17.26, 4.97, 14.31 } };
        QTest::newRow("all-reduce and broadcast, all steps")
            << QStringList { "nccl-data-rank0.json.gz" } << true << Ranks { { 0, 76.68, 17.11, 6.21, 15.14 } };
        QTest::newRow("SendRecv kernels of five collectives")
            << QStringList { "alltoall-rank0.json.gz" } << false << Ranks { { 0, 69.44, 14.15, 16.41, 1.37 } };
        QTest::newRow("SendRecv kernels, all steps")
            << QStringList { "alltoall-rank0.json.gz" } << true << Ranks { { 0, 69.01, 14.62, 16.37, 1.47 } };
        QTest::newRow("PyTorch 1.8 categories")
            << QStringList { "pt18-inference-rank1.json.gz" } << false << Ranks { { 1, 98.16, 1.84, 0.0, -1 } };
        QTest::newRow("MI250, ROCm 6.2") << QStringList { "mi250-minitoy.json.gz" } << false
                                         << Ranks { { 0, 98.53, 1.08, 0.39, -1 } };
    }

    // loom trace import of the .json.gz files as published, then loom trace stats --json: per rank within
    // one point of HTA.
    void perRank()
    {
        QFETCH(QStringList, files);
        QFETCH(bool, allSteps);
        QFETCH(Ranks, hta);
        QTemporaryDir dir;
        const QString out = dir.filePath("trace.json");
        QStringList args { "trace", "import" };
        for (const auto& f : files)
            args << kDir + f;
        int code = -1;
        runLoom(args << "--out" << out, &code);
        QCOMPARE(code, 0);
        QStringList stats { "trace", "stats", out, "--json" };
        if (allSteps)
            stats << "--all-steps";
        const auto doc = QJsonDocument::fromJson(runLoom(stats, &code)).object();
        QCOMPARE(code, 0);
        const auto perRank = doc.value("per_rank").toArray();
        QCOMPARE(perRank.size(), hta.size());
        for (int i = 0; i < hta.size(); ++i) {
            const auto r = perRank[i].toObject();
            QCOMPARE(r.value("rank").toInt(), hta[i].rank);
            const auto near = [](double a, double b) { return std::abs(a - b) <= 1.0; };
            QVERIFY2(near(r.value("idle_pct").toDouble(), hta[i].idle), qPrintable(QJsonDocument(r).toJson()));
            QVERIFY2(near(r.value("compute_pct").toDouble(), hta[i].compute), qPrintable(QJsonDocument(r).toJson()));
            QVERIFY2(
                near(r.value("non_compute_pct").toDouble(), hta[i].nonCompute), qPrintable(QJsonDocument(r).toJson()));
            if (hta[i].overlap < 0)
                QVERIFY(r.value("overlap_pct").isNull());
            else
                QVERIFY2(
                    near(r.value("overlap_pct").toDouble(), hta[i].overlap), qPrintable(QJsonDocument(r).toJson()));
        }
        QVERIFY(doc.contains("step_time_s") && doc.contains("collectives") && doc.contains("overlap"));
        QVERIFY(!doc.value("kernel_types").toArray().isEmpty());
    }

    // HTA's kernel-type breakdown over both ranks of the first fixture (percentages as HTA rounds them).
    void kernelTypes()
    {
        QTemporaryDir dir;
        const QString out = dir.filePath("trace.json");
        int code = -1;
        runLoom(
            { "trace", "import", kDir + "sampled-rank0.json.gz", kDir + "sampled-rank1.json.gz", "--out", out }, &code);
        QCOMPARE(code, 0);
        const QJsonObject doc = QJsonDocument::fromJson(runLoom({ "trace", "stats", out, "--json" })).object();
        const QJsonArray kinds = doc.value("kernel_types").toArray();
        const std::map<QString, double> hta { { "COMMUNICATION", 55.5 }, { "COMPUTATION", 33.6 },
            { "COMPUTATION overlapping COMMUNICATION", 10.3 }, { "MEMORY", 0.4 } };
        std::map<QString, double> ours;
        for (const auto& k : kinds)
            ours[k.toObject().value("type").toString()] = k.toObject().value("pct").toDouble();
        for (const auto& [type, pct] : hta)
            QVERIFY2(std::abs(ours[type] - pct) <= 1.0, qPrintable(type));
        // The human output shows the table.
        const QString text = QString::fromUtf8(runLoom({ "trace", "stats", out }));
        QVERIFY2(text.contains("rank    idle %  compute %  non-compute %  overlap %"), qPrintable(text));
    }

    void collectives_data()
    {
        QTest::addColumn<QStringList>("files");
        QTest::addColumn<Kinds>("kinds");
        QTest::newRow("ncclKernel_SendRecv as all-to-all, all-reduce, all-gather")
            << QStringList { "sampled-rank0.json.gz", "sampled-rank1.json.gz" }
            << Kinds { { "all-to-all", 8 }, { "all-reduce", 8 }, { "all-gather", 4 } };
        QTest::newRow("AllReduce and Broadcast kernels")
            << QStringList { "nccl-data-rank0.json.gz" } << Kinds { { "all-reduce", 15 }, { "broadcast", 6 } };
        // Five kernels launched before the profiler started: their kind is nowhere, yet they are counted.
        QTest::newRow("SendRecv of five kinds, five unlaunched")
            << QStringList { "alltoall-rank0.json.gz" }
            << Kinds { { "reduce-scatter", 10 }, { "all-to-all", 45 }, { "all-reduce", 10 }, { "all-gather", 10 },
                   { "collective", 5 } };
    }

    void launchFlows_data()
    {
        QTest::addColumn<QString>("file");
        for (const char* f : { "sampled-rank0.json.gz", "sampled-rank1.json.gz", "nccl-data-rank0.json.gz",
                 "alltoall-rank0.json.gz", "pt18-inference-rank1.json.gz", "mi250-minitoy.json.gz" })
            QTest::newRow(f) << kDir + f;
        // A host-only trace of Debian's python3-torch 1.13 (CPU): no launches, no flows.
        QTest::newRow("pipeline-2.rank0.json (PyTorch 1.13, CPU)")
            << QStringLiteral(LOOM_SOURCE_DIR "/tests/bridges/fixtures/pipeline-2.rank0.json");
    }

    // Each device event with a launch in the file gets one flow from that launch, kept as a Launch event on
    // its rank's host row: as many flows as the raw file has launch / device-work pairs, as many launches as
    // it has distinct launching correlations, and HTA's launch delay as the raw file gives it. The same
    // through loom trace import's Chrome trace and loom trace stats --json.
    void launchFlows()
    {
        QFETCH(QString, file);
        const Pairs raw = rawPairs(file);
        const auto imported = importTorchTraces({ { "trace", {}, file.toStdString() } });
        const auto& events = imported.events;
        const auto flows = loom::trace::launchFlows(events);
        QCOMPARE(std::int64_t(flows.size()), raw.pairs);
        const auto launches = std::count_if(
            events.begin(), events.end(), [](const TraceEvent& e) { return e.kind == EventKind::Launch; });
        QCOMPARE(std::int64_t(launches), raw.launches);
        for (const Flow& f : flows) {
            const TraceEvent &from = events[f.from], &to = events[f.to];
            QVERIFY(from.kind == EventKind::Launch && from.stream < 0 && to.stream >= 0);
            QCOMPARE(to.correlation, from.correlation);
            QCOMPARE(to.step, from.step); // a kernel's step is its launch's (HTA)
        }
        const auto stats = computeLaunchStats(events);
        const auto near = [](double a, double b) { return std::abs(a - b) <= 5.0 + 1e-6 * std::abs(b); };
        if (raw.pairs == 0) {
            QVERIFY(stats.perRank.empty());
        } else {
            QCOMPARE(stats.perRank.size(), std::size_t(1));
            QCOMPARE(stats.perRank[0].pairs, raw.pairs);
            QVERIFY2(near(stats.perRank[0].meanDelayNs, raw.meanDelayNs),
                qPrintable(QString("%1 against %2 ns").arg(stats.perRank[0].meanDelayNs).arg(raw.meanDelayNs)));
        }
        QTemporaryDir dir;
        const QString out = dir.filePath("trace.json");
        int code = -1;
        runLoom({ "trace", "import", file, "--out", out }, &code);
        QCOMPARE(code, 0);
        const auto doc = QJsonDocument::fromJson(runLoom({ "trace", "stats", out, "--json" }, &code)).object();
        QCOMPARE(code, 0);
        const auto perRank = doc.value("launches").toObject().value("per_rank").toArray();
        QCOMPARE(perRank.size(), raw.pairs ? 1 : 0);
        if (raw.pairs) {
            QCOMPARE(std::int64_t(perRank[0].toObject().value("pairs").toInteger()), raw.pairs);
            // Microseconds to three decimals in the Chrome trace: within a nanosecond a pair.
            QVERIFY(std::abs(perRank[0].toObject().value("mean_launch_delay_us").toDouble() * 1e3 - raw.meanDelayNs)
                <= 6.0 + 1e-6 * std::abs(raw.meanDelayNs));
        }
    }

    // Every communication kernel is counted, with the kind of the op around its launch.
    void collectives()
    {
        QFETCH(QStringList, files);
        QFETCH(Kinds, kinds);
        std::vector<TorchTraceFile> in;
        for (const auto& f : files)
            in.push_back({ f.toStdString(), {}, (kDir + f).toStdString() });
        const auto imported = importTorchTraces(in);
        Kinds counted;
        for (const auto& e : imported.events)
            if (e.lane == Lane::Comm)
                ++counted[std::string(toString(e.kind))];
        QCOMPARE(counted, kinds);
    }

    // Sizes come from the op around each launch: every all-reduce of the pg_config fixture has its bytes
    // (order-based matching gave 0 to all of them once one kernel was launched before the profiler).
    void bytesByLaunch()
    {
        const auto imported = importTorchTraces({ { "nccl", {}, (kDir + "nccl-data-rank0.json.gz").toStdString() } });
        int sized = 0, all = 0;
        for (const auto& e : imported.events)
            if (e.kind == EventKind::AllReduce) {
                ++all;
                sized += e.bytes > 0 ? 1 : 0;
                QVERIFY(e.group >= 0);
            }
        QCOMPARE(all, 15);
        QCOMPARE(sized, 15);
        QVERIFY(!imported.profilerSteps.empty());
    }
};

QTEST_GUILESS_MAIN(TorchTraceHta)
#include "tst_torchtrace_hta.moc"
