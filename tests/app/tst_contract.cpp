// One vocabulary, one contract: the planner, the engine, the stream and the launcher read a layout and a
// run the same way. The simulator names the all-reduce loom-train runs for the same layout; loom-train's
// FLOPs are the planner's (model and hardware, GPT and Llama, with and without recomputation) and MFU moves
// with tokens/s; a layout the planner models but loom-train cannot train is a warning in validate and is
// refused by loom run before any process starts; a rank's failure travels as an error frame.
#include "engine/plan/CostModel.h"
#include "engine/plan/EngineSupport.h"
#include "engine/plan/LayoutParser.h"
#include "engine/plan/LayoutValidator.h"
#include "engine/plan/Simulator.h"
#include "engine/profiles/BuiltinProfiles.h"
#include "engine/trace/TelemetryFrames.h"
#include "engine/trace/TraceStats.h"

#include "ProcessRun.h"

#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <set>

using namespace loom;

namespace {

using loomtest::Run;

// gpt-sized blocks on a byte vocabulary: 12.6 M parameters, 50 MB of fp32 gradients, so that the default
// 25 MiB buckets reach the measured table's 16 MiB crossing (auto runs shm at dp 2 on one machine).
QJsonObject bigGradientModel()
{
    return { { "name", "wide" }, { "layers", 4 }, { "hidden", 512 }, { "heads", 8 }, { "ffn_hidden", 2048 },
        { "vocab", 256 }, { "seq_len", 16 } };
}

QJsonObject layoutJson(const QString& name, const QJsonValue& model, int tp, int dp, const QString& recompute,
    const QJsonValue& cluster = QStringLiteral("local"))
{
    return { { "loom_layout", 1 }, { "name", name }, { "model", model }, { "cluster", cluster },
        { "parallel",
            QJsonObject { { "tp", tp }, { "pp", 1 }, { "dp", dp }, { "micro_batch", 1 }, { "global_batch", 2 * dp },
                { "schedule", "1f1b" } } },
        { "memory", QJsonObject { { "zero", 0 }, { "recompute", recompute } } }, { "precision", "fp32" },
        { "comm", QJsonObject { { "allreduce", "auto" } } } };
}

plan::Layout parsed(const QJsonObject& json)
{
    const auto read = plan::readLayout(
        QJsonDocument(json).toJson(QJsonDocument::Compact).toStdString(), profiles::BuiltinProfiles::instance());
    if (!read.ok())
        qFatal("test layout invalid: %s", read.diagnostics.format().c_str());
    return *read.layout;
}

} // namespace

class TestContract : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

    QString write(const QString& name, const QJsonObject& json)
    {
        QFile f(m_dir.filePath(name));
        if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate))
            qFatal("cannot write %s", qPrintable(f.fileName()));
        f.write(QJsonDocument(json).toJson());
        return f.fileName();
    }

    Run start(const QString& program, const QStringList& args, const QProcessEnvironment& env, int timeoutMs = 300000)
    {
        return loomtest::runProcess(program, args, env, m_dir.path(), timeoutMs);
    }

    QProcessEnvironment env() const
    {
        QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
        e.insert(QStringLiteral("LOOM_DB"), m_dir.filePath(QStringLiteral("contract.db")));
        return e;
    }

    Run train(const QString& layoutFile, int ranks, const QStringList& extra)
    {
        return start(QStringLiteral(MPIEXEC),
            QStringList { QStringLiteral("--allow-run-as-root"), QStringLiteral("--oversubscribe"),
                QStringLiteral("-np"), QString::number(ranks), QStringLiteral(LOOM_TRAIN), QStringLiteral("--layout"),
                layoutFile }
                + extra,
            env());
    }

private slots:
    // Item 1: `loom simulate`'s timeline and loom-train's trace name the same data-parallel all-reduce.
    void simulatorNamesTheEnginesAllreduce()
    {
        const QJsonObject json = layoutJson(QStringLiteral("wide-dp2"), bigGradientModel(), 1, 2, "none");
        const QString file = write(QStringLiteral("wide-dp2.json"), json);
        const QString traceFile = m_dir.filePath(QStringLiteral("wide-dp2.trace.json"));
        const Run r = train(
            file, 2, { QStringLiteral("--steps"), QStringLiteral("1"), QStringLiteral("--trace-out"), traceFile });
        QVERIFY2(r.exitCode == 0, qPrintable(r.all()));
        std::vector<trace::GroupInfo> groups;
        const auto measured = trace::readChromeTraceFile(traceFile.toStdString(), nullptr, &groups);
        std::set<std::string> ran;
        for (const auto& e : measured)
            if (e.kind == trace::EventKind::AllReduce && e.bytes >= (1u << 20)) // the gradient buckets
                ran.insert(std::string(trace::toString(e.algorithm)));
        const plan::Prediction p = plan::predict(parsed(json));
        std::set<std::string> simulated;
        for (const auto& e : p.events)
            if (e.kind == trace::EventKind::AllReduce)
                simulated.insert(std::string(trace::toString(e.algorithm)));
        QCOMPARE(ran, std::set<std::string> { "shm" });
        QCOMPARE(simulated, ran);
    }

    // Item 2: the FLOPs loom-train reports per step are the planner's, model and hardware alike.
    void flopsAreThePlanners_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("recompute");
        QTest::newRow("gpt, no recomputation") << "gpt-tiny"
                                               << "none";
        QTest::newRow("gpt, full recomputation") << "gpt-tiny"
                                                 << "full";
        QTest::newRow("llama, no recomputation") << "llama-tiny"
                                                 << "none";
        QTest::newRow("llama, full recomputation") << "llama-tiny"
                                                   << "full";
    }
    void flopsAreThePlanners()
    {
        QFETCH(QString, model);
        QFETCH(QString, recompute);
        const QString name = model + QLatin1Char('-') + recompute;
        const QJsonObject json = layoutJson(name, model, 1, 1, recompute);
        const QString metrics = m_dir.filePath(name + QStringLiteral(".metrics"));
        const Run r = train(write(name + QStringLiteral(".json"), json), 1,
            { QStringLiteral("--steps"), QStringLiteral("1"), QStringLiteral("--metrics"), metrics });
        QVERIFY2(r.exitCode == 0, qPrintable(r.all()));
        QFile f(metrics);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QJsonObject step = QJsonDocument::fromJson(f.readLine()).object();
        const double seconds = step.value("step_time_s").toDouble();
        QVERIFY(seconds > 0);
        const plan::Prediction p = plan::predict(parsed(json));
        const double model_ = step.value("flops_per_s").toDouble() * seconds;
        const double hardware = step.value("hardware_flops_per_s").toDouble() * seconds;
        QVERIFY2(std::fabs(model_ / p.modelFlops - 1) < 1e-6,
            qPrintable(QStringLiteral("loom-train %1, planner %2").arg(model_).arg(p.modelFlops)));
        QVERIFY2(std::fabs(hardware / p.hardwareFlops - 1) < 1e-6,
            qPrintable(QStringLiteral("loom-train %1, planner %2").arg(hardware).arg(p.hardwareFlops)));
        QCOMPARE(p.hardwareFlops > p.modelFlops, recompute == QLatin1String("full"));
    }

    // Item 2: MFU is model FLOPs, so it falls with tokens/s when recomputation slows the step; HFU counts
    // the recomputed forwards and stays higher. The same holds for the statistics of a measured step.
    void mfuFallsWithTokens()
    {
        plan::Layout none = parsed(
            layoutJson(QStringLiteral("a100"), QStringLiteral("llama2-7b"), 8, 1, "none", QStringLiteral("dgx-a100")));
        none.parallel.globalBatch = 64;
        plan::Layout full = none;
        full.memory.recompute = plan::Recompute::Full;
        const plan::Prediction a = plan::predict(none), b = plan::predict(full);
        QVERIFY(b.tokensPerSecond < a.tokensPerSecond);
        QVERIFY(std::fabs(b.mfu / a.mfu - b.tokensPerSecond / a.tokensPerSecond) < 1e-9);
        QCOMPARE(a.hfu, a.mfu);
        QVERIFY(b.hfu > b.mfu);
        trace::StatsContext c = plan::statsContext(full);
        const trace::Throughput t
            = trace::throughput(c.modelFlopsPerStep, c.hardwareFlopsPerStep, b.stepTime, c.devices, c.peakTflops);
        QVERIFY(std::fabs(t.mfu / b.mfu - 1) < 1e-9);
        QVERIFY(std::fabs(t.hfu / b.hfu - 1) < 1e-9);
    }

    // Item 3: valid for the planner, beyond loom-train: validate warns, loom run starts nothing.
    void unsupportedLayoutsAreRefusedBeforeAnyRank_data()
    {
        QTest::addColumn<QJsonObject>("layout");
        QJsonObject moeSp = layoutJson(QStringLiteral("moe-sp"), QStringLiteral("moe-tiny"), 2, 2, "none");
        QJsonObject parallel = moeSp.value("parallel").toObject();
        parallel.insert("sp", true);
        moeSp.insert("parallel", parallel);
        QTest::newRow("moe with sequence parallelism") << moeSp;
        QJsonObject moeZero = layoutJson(QStringLiteral("moe-zero"), QStringLiteral("moe-tiny"), 1, 2, "none");
        parallel = moeZero.value("parallel").toObject();
        parallel.insert("ep", 2);
        moeZero.insert("parallel", parallel);
        QJsonObject memory = moeZero.value("memory").toObject();
        memory.insert("zero", 1);
        moeZero.insert("memory", memory);
        QTest::newRow("moe with ep and zero 1") << moeZero;
        QTest::newRow("a GPU cluster on nccl")
            << layoutJson(QStringLiteral("gpu"), QStringLiteral("gpt-tiny"), 1, 8, "none", QStringLiteral("dgx-a100"));
    }
    void unsupportedLayoutsAreRefusedBeforeAnyRank()
    {
        QFETCH(QJsonObject, layout);
        QVERIFY(!plan::engineSupport(parsed(layout)).trainable());
        const QString file = write(layout.value("name").toString() + QStringLiteral(".json"), layout);
        const Run v = start(QStringLiteral(LOOM_EXE), { QStringLiteral("validate"), file }, env());
        QCOMPARE(v.exitCode, 0); // valid: the planner models it
        QVERIFY2(v.out.contains(QLatin1String(plan::kEngineCannotTrain)), qPrintable(v.all()));
        // A stand-in mpirun first on PATH marks any start; loom run must not reach it.
        QDir().mkpath(m_dir.filePath(QStringLiteral("bin")));
        const QString fake = m_dir.filePath(QStringLiteral("bin/mpirun"));
        const QString marker = m_dir.filePath(QStringLiteral("STARTED"));
        QFile s(fake);
        QVERIFY(s.open(QIODevice::WriteOnly | QIODevice::Truncate));
        s.write(QStringLiteral("#!/bin/sh\ntouch '%1'\nexit 0\n").arg(marker).toUtf8());
        s.close();
        s.setPermissions(s.permissions() | QFileDevice::ExeOwner);
        QProcessEnvironment e = env();
        e.insert(QStringLiteral("PATH"), m_dir.filePath(QStringLiteral("bin")) + QLatin1Char(':') + e.value("PATH"));
        const Run r
            = start(QStringLiteral(LOOM_EXE), { QStringLiteral("run"), file, QStringLiteral("--steps"), "1" }, e);
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains(QLatin1String("loom-train cannot train it"))
                && r.err.contains(QLatin1String("nothing was started")),
            qPrintable(r.all()));
        QVERIFY(!QFile::exists(marker));
    }

    // Item 6: a limit in a message is the constant's value, not prose that can go stale ("4 million"
    // pipeline operations where the rule is a million per replay).
    void limitsAreSaidFromTheirConstants()
    {
        plan::Layout l = parsed(layoutJson(QStringLiteral("long"), QStringLiteral("gpt-tiny"), 1, 1, "none"));
        l.parallel.pp = 400; // 8·p² ops in the longer replay: beyond the limit even extrapolated
        l.model.layers = 400;
        l.parallel.globalBatch = 2000;
        const auto d = plan::validateLayout(l);
        QVERIFY(d.hasErrors());
        const std::string message = d.errors().front().message;
        QVERIFY2(message.find(plan::replayLimitText()) != std::string::npos, message.c_str());
        QVERIFY2(message.find("1,000,000") != std::string::npos, message.c_str());
    }

    // Items 3 and 4: the trainer asks the same rules, and its refusal leaves the rank as an error frame on
    // the stream (which the launcher reads), not only as a line of log.
    void aRanksFailureIsAnErrorFrame()
    {
        QJsonObject layout = layoutJson(QStringLiteral("moe-sp-direct"), QStringLiteral("moe-tiny"), 2, 1, "none");
        QJsonObject parallel = layout.value("parallel").toObject();
        parallel.insert("sp", true);
        layout.insert("parallel", parallel);
        const Run r = train(
            write(QStringLiteral("moe-sp-direct.json"), layout), 2, { QStringLiteral("--steps"), "1", "--stream" });
        QVERIFY(r.exitCode != 0);
        trace::StreamReader reader;
        reader.feed(std::string_view(r.rawOut.constData(), std::size_t(r.rawOut.size())));
        trace::Frame frame;
        bool found = false;
        while (reader.next(frame)) {
            const trace::TelemetryFrame typed = trace::decode(frame);
            if (const auto* e = std::get_if<trace::ErrorFrame>(&typed)) {
                found = true;
                QCOMPARE(QString::fromStdString(e->kind), QStringLiteral("layout"));
                QVERIFY(e->rank == 0 || e->rank == 1);
                QVERIFY2(QString::fromStdString(e->message).contains(QLatin1String("parallel.sp")), e->message.c_str());
            }
        }
        QVERIFY2(found, qPrintable(r.all()));
    }
};

QTEST_GUILESS_MAIN(TestContract)
#include "tst_contract.moc"
