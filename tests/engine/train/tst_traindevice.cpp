// loom-train --device: the default device of a layout, the one-line refusal of CUDA without a usable GPU
// (or, with one, without the device-generic trainer), and that every rank stops with its own line before
// step 1 (no metrics written).
#include "engine/device/DeviceProbe.h"
#include "engine/plan/LayoutParser.h"
#include "engine/profiles/BuiltinProfiles.h"
#include "engine/tools/TrainDevice.h"

#include <QFile>
#include <QProcess>
#include <QProcessEnvironment>
#include <QTemporaryDir>
#include <QTest>

using namespace loom;
using device::DeviceKind;

Q_DECLARE_METATYPE(DeviceKind)

namespace {

plan::Layout example(const QString& name, const std::string& backend = {})
{
    QFile f(QStringLiteral(LOOM_SOURCE_DIR "/resources/examples/") + name);
    if (!f.open(QIODevice::ReadOnly))
        qFatal("cannot read %s", qPrintable(f.fileName()));
    std::string text = f.readAll().toStdString();
    if (!backend.empty()) // a "comm" object opens every example: name the backend first in it
        text.replace(text.find("\"comm\": {"), 9, "\"comm\": { \"backend\": \"" + backend + "\",");
    const auto read = plan::readLayout(text, profiles::BuiltinProfiles::instance());
    if (!read.ok())
        qFatal("%s: %s", qPrintable(name), read.diagnostics.format().c_str());
    return *read.layout;
}

} // namespace

class TstTrainDevice : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

private slots:
    void defaults_data()
    {
        QTest::addColumn<QString>("file");
        QTest::addColumn<QString>("backend");
        QTest::addColumn<QString>("asked");
        QTest::addColumn<DeviceKind>("kind");
        QTest::newRow("local: cpu") << "tiny-local.json"
                                    << ""
                                    << "" << DeviceKind::Cpu;
        QTest::newRow("DGX on NCCL: cuda") << "gpt3-175b-1024-a100.json"
                                           << ""
                                           << "" << DeviceKind::Cuda;
        QTest::newRow("DGX on MPI: cpu ranks") << "gpt3-175b-1024-a100.json"
                                               << "mpi"
                                               << "" << DeviceKind::Cpu;
        QTest::newRow("DGX on Gloo: cpu ranks") << "gpt3-175b-1024-a100.json"
                                                << "gloo"
                                                << "" << DeviceKind::Cpu;
        QTest::newRow("--device cpu wins") << "gpt3-175b-1024-a100.json"
                                           << ""
                                           << "cpu" << DeviceKind::Cpu;
        QTest::newRow("--device cuda wins") << "tiny-local.json"
                                            << ""
                                            << "cuda" << DeviceKind::Cuda;
    }
    void defaults()
    {
        QFETCH(QString, file);
        QFETCH(QString, backend);
        QFETCH(QString, asked);
        QFETCH(DeviceKind, kind);
        const auto askedKind = asked.isEmpty() ? std::nullopt : tools::parseDeviceKind(asked.toStdString());
        const tools::DeviceChoice choice = tools::chooseDevice(askedKind, example(file, backend.toStdString()));
        QCOMPARE(choice.kind, kind);
        QCOMPARE(choice.why.rfind("--device", 0) == 0, !asked.isEmpty());
    }

    void parsing()
    {
        QCOMPARE(tools::parseDeviceKind("cpu"), std::optional(DeviceKind::Cpu));
        QCOMPARE(tools::parseDeviceKind("cuda"), std::optional(DeviceKind::Cuda));
        QVERIFY(!tools::parseDeviceKind("gpu"));
        QVERIFY(!tools::parseDeviceKind("CUDA"));
        QVERIFY(!tools::parseDeviceKind(""));
    }

    void problems_data()
    {
        QTest::addColumn<bool>("built");
        QTest::addColumn<int>("count");
        QTest::addColumn<QString>("found");
        QTest::addColumn<QString>("expected");
        QTest::newRow("not built") << false << 0 << "built without CUDA"
                                   << "loom-train: rank 3: device cuda (--device cuda) asked, but no usable GPU was "
                                      "found: built without CUDA; run with --device cpu to train on CPU cores";
        QTest::newRow("no GPU") << true << 0 << "no GPU (cudaGetDeviceCount found 0)"
                                << "loom-train: rank 3: device cuda (--device cuda) asked, but no usable GPU was "
                                   "found: no GPU (cudaGetDeviceCount found 0); run with --device cpu to train on CPU "
                                   "cores";
        QTest::newRow("a GPU, no device trainer")
            << true << 1 << "1 GPU (cuda:0 NVIDIA H200)"
            << "loom-train: rank 3: device cuda (--device cuda) asked and 1 GPU (cuda:0 NVIDIA H200) found, but "
               "loom-train's trainer does not yet keep its buffers on a GPU (the CUDA kernels are built, the "
               "device-generic trainer is not); run with --device cpu to train on CPU cores";
    }
    void problems()
    {
        QFETCH(bool, built);
        QFETCH(int, count);
        QFETCH(QString, found);
        QFETCH(QString, expected);
        const tools::DeviceChoice choice { DeviceKind::Cuda, "--device cuda" };
        const device::GpuProbe probe { built, count, found.toStdString() };
        QCOMPARE(QString::fromStdString(tools::deviceProblem(3, choice, probe)), expected);
        QVERIFY(tools::deviceProblem(3, { DeviceKind::Cpu, "--device cpu" }, probe).empty());
    }

    void defaultNamesTheBackend()
    {
        const auto choice = tools::chooseDevice(std::nullopt, example("gpt3-175b-1024-a100.json"));
        const std::string line = tools::deviceProblem(0, choice, device::GpuProbe { true, 0, "no GPU" });
        QVERIFY2(line.find("the default for a GPU cluster's layout on NCCL") != std::string::npos, line.c_str());
        QVERIFY2(line.find("comm.backend \"mpi\" or \"gloo\"") != std::string::npos, line.c_str());
    }

    void precisionOnCpu()
    {
        plan::Layout l = example("tiny-local.json");
        const tools::DeviceChoice cpu { DeviceKind::Cpu, "cpu" }, cuda { DeviceKind::Cuda, "cuda" };
        QVERIFY(tools::precisionNote(cpu, l).empty());
        l.precision = plan::Precision::Bf16;
        QCOMPARE(QString::fromStdString(tools::precisionNote(cpu, l)),
            QString("loom-train: the layout asks precision bf16; on the CPU loom-train computes in fp32 (16-bit "
                    "precision is the CUDA device's)"));
        QVERIFY(tools::precisionNote(cuda, l).empty());
    }

    // Two ranks started as Loom's launcher starts them: each stops before the rendezvous with its own line,
    // the one deviceProblem gives for what this machine's probe finds.
    void everyRankStops_data()
    {
        QTest::addColumn<int>("ranks");
        QTest::newRow("one process") << 1;
        QTest::newRow("two ranks") << 2;
    }
    void everyRankStops()
    {
        QFETCH(int, ranks);
        const device::GpuProbe probe = device::probeGpus();
        const QString metrics = m_dir.filePath(QString("metrics-%1").arg(ranks));
        for (int r = 0; r < ranks; ++r) {
            QProcess p;
            p.setProcessChannelMode(QProcess::MergedChannels);
            QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
            if (ranks > 1) {
                env.insert("LOOM_RANK", QString::number(r));
                env.insert("LOOM_WORLD_SIZE", QString::number(ranks));
                env.insert("LOOM_RENDEZVOUS", "127.0.0.1:9"); // never reached: the device check comes first
            }
            p.setProcessEnvironment(env);
            p.start(QStringLiteral(LOOM_TRAIN),
                { "--layout", QStringLiteral(LOOM_SOURCE_DIR "/resources/examples/tiny-local.json"), "--device", "cuda",
                    "--steps", "1", "--metrics", metrics });
            QVERIFY(p.waitForFinished(120000));
            const QString out = QString::fromUtf8(p.readAll());
            const std::string expected = tools::deviceProblem(r, { DeviceKind::Cuda, "--device cuda" }, probe) + "\n";
            QCOMPARE(p.exitCode(), 2);
            QCOMPARE(out, QString::fromStdString(expected));
        }
        QVERIFY(!QFile::exists(metrics));
    }
};

QTEST_GUILESS_MAIN(TstTrainDevice)
#include "tst_traindevice.moc"
