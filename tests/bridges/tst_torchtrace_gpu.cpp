// The GPU side of loom trace import on small traces written here with the fields Kineto writes: collectives
// named by the op around each kernel's launch (and NCCL's own kernel names, old and new), a group of one,
// exact timestamps, checks across files, ProfilerStep names that are no step, and sources that are not
// regular files (a device, a FIFO) or that never end.
#include "engine/bridges/TorchTrace.h"
#include "engine/bridges/TorchTraceDetail.h"
#include "engine/trace/LaunchStats.h"
#include "engine/trace/TraceFlows.h"

#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <sys/stat.h>
#include <zlib.h>

using namespace loom::trace;

namespace {

// One rank's Kineto trace: a step, and per kernel its launch inside `op` (an op's JSON, or none).
struct Kernel {
    std::string name;
    std::string op; // the complete JSON of the op around the launch, without ts / dur; empty: none
};

std::string rankTrace(const std::vector<Kernel>& kernels, int rank = 0, int world = 2, std::int64_t base = 0)
{
    std::string s = "{\"schemaVersion\": 1, \"distributedInfo\": {\"rank\": " + std::to_string(rank)
        + ", \"world_size\": " + std::to_string(world) + "}, \"baseTimeNanoseconds\": " + std::to_string(base)
        + ", \"traceEvents\": [{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#3\", "
          "\"pid\": 1, \"tid\": 1, \"ts\": 0, \"dur\": 100000}";
    for (std::size_t k = 0; k < kernels.size(); ++k) {
        const std::string c = std::to_string(k + 1), ts = std::to_string(100 * (k + 1));
        if (!kernels[k].op.empty())
            s += ", {\"ph\": \"X\", \"pid\": 1, \"tid\": 1, \"ts\": " + ts + ", \"dur\": 20, " + kernels[k].op + "}";
        s += ", {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 1, \"tid\": 1, "
             "\"ts\": "
            + std::to_string(100 * (k + 1) + 5) + ", \"dur\": 2, \"args\": {\"correlation\": " + c + "}}";
        s += ", {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"" + kernels[k].name
            + "\", \"pid\": 0, \"tid\": 7, \"ts\": " + std::to_string(100 * (k + 1) + 10)
            + ", \"dur\": 50, \"args\": {\"stream\": 7, \"correlation\": " + c + "}}";
    }
    return s + "]}";
}

// The device events only (each kernel's launch is kept too, as a Launch event on the host row before it).
TorchImport importOne(const std::string& text)
{
    auto i = importTorchTraces({ { "a.json", text, {} } });
    std::erase_if(i.events, [](const TraceEvent& e) { return e.kind == EventKind::Launch; });
    return i;
}

std::string refusal(const std::vector<TorchTraceFile>& files)
{
    try {
        importTorchTraces(files);
    } catch (const TorchTraceError& e) {
        return e.what();
    }
    return "accepted";
}

} // namespace

class TorchTraceGpu : public QObject {
    Q_OBJECT

private slots:
    void collectiveKinds_data()
    {
        QTest::addColumn<QString>("kernel");
        QTest::addColumn<QString>("op");
        QTest::addColumn<QString>("kind");
        QTest::addColumn<qulonglong>("bytes");
        const QString rpc = R"("cat": "cpu_op", "name": "record_param_comms", "args": {"Collective name": "%1",
            "dtype": "Float", "In msg nelems": 1024, "Out msg nelems": 1024, "Group size": 2})";
        QTest::newRow("NCCL < 2.8: ncclAllReduceRingLLKernel_sum_f32")
            << "ncclAllReduceRingLLKernel_sum_f32" << QString() << "all-reduce" << 0ull;
        QTest::newRow("NCCL < 2.8: ncclBroadcastRingLLKernel_copy_i8")
            << "ncclBroadcastRingLLKernel_copy_i8" << QString() << "broadcast" << 0ull;
        QTest::newRow("NCCL < 2.8: ncclReduceScatterTreeLL128Kernel_sum_f16")
            << "ncclReduceScatterTreeLL128Kernel_sum_f16" << QString() << "reduce-scatter" << 0ull;
        QTest::newRow("ncclDevKernel_AllGather")
            << "ncclDevKernel_AllGather_RING_LL(ncclDevComm*)" << QString() << "all-gather" << 0ull;
        QTest::newRow("Generic, record_param_comms all_to_all")
            << "ncclDevKernel_Generic(ncclDevComm*, unsigned long, ncclWork*)" << rpc.arg("all_to_all") << "all-to-all"
            << 4096ull;
        QTest::newRow("SendRecv, record_param_comms allreduce")
            << "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*)" << rpc.arg("allreduce") << "all-reduce"
            << 4096ull;
        QTest::newRow("SendRecv, c10d::alltoall_base_ with its tensors")
            << "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*)"
            << R"("cat": "cpu_op", "name": "c10d::alltoall_base_", "args": {"Input Dims": [[384], [384], []],
                  "Input type": ["long", "long", ""]})"
            << "all-to-all" << 3072ull;
        QTest::newRow("Generic, nccl:_reduce_scatter_base annotation")
            << "ncclDevKernel_Generic"
            << R"("cat": "user_annotation", "name": "nccl:_reduce_scatter_base")"
            << "reduce-scatter" << 0ull;
        QTest::newRow("Generic alone: communication of no known kind")
            << "ncclDevKernel_Generic" << QString() << "collective" << 0ull;
        QTest::newRow("SendRecv alone: not a send")
            << "ncclKernel_SendRecv_RING_SIMPLE" << QString() << "collective" << 0ull;
        QTest::newRow("RCCL's rccl name through HTA's nccl pattern")
            << "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)" << rpc.arg("allgather") << "all-gather"
            << 4096ull;
    }

    // A collective's kind and bytes come from the op around its kernel's launch, else the kernel's name; a
    // communication kernel that neither names is counted, not dropped.
    void collectiveKinds()
    {
        QFETCH(QString, kernel);
        QFETCH(QString, op);
        QFETCH(QString, kind);
        QFETCH(qulonglong, bytes);
        const auto i = importOne(rankTrace({ { kernel.toStdString(), op.toStdString() } }));
        QCOMPARE(i.events.size(), std::size_t(1));
        QVERIFY(i.events[0].lane == Lane::Comm);
        QCOMPARE(QString::fromStdString(std::string(toString(i.events[0].kind))), kind);
        QCOMPARE(qulonglong(i.events[0].bytes), bytes);
        QCOMPARE(i.events[0].step, 3);
    }

    // Each kernel's cudaLaunchKernel is kept on the rank's host row (stream -1) with the kernel's correlation
    // and step; its flow spans the launch delay: the kernel's start (110 µs) less the call's end (107 µs).
    void launchesKept()
    {
        const auto i = importTorchTraces({ { "a.json", rankTrace({ { "gemm_a", "" }, { "gemm_b", "" } }), {} } });
        QCOMPARE(i.events.size(), std::size_t(4));
        const auto flows = launchFlows(i.events);
        QCOMPARE(flows.size(), std::size_t(2));
        for (std::size_t k = 0; k < flows.size(); ++k) {
            const TraceEvent &launch = i.events[flows[k].from], &kernel = i.events[flows[k].to];
            QVERIFY(launch.kind == EventKind::Launch && launch.lane == Lane::Compute);
            QCOMPARE(launch.stream, -1);
            QCOMPARE(kernel.stream, 7);
            QCOMPARE(launch.correlation, std::int64_t(k + 1));
            QCOMPARE(launch.step, 3);
            QCOMPARE(launch.durationNs(), std::int64_t(2000));
            QCOMPARE(kernel.startNs - launch.endNs, std::int64_t(3000));
        }
        QCOMPARE(computeLaunchStats(i.events).perRank.at(0).meanDelayNs, 3000.0);
    }

    // A collective on a group of one rank moves nothing: 0 bytes, not 4 KiB in a few microseconds.
    void groupOfOne()
    {
        const std::string op = R"("cat": "cpu_op", "name": "record_param_comms", "args": {"Collective name":
            "allreduce", "dtype": "Float", "In msg nelems": 1024, "Out msg nelems": 1024, "Group size": 1})";
        const auto i = importOne(rankTrace({ { "ncclDevKernel_AllReduce_Sum_f32", op } }));
        QVERIFY(i.events.at(0).kind == EventKind::AllReduce);
        QCOMPARE(i.events.at(0).bytes, std::uint64_t(0));
        QCOMPARE(i.events.at(0).groupSize, 1);
    }

    // Timestamps to the nanosecond on a clock of 2024 (baseTimeNanoseconds beyond double's 2^53).
    void exactTimes()
    {
        std::string t = rankTrace({ { "gemm_a", "" }, { "gemm_b", "" } }, 0, 2, 1711964646123456789);
        t.replace(t.find("\"ts\": 210"), 9, "\"ts\": 210.001");
        t.replace(t.find("\"dur\": 50"), 9, "\"dur\": 0.003");
        const auto i = importOne(t);
        QCOMPARE(i.events.size(), std::size_t(2));
        QCOMPARE(i.events[0].durationNs(), std::int64_t(3));
        QCOMPARE(i.events[1].startNs - i.events[0].startNs, std::int64_t(100001)); // 210.001 - 110 µs
        QVERIFY(i.events[0].kind == EventKind::Kernel);
    }

    void together_data()
    {
        QTest::addColumn<QString>("second");
        QTest::addColumn<QString>("message");
        QTest::newRow("another world size")
            << QString::fromStdString(rankTrace({ { "gemm", "" } }, 1, 4))
            << "b.json: distributedInfo.world_size: 4, but a.json says 2; expected the traces of one job (one world "
               "size)";
        QTest::newRow("a rank beyond the world")
            << QString::fromStdString(rankTrace({ { "gemm", "" } }, 2, 2))
            << "b.json: distributedInfo.rank: 2; expected a rank below world_size 2";
        QTest::newRow("days apart")
            << QString::fromStdString(rankTrace({ { "gemm", "" } }, 1, 2, std::int64_t(86400) * 3 * 1000000000))
            << "b.json: its events (259200 s to 259200 s on the host clock) do not overlap a.json's (0 s to 0 s); "
               "expected the traces of one run, recorded together";
        QTest::newRow("the same rank") << QString::fromStdString(rankTrace({ { "gemm", "" } }, 0, 2))
                                       << "b.json: rank 0: a.json is the same rank; expected one trace per rank";
    }

    void together()
    {
        QFETCH(QString, second);
        QFETCH(QString, message);
        QCOMPARE(QString::fromStdString(refusal({ { "a.json", rankTrace({ { "gemm", "" } }, 0, 2), {} },
                     { "b.json", second.toStdString(), {} } })),
            message);
    }

    // "ProfilerStep#-5" is no step (HTA reads digits only): said, not imported as step -5.
    void negativeStep()
    {
        std::string t = rankTrace({ { "gemm", "" } });
        t.replace(t.find("ProfilerStep#3"), 14, "ProfilerStep#-5");
        const auto i = importOne(t);
        QVERIFY(i.profilerSteps.empty());
        for (const auto& e : i.events)
            QVERIFY(e.step >= 0);
        QVERIFY(std::any_of(i.lacks.begin(), i.lacks.end(),
            [](const std::string& l) { return l.find("\"ProfilerStep#-5\"") != std::string::npos; }));
    }

    // Only regular files are opened (a device or a FIFO is refused at once, never read or waited on); what
    // is read is limited after decompression.
    void sources()
    {
        QTemporaryDir dir;
        const std::string fifo = dir.filePath("fifo").toStdString();
        QCOMPARE(mkfifo(fifo.c_str(), 0600), 0);
        for (const std::string& path : { std::string("/dev/zero"), fifo, dir.path().toStdString() })
            QCOMPARE(QString::fromStdString(refusal({ { path, {}, path } })),
                QString::fromStdString(path
                    + ": the file: not a regular file (a device, FIFO or folder); expected a trace file, or \"-\" for "
                      "standard input"));
        // A gzip file of 8 MiB of blanks read with a 1 MiB limit: refused once 1 MiB is read.
        const std::string bomb = dir.filePath("bomb.json.gz").toStdString();
        gzFile gz = gzopen(bomb.c_str(), "wb9");
        gzwrite(gz, "[", 1);
        const std::string blanks(1 << 20, ' ');
        for (int k = 0; k < 8; ++k)
            gzwrite(gz, blanks.data(), static_cast<unsigned>(blanks.size()));
        gzclose(gz);
        try {
            torch::readRankTrace({ "bomb.json.gz", {}, bomb }, std::uint64_t(1) << 20);
            QFAIL("accepted");
        } catch (const TorchTraceError& e) {
            QCOMPARE(QString::fromStdString(e.what()),
                QString("bomb.json.gz: more than 1 MiB: larger than Loom reads of one trace (after decompression)"));
        }
    }

    // Standard input, by name ("-"), through the command line: a trace from a pipe imports; /dev/zero is
    // refused with exit code 2 at once.
    void standardInput()
    {
        QProcess p;
        p.start(QStringLiteral(LOOM_EXE), { "trace", "import", "-" });
        p.write(QByteArray::fromStdString(rankTrace({ { "gemm", "" } })));
        p.closeWriteChannel();
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitCode(), 0);
        QVERIFY(p.readAllStandardOutput().contains("\"loom_trace\""));
        QProcess z;
        z.start(QStringLiteral(LOOM_EXE), { "trace", "import", "/dev/zero" });
        QVERIFY(z.waitForFinished(60000));
        QCOMPARE(z.exitCode(), 2);
        QVERIFY(z.readAllStandardError().contains("not a regular file"));
    }
};

QTEST_GUILESS_MAIN(TorchTraceGpu)
#include "tst_torchtrace_gpu.moc"
