// Every export of every example and test layout (and of variants that reach the frameworks' cross-field
// rules), and every golden file, checked as the frameworks would at start-up: ExportChecker runs the launch
// script with a fake torchrun and checks what it was given against the flags, keys and rules read from the
// frameworks' sources (tests/bridges/frameworks, each file naming its source and commit).
#include "ExportChecker.h"

#include "engine/plan/LayoutParser.h"
#include "engine/plan/LayoutValidator.h"
#include "engine/profiles/BuiltinProfiles.h"

#include <QDir>
#include <QFile>
#include <QTest>

using namespace loom;
using plan::ExportTarget;

namespace {

const QString kRoot = QStringLiteral(LOOM_SOURCE_DIR);

plan::Layout readLayout(const QString& path)
{
    const auto read = plan::readLayoutFile(path.toStdString(), profiles::BuiltinProfiles::instance());
    if (!read.ok())
        qFatal("%s: %s", qPrintable(path), read.diagnostics.format().c_str());
    return *read.layout;
}

std::string joined(const std::vector<std::string>& lines)
{
    std::string s;
    for (const auto& l : lines)
        s += "  " + l + "\n";
    return s;
}

const test::ExportChecker& checker()
{
    static const test::ExportChecker c((kRoot + "/tests/bridges/frameworks").toStdString());
    return c;
}

// Layouts that reach the rules the example layouts do not: MoE with top-1 routing and biases under tp,
// expert parallelism, FSDP with tp, sequence and context parallelism, uneven and interleaved stages.
std::vector<std::pair<std::string, plan::Layout>> variants()
{
    std::vector<std::pair<std::string, plan::Layout>> out;
    const plan::Layout mini = readLayout(kRoot + "/tests/bridges/layouts/gpt-mini-local.json");
    const plan::Layout llama = readLayout(kRoot + "/tests/bridges/layouts/llama2-7b-slurm.json");
    auto moe = mini;
    moe.model.experts = 4, moe.model.topK = 1, moe.parallel.tp = 2, moe.parallel.pp = 1, moe.parallel.dp = 2;
    moe.parallel.ep = 2, moe.parallel.globalBatch = 8, moe.parallel.stages.clear();
    out.emplace_back("moe top-1 with biases, tp 2, ep 2", moe);
    auto uneven = mini;
    uneven.parallel.pp = 4, uneven.parallel.dp = 1, uneven.parallel.globalBatch = 16;
    uneven.parallel.stages = { { 0, 0 }, { 1, 2 }, { 3, 3 }, { 4, 5 } };
    out.emplace_back("uneven inner stages", uneven);
    auto fsdp = llama;
    fsdp.memory.zero = 3, fsdp.parallel.sp = true;
    out.emplace_back("zero 3 with tp and sp", fsdp);
    auto zero2 = llama;
    zero2.memory.zero = 2;
    out.emplace_back("zero 2", zero2);
    auto stale = mini;
    stale.memory.zero = 1, stale.comm.staleness = 1;
    out.emplace_back("zero 1, staleness 1", stale);
    auto interleaved = llama;
    interleaved.memory.zero = 3, interleaved.parallel.vpp = 2;
    interleaved.parallel.schedule = plan::ScheduleKind::Interleaved;
    out.emplace_back("interleaved", interleaved);
    auto materialized = mini;
    materialized.memory.attention = plan::Attention::Materialized, materialized.precision = plan::Precision::Fp16;
    materialized.comm.backend = plan::CommBackend::Gloo;
    out.emplace_back("materialized attention, fp16, gloo", materialized);
    auto gqa = llama;
    gqa.model.kvHeads = 8, gqa.memory.zero = 1, gqa.parallel.sp = true;
    out.emplace_back("grouped-query attention, zero 1, sp", gqa);
    auto expertsLlama = llama;
    expertsLlama.model.experts = 8, expertsLlama.model.topK = 2, expertsLlama.model.capacityFactor = 1.25;
    expertsLlama.parallel.ep = 2, expertsLlama.memory.zero = 1;
    out.emplace_back("llama moe ep 2, capacity 1.25", expertsLlama);
    auto context = llama;
    context.parallel.cp = 2, context.parallel.dp = 2, context.memory.zero = 3;
    out.emplace_back("context parallel 2", context);
    auto accounted = mini;
    accounted.model.layers = 6, accounted.parallel.vpp = 2, accounted.parallel.pp = 2, accounted.parallel.dp = 1;
    accounted.parallel.schedule = plan::ScheduleKind::Interleaved, accounted.parallel.globalBatch = 16;
    accounted.parallel.stages = { { 0, 0 }, { 1, 2 }, { 3, 4 }, { 5, 5 } };
    out.emplace_back("interleaved, one layer fewer at both ends", accounted);
    auto adam = llama; // the optimizer section: Llama 2's AdamW, clipping and a cosine to 5 %
    adam.optimizer.lr = 3e-4, adam.optimizer.adamEps = 1e-5, adam.optimizer.clipGrad = 0.5;
    adam.optimizer.lrWarmupIters = 2000, adam.optimizer.lrDecayIters = 500000, adam.optimizer.minLrFraction = 0.05;
    adam.optimizer.mainGradsDtype = plan::OptimizerSpec::StateDtype::Bf16, adam.memory.zero = 1;
    out.emplace_back("optimizer section, cosine", adam);
    auto wsd = adam; // WSD and Megatron's precision-aware optimizer (refused where a framework lacks them)
    wsd.optimizer.lrDecayStyle = plan::OptimizerSpec::DecayStyle::Wsd, wsd.optimizer.lrWsdDecayIters = 50000;
    wsd.optimizer.expAvgDtype = plan::OptimizerSpec::StateDtype::Bf16;
    wsd.optimizer.expAvgSqDtype = plan::OptimizerSpec::StateDtype::Fp8;
    out.emplace_back("optimizer section, WSD, bf16 and fp8 moments", wsd);
    auto named = readLayout(kRoot + "/tests/bridges/layouts/llama2-7b-ddp.json");
    named.name = "ev\x7fil\n==> x <== 'q'", named.description = "d\x7f\n";
    out.emplace_back("control characters in the name", named);
    for (auto& [name, l] : out)
        if (plan::validateLayout(l).hasErrors())
            qFatal("variant %s: %s", name.c_str(), plan::validateLayout(l).format().c_str());
    return out;
}

} // namespace

class TestExportFlags : public QObject {
    Q_OBJECT

private slots:
    void exports_data()
    {
        QTest::addColumn<int>("target");
        QTest::addColumn<QString>("version");
        QTest::addColumn<int>("layout");
        std::vector<QString> files;
        for (const QString& dir : { kRoot + "/resources/examples", kRoot + "/tests/bridges/layouts" })
            for (const auto& f : QDir(dir).entryList({ "*.json" }, QDir::Files, QDir::Name))
                files.push_back(dir + "/" + f);
        m_layouts.clear();
        for (const auto& f : files)
            m_layouts.emplace_back(f.section('/', -1).toStdString(), readLayout(f));
        for (auto& v : variants())
            m_layouts.push_back(std::move(v));
        for (int i = 0; i < int(m_layouts.size()); ++i)
            for (auto t : { ExportTarget::Megatron, ExportTarget::DeepSpeed, ExportTarget::TorchTitan })
                for (const auto& v : plan::frameworkVersions(t))
                    QTest::newRow((m_layouts[i].first + " " + std::string(plan::toString(t)) + " " + v).c_str())
                        << int(t) << QString::fromStdString(v) << i;
    }

    // Each export the framework would accept, or a refusal with its reasons.
    void exports()
    {
        QFETCH(int, target);
        QFETCH(QString, version);
        QFETCH(int, layout);
        const auto t = static_cast<ExportTarget>(target);
        plan::ExportOptions options;
        options.frameworkVersion = version.toStdString();
        const auto r = plan::exportLayout(m_layouts.at(std::size_t(layout)).second, t, {}, options);
        if (!r.ok()) {
            QVERIFY(r.files.empty());
            for (const auto& reason : r.refusals)
                QVERIFY(!reason.empty());
            return;
        }
        const auto problems = checker().check(t, r.files, r.notes, options.frameworkVersion);
        QVERIFY2(problems.empty(), (joined(problems) + r.files.back().text).c_str());
    }

    // A sweep over the settings the frameworks' rules depend on, on a Llama and a GPT under Slurm: every
    // valid combination is exported to every target and either refused or accepted by the checker.
    void sweep()
    {
        const plan::Layout llama = readLayout(kRoot + "/tests/bridges/layouts/llama2-7b-slurm.json");
        int checked = 0, refused = 0;
        for (int zero = 0; zero <= 3; ++zero)
            for (const bool sp : { false, true })
                for (const int shape : { 0, 1, 2, 3 }) // tp 4 pp 2, tp 2 pp 4 vpp 2, tp 8 cp 2 pp 1, tp 1 pp 4
                    for (const bool moe : { false, true }) {
                        plan::Layout l = llama;
                        l.memory.zero = zero, l.parallel.sp = sp;
                        const std::int64_t tp[] = { 4, 2, 8, 1 }, pp[] = { 2, 4, 1, 4 }, cp[] = { 1, 1, 2, 1 };
                        l.parallel.tp = tp[shape], l.parallel.pp = pp[shape], l.parallel.cp = cp[shape];
                        l.parallel.dp = 32 / (tp[shape] * pp[shape] * cp[shape]);
                        l.parallel.vpp = shape == 1 ? 2 : 1;
                        l.parallel.schedule
                            = shape == 1 ? plan::ScheduleKind::Interleaved : plan::ScheduleKind::OneFOneB;
                        if (moe)
                            l.model.experts = 8, l.model.topK = zero % 2 == 0 ? 1 : 2, l.parallel.ep = 2;
                        if (plan::validateLayout(l).hasErrors())
                            continue;
                        for (auto t : { ExportTarget::Megatron, ExportTarget::DeepSpeed, ExportTarget::TorchTitan }) {
                            const auto r = plan::exportLayout(l, t);
                            if (!r.ok()) {
                                ++refused;
                                continue;
                            }
                            ++checked;
                            const auto problems = checker().check(t, r.files, r.notes, {});
                            QVERIFY2(problems.empty(),
                                (joined(problems) + "zero " + std::to_string(zero) + " sp " + std::to_string(sp)
                                    + " shape " + std::to_string(shape) + " moe " + std::to_string(moe) + " "
                                    + std::string(plan::toString(t)))
                                    .c_str());
                        }
                    }
        qInfo("sweep: %d exports checked, %d refused", checked, refused);
        QVERIFY(checked > 40);
    }

    // The golden files hold exports as they were committed: each file of each passes the same checks.
    void goldens_data()
    {
        QTest::addColumn<QString>("file");
        for (const auto& f : QDir(kRoot + "/tests/bridges/golden").entryList({ "*.txt" }, QDir::Files, QDir::Name))
            QTest::newRow(qPrintable(f)) << kRoot + "/tests/bridges/golden/" + f;
    }
    void goldens()
    {
        QFETCH(QString, file);
        QFile f(file);
        QVERIFY(f.open(QIODevice::ReadOnly));
        std::vector<plan::ExportFile> files;
        std::vector<std::string> notes;
        for (const auto& line : QString::fromUtf8(f.readAll()).split('\n')) {
            if (line.startsWith("==> ") && line.endsWith(" <==")) {
                plan::ExportFile e;
                QString name = line.mid(4, line.size() - 8);
                e.executable = name.endsWith(" (executable)");
                e.name = name.remove(" (executable)").toStdString();
                files.push_back(e);
            } else if (line.startsWith("note: ")) {
                notes.push_back(line.mid(6).toStdString());
            } else if (line.startsWith("refused: ")) {
                return; // a refusal has no files
            } else if (!files.empty()) {
                files.back().text += line.toStdString() + "\n";
            }
        }
        QVERIFY(!files.empty());
        for (auto& e : files) // split('\n') gave one newline too many at the end of each file
            if (e.text.ends_with("\n\n") && !e.text.ends_with("\n\n\n"))
                e.text.pop_back();
        const QString name = file.section('/', -1);
        const auto t = plan::exportTargetFromString(name.section('.', -2, -2).toStdString());
        QVERIFY(t);
        const auto problems = checker().check(*t, files, notes, {});
        QVERIFY2(problems.empty(), joined(problems).c_str());
    }

    // The checker fails what the frameworks refuse: an export as Loom wrote it before (a flag no Megatron
    // has, tp 2 without CUDA_DEVICE_MAX_CONNECTIONS, top-1 routing without pre-softmax, TOML keys and values
    // torchtitan does not take).
    void checkerFindsWhatFrameworksRefuse()
    {
        plan::ExportFile script { "x.megatron.sh",
            "#!/bin/bash\nexec torchrun --standalone --nproc-per-node 4 pretrain_gpt.py --num-layers 4 "
            "--num-attention-heads 4 --tensor-model-parallel-size 2 --memory-efficient-layer-norm "
            "--num-experts 4 --moe-router-topk 1 --normalization rmsnorm --global-batch-size 8 --mock-data \"$@\"\n",
            true };
        auto problems = checker().check(ExportTarget::Megatron, { script }, {}, "core_v0.19");
        const std::string all = joined(problems);
        for (const char* expected :
            { "has no argument --memory-efficient-layer-norm", "needs CUDA_DEVICE_MAX_CONNECTIONS=1",
                "needs --moe-router-pre-softmax", "--normalization \"rmsnorm\" is not one of its choices",
                "still passes --mock-data", "MoE with biases needs --expert-tensor-parallel-size 1" })
            QVERIFY2(all.find(expected) != std::string::npos, (expected + std::string(" in\n") + all).c_str());
        plan::ExportFile toml { "x.torchtitan.toml",
            "# n_layers=4\n[model]\nname = \"llama3\"\nflavor = \"7b\"\n[training]\nmixed_precision_param = "
            "\"float16\"\n[parallelism]\npipeline_parallel_degree = 2\npipeline_parallel_layers_per_stage = 2\n",
            false };
        plan::ExportFile titan { "x.torchtitan.sh",
            "#!/bin/bash\nexec torchrun --standalone --nproc-per-node 2 -m torchtitan.train --job.config_file x\n",
            true };
        problems = checker().check(ExportTarget::TorchTitan, { toml, titan }, {}, {});
        const std::string t = joined(problems);
        for (const char* expected : { "mixed_precision_param = \"float16\" is not one of", "flavor \"7b\" is not",
                 "3 stages do not suit pp 2" })
            QVERIFY2(t.find(expected) != std::string::npos, (expected + std::string(" in\n") + t).c_str());
    }

    // issue 32: a multi-node script without Slurm parses and really starts torchrun (bash 5.2 paired the
    // apostrophes of the ${NODE_RANK:?...} messages, so torchrun never started and the script exited 0).
    void multiNodeScriptsLaunch()
    {
        plan::Layout l = readLayout(kRoot + "/tests/bridges/layouts/gpt-mini-local.json");
        l.cluster.devicesPerNode = 4, l.nodes = 2;
        for (const auto& hosts : { std::vector<std::string> {}, std::vector<std::string> { "node0", "node1" } }) {
            l.cluster.hosts = hosts;
            for (auto t : { ExportTarget::Megatron, ExportTarget::DeepSpeed }) {
                const auto r = plan::exportLayout(l, t);
                QVERIFY(r.ok());
                const auto launch = test::ExportChecker::launch(r.files, {});
                QVERIFY2(launch.ran, launch.error.c_str());
                QCOMPARE(test::launchWorld(launch), 8LL);
            }
        }
    }

private:
    std::vector<std::pair<std::string, plan::Layout>> m_layouts;
};

QTEST_APPLESS_MAIN(TestExportFlags)
#include "tst_exportflags.moc"
