// loom export: the golden files of three published or shipped layouts for every target, and every refusal
// with its message. Set LOOM_UPDATE_GOLDEN=1 to rewrite the golden files (then read the diff).
#include "engine/bridges/Export.h"
#include "engine/plan/LayoutParser.h"
#include "engine/plan/LayoutValidator.h"
#include "engine/plan/OptimizerSpec.h"
#include "engine/profiles/BuiltinProfiles.h"

#include <QFile>
#include <QTest>

#include <nlohmann/json.hpp>

using namespace loom;
using plan::ExportTarget;

namespace {

const QString kDir = QStringLiteral(LOOM_SOURCE_DIR "/tests/bridges/");

plan::Layout layoutFile(const QString& name)
{
    const auto read
        = plan::readLayoutFile((kDir + "layouts/" + name).toStdString(), profiles::BuiltinProfiles::instance());
    if (!read.ok())
        qFatal("%s: %s", qPrintable(name), read.diagnostics.format().c_str());
    return *read.layout;
}

// Everything an export says, as one text: each file under its name, the notes, or the refusals.
std::string render(const plan::ExportResult& r)
{
    std::string s;
    for (const auto& f : r.files)
        s += "==> " + f.name + (f.executable ? " (executable)" : "") + " <==\n" + f.text;
    for (const auto& n : r.notes)
        s += "note: " + n + "\n";
    for (const auto& n : r.refusals)
        s += "refused: " + n + "\n";
    return s;
}

} // namespace

class TestExport : public QObject {
    Q_OBJECT

private slots:
    // The layout's optimizer section in each framework's terms: every constant and the schedule once the
    // section is given, none of it without (the goldens), and a refusal for what a framework cannot run.
    void optimizerSection_data()
    {
        QTest::addColumn<int>("target");
        QTest::addColumn<QString>("section");
        QTest::addColumn<QString>("expected"); // substrings of the export, '|' between them
        QTest::addColumn<QString>("refusal"); // a substring of a refusal, or empty
        const int megatron = int(ExportTarget::Megatron), deepSpeed = int(ExportTarget::DeepSpeed),
                  titan = int(ExportTarget::TorchTitan);
        const QString llama2 = R"({"lr":3e-4,"adam_eps":1e-5,"weight_decay":0.1,"lr_warmup_iters":2000,)"
                               R"("lr_decay_iters":500000,"clip_grad":1.0})";
        QTest::newRow("megatron: Llama 2's AdamW")
            << megatron << llama2
            << "--adam-beta1 0.9\n|--adam-beta2 0.95\n|--adam-eps 1e-05\n|--weight-decay 0.1\n|--clip-grad 1\n|"
               "--lr 0.0003\n|--min-lr 3e-05\n|--lr-decay-style cosine\n|--lr-warmup-iters 2000\n|"
               "--lr-decay-iters 500000\n"
            << "";
        QTest::newRow("megatron: WSD") << megatron << R"({"lr_decay_style":"WSD","lr_wsd_decay_iters":100,"lr":1e-3})"
                                       << "--lr-decay-style WSD\n|--lr-wsd-decay-iters 100\n|"
                                          "--lr-wsd-decay-style linear\n|--min-lr 0.0001\n"
                                       << "";
        QTest::newRow("megatron: precision-aware optimizer")
            << megatron << R"({"exp_avg_dtype":"bf16","exp_avg_sq_dtype":"fp8"})"
            << "--use-precision-aware-optimizer\n|--exp-avg-dtype bf16\n|--exp-avg-sq-dtype fp8\n|"
               "--main-params-dtype fp32\n"
            << "";
        QTest::newRow("megatron: bf16 gradients") << megatron << R"({"main_grads_dtype":"bf16"})"
                                                  << "--grad-reduce-in-bf16\n"
                                                  << "";
        QTest::newRow("deepspeed: clipping in the config")
            << deepSpeed << R"({"clip_grad":0.5,"lr":2e-4})"
            << "\"gradient_clipping\": 0.5|--lr 0.0002\n|--adam-beta2 0.95\n|--min-lr 2e-05\n"
            << "";
        QTest::newRow("deepspeed: no WSD") << deepSpeed << R"({"lr_decay_style":"WSD"})"
                                           << ""
                                           << "WSD";
        QTest::newRow("deepspeed: no bf16 moments") << deepSpeed << R"({"exp_avg_dtype":"bf16"})"
                                                    << ""
                                                    << "keeps AdamW's states in fp32";
        QTest::newRow("torchtitan: tables")
            << titan << R"({"lr":3e-4,"adam_eps":1e-5,"lr_warmup_iters":200,"clip_grad":0.5})"
            << "max_norm = 0.5\n|[optimizer]\nname = \"AdamW\"\nlr = 0.0003\nbeta1 = 0.9\nbeta2 = 0.95\n"
               "eps = 1e-05\nweight_decay = 0.1\n|[lr_scheduler]\nwarmup_steps = 200\ndecay_type = \"cosine\"\n"
               "min_lr_factor = 0.1\n"
            << "";
        QTest::newRow("torchtitan: WSD's last part") << titan
                                                     << R"({"lr_decay_style":"WSD","lr_wsd_decay_iters":50,)"
                                                        R"("lr_decay_iters":1000})"
                                                     << "decay_ratio = 0.05\ndecay_type = \"linear\"\n"
                                                     << "";
        QTest::newRow("torchtitan: reduces in fp32") << titan << R"({"main_grads_dtype":"bf16"})"
                                                     << ""
                                                     << "reduces gradients in float32";
    }
    void optimizerSection()
    {
        QFETCH(int, target);
        QFETCH(QString, section);
        QFETCH(QString, expected);
        QFETCH(QString, refusal);
        plan::Layout l = layoutFile(QStringLiteral("llama2-7b-slurm.json"));
        l.memory.zero = target == int(ExportTarget::TorchTitan) ? 3 : 1;
        plan::Diagnostics d;
        plan::readOptimizerSpec(nlohmann::json::parse(section.toStdString()), l.optimizer, d);
        QVERIFY2(!d.hasErrors(), d.format().c_str());
        const auto r = plan::exportLayout(l, static_cast<ExportTarget>(target));
        const std::string text = render(r);
        if (!refusal.isEmpty()) {
            QVERIFY2(!r.ok() && text.find(refusal.toStdString()) != std::string::npos, text.c_str());
            return;
        }
        QVERIFY2(r.ok(), text.c_str());
        for (const QString& part : expected.split('|'))
            QVERIFY2(text.find(part.toStdString()) != std::string::npos, qPrintable(part + "\n" + text.c_str()));
        // Without the section none of it is written.
        l.optimizer = {};
        const std::string plain = render(plan::exportLayout(l, static_cast<ExportTarget>(target)));
        for (const char* key : { "--adam-beta2", "[optimizer]", "gradient_clipping", "--lr-decay-style" })
            QVERIFY2(plain.find(key) == std::string::npos, key);
    }

    void golden_data()
    {
        QTest::addColumn<QString>("layout");
        QTest::addColumn<int>("target");
        QTest::addColumn<bool>("exported");
        struct Row {
            const char* file;
            ExportTarget target;
            bool exported;
        };
        const Row rows[] = {
            // SC21 Table 1, 145.6B: interleaved 1F1B, which DeepSpeed's pipeline engine does not run, and a GPT
            // (LayerNorm, GELU, learned positions, biases), which torchtitan does not train.
            { "sc21-145b-1536-a100.json", ExportTarget::Megatron, true },
            { "sc21-145b-1536-a100.json", ExportTarget::DeepSpeed, false },
            { "sc21-145b-1536-a100.json", ExportTarget::TorchTitan, false },
            { "../../../resources/examples/gpt3-175b-1024-a100.json", ExportTarget::Megatron, true },
            { "../../../resources/examples/gpt3-175b-1024-a100.json", ExportTarget::DeepSpeed, true },
            { "../../../resources/examples/gpt3-175b-1024-a100.json", ExportTarget::TorchTitan, false },
            { "gpt-mini-local.json", ExportTarget::Megatron, true },
            { "gpt-mini-local.json", ExportTarget::DeepSpeed, true },
            { "gpt-mini-local.json", ExportTarget::TorchTitan, false },
            // A Llama under Slurm: the sbatch + srun launch, and torchtitan's config.
            { "llama2-7b-slurm.json", ExportTarget::Megatron, true },
            { "llama2-7b-slurm.json", ExportTarget::DeepSpeed, true },
            { "llama2-7b-slurm.json", ExportTarget::TorchTitan, false },
            // Plain data parallelism of a Llama over NCCL's ring: every target.
            { "llama2-7b-ddp.json", ExportTarget::Megatron, true },
            { "llama2-7b-ddp.json", ExportTarget::DeepSpeed, true },
            { "llama2-7b-ddp.json", ExportTarget::TorchTitan, true },
        };
        for (const auto& r : rows)
            QTest::newRow(qPrintable(QString::fromLatin1(r.file).section('/', -1) + " "
                + QString::fromUtf8(plan::toString(r.target).data())))
                << QString::fromLatin1(r.file) << int(r.target) << r.exported;
    }

    void golden()
    {
        QFETCH(QString, layout);
        QFETCH(int, target);
        QFETCH(bool, exported);
        const auto t = static_cast<ExportTarget>(target);
        const auto result = plan::exportLayout(layoutFile(layout), t);
        QCOMPARE(result.ok(), exported);
        QCOMPARE(result.files.empty(), !exported);
        const std::string text = render(result);
        const QString golden = kDir + "golden/" + layout.section('/', -1).section('.', 0, 0) + "."
            + QString::fromUtf8(plan::toString(t).data()) + ".txt";
        if (qEnvironmentVariableIsSet("LOOM_UPDATE_GOLDEN")) {
            QFile f(golden);
            QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
            f.write(text.data(), qint64(text.size()));
        }
        QFile f(golden);
        QVERIFY2(f.open(QIODevice::ReadOnly), qPrintable(golden + " is missing (LOOM_UPDATE_GOLDEN=1 writes it)"));
        const QByteArray expected = f.readAll();
        QCOMPARE(QString::fromStdString(text), QString::fromUtf8(expected));
    }

    // Every setting a target cannot express is refused with a sentence naming it; nothing is dropped.
    void refusals_data()
    {
        QTest::addColumn<int>("target");
        QTest::addColumn<int>("change");
        QTest::addColumn<QString>("message");
        enum Change {
            Gpipe,
            Int8,
            TopK,
            Lz4,
            Hierarchical,
            UnevenInner,
            UnevenVirtual,
            Zero2Pipeline,
            Zero1,
            Zero0Tp,
            Vpp,
            Partition,
            ErrorFeedback,
            Warmup,
            Group
        };
        const auto row = [](const char* name, ExportTarget t, Change c, const char* message) {
            QTest::newRow(name) << int(t) << int(c) << QString::fromUtf8(message);
        };
        row("megatron gpipe", ExportTarget::Megatron, Gpipe,
            "parallel.schedule \"gpipe\": Megatron-LM runs only 1F1B or interleaved 1F1B pipelines; choose \"1f1b\"");
        row("deepspeed gpipe", ExportTarget::DeepSpeed, Gpipe,
            "parallel.schedule \"gpipe\": DeepSpeed's pipeline engine runs only 1F1B pipelines; choose \"1f1b\"");
        row("megatron int8", ExportTarget::Megatron, Int8,
            "comm.dp_codec \"int8\": Megatron-LM all-reduces gradients uncompressed; Loom's gradient codecs have no "
            "counterpart there (--grad-reduce-in-bf16 covers \"bf16\"); use \"bf16\" or \"none\"");
        row("deepspeed topk", ExportTarget::DeepSpeed, TopK,
            "comm.dp_codec \"topk:0.01\": DeepSpeed all-reduces gradients uncompressed; Loom's gradient codecs have no "
            "counterpart there (communication_data_type covers only \"fp16\" and \"bf16\"); use one of those or "
            "\"none\"");
        row("torchtitan lz4", ExportTarget::TorchTitan, Lz4,
            "comm.dp_codec \"lz4\": torchtitan all-reduces gradients uncompressed; Loom's gradient codecs have no "
            "counterpart there (its mixed_precision_reduce takes only \"float32\"); use \"none\"");
        row("megatron bf16 with error feedback", ExportTarget::Megatron, ErrorFeedback,
            "comm.error_feedback true: Loom carries each step's bf16 rounding error into the next step; Megatron-LM "
            "reduces in bf16 without error feedback; set error_feedback to false");
        row("deepspeed fp16 after a warm-up", ExportTarget::DeepSpeed, Warmup,
            "comm.codec_warmup 100: DeepSpeed reduces in fp16 from the first step; remove codec_warmup");
        row("megatron hierarchical", ExportTarget::Megatron, Hierarchical,
            "comm.allreduce \"hierarchical\": Megatron-LM uses NCCL's own all-reduce, which has no two-level mode like "
            "Loom's; choose \"library\" or \"ring\"");
        row("megatron uneven inner stages", ExportTarget::Megatron, UnevenInner,
            "parallel.stages: Megatron-LM can give the first and last stage their own layer counts, but all other "
            "stages must hold the same number; this layout's stages cannot be expressed before core_v0.13; "
            "--framework-version core_v0.13 or later writes it as --pipeline-model-parallel-layout");
        row("megatron uneven virtual stages", ExportTarget::Megatron, UnevenVirtual,
            "parallel.stages: with vpp 2 Megatron-LM needs the same number of layers in every virtual stage "
            "(--num-layers-per-virtual-pipeline-stage), counting the embedding and the loss as one layer each at most "
            "(--account-for-embedding-in-pipeline-split); use such a split before core_v0.13; --framework-version "
            "core_v0.13 or later writes it as --pipeline-model-parallel-layout");
        row("deepspeed uneven stages", ExportTarget::DeepSpeed, UnevenInner,
            "parallel.stages: Megatron-DeepSpeed balances transformer layers evenly over the stages; this layout's "
            "stages cannot be expressed");
        row("deepspeed interleaved", ExportTarget::DeepSpeed, Vpp,
            "parallel.vpp 2: DeepSpeed's pipeline engine has no interleaved (virtual-stage) schedule; use vpp 1 and "
            "\"1f1b\"");
        row("deepspeed zero 2 with pipeline", ExportTarget::DeepSpeed, Zero2Pipeline,
            "memory.zero 2: DeepSpeed's pipeline engine works with ZeRO stage 0 or 1 only; use zero 0 or 1, or pp 1");
        row("torchtitan zero 1", ExportTarget::TorchTitan, Zero1,
            "memory.zero 1: torchtitan shards parameters and gradients together with the optimizer state (FSDP); it "
            "has no optimizer-state-only sharding");
        row("torchtitan ddp with tp", ExportTarget::TorchTitan, Zero0Tp,
            "memory.zero 0: torchtitan's plain data parallelism (data_parallel_replicate_degree) cannot be combined "
            "with tensor, pipeline or context parallelism; its sharded data parallelism (FSDP) keeps parameters "
            "sharded too "
            "(ZeRO-3), which Loom's zero 3 describes");
        row("torchtitan gpt model", ExportTarget::TorchTitan, Partition,
            "model \"gpt-mini\": torchtitan trains Llama-style models (RMSNorm, SwiGLU, rotary positions, no biases, "
            "untied head); this model has LayerNorm, a GELU MLP, learned positions, biases and a tied LM head, so "
            "torchtitan would train a different network; export it to megatron or deepspeed");
        row("deepspeed microbatch group", ExportTarget::DeepSpeed, Group,
            "parallel.microbatch_group 4: DeepSpeed's pipeline engine has no interleaved schedule whose micro-batch "
            "groups it could set; remove microbatch_group");
        row("torchtitan microbatch group", ExportTarget::TorchTitan, Group,
            "parallel.microbatch_group 4: torchtitan's Interleaved1F1B (torch.distributed.pipelining) runs 2 "
            "micro-batches per chunk (m / floor(m / pp)) and has no setting for it; remove microbatch_group or set it "
            "to 2");
        row("slurm partition", ExportTarget::Megatron, Partition,
            "the launch: the cluster profile's slurm --partition \"gpu; rm -rf ~\" has characters an #SBATCH line "
            "cannot hold");
    }

    void refusals()
    {
        QFETCH(int, target);
        QFETCH(int, change);
        QFETCH(QString, message);
        const auto t = static_cast<ExportTarget>(target);
        // torchtitan's rows start from a layout it takes (a Llama with ZeRO-3), the others from gpt-mini.
        const QByteArray tag = QTest::currentDataTag();
        const bool llama = tag.startsWith("torchtitan") && tag != "torchtitan gpt model";
        plan::Layout l
            = layoutFile(llama ? QStringLiteral("llama2-7b-slurm.json") : QStringLiteral("gpt-mini-local.json"));
        if (llama)
            l.memory.zero = 3;
        switch (change) {
        case 0:
            l.parallel.schedule = plan::ScheduleKind::GPipe;
            break;
        case 1:
            l.comm.dpCodec = *plan::Codec::parse("int8");
            break;
        case 2:
            l.comm.dpCodec = *plan::Codec::parse("topk:0.01");
            break;
        case 3:
            l.comm.dpCodec = *plan::Codec::parse("lz4");
            break;
        case 4:
            l.comm.allreduce = plan::AllreduceAlgorithm::Hierarchical;
            break;
        case 5: // 6 layers over 4 pipeline stages (pp 4, dp 1): 1, 2, 1, 2
            l.parallel.pp = 4, l.parallel.dp = 1, l.parallel.globalBatch = 16;
            l.parallel.stages = { { 0, 0 }, { 1, 2 }, { 3, 3 }, { 4, 5 } };
            break;
        case 6: // 6 layers over 2 x 2 virtual stages: 1, 2, 1, 2
            l.parallel.vpp = 2, l.parallel.schedule = plan::ScheduleKind::Interleaved;
            l.parallel.stages = { { 0, 0 }, { 1, 2 }, { 3, 3 }, { 4, 5 } };
            break;
        case 7:
            l.memory.zero = 2;
            break;
        case 8:
            l.memory.zero = 1;
            break;
        case 9:
            l.memory.zero = 0;
            break;
        case 10: // 8 layers of gpt-mini's shape over 2 x 2 virtual stages
            l.model.layers = 8, l.parallel.vpp = 2, l.parallel.schedule = plan::ScheduleKind::Interleaved;
            break;
        case 11:
            if (tag == "slurm partition") {
                l.cluster.launch.method = "slurm";
                l.cluster.launch.partition = "gpu; rm -rf ~";
            }
            break;
        }
        if (change == 12) // ErrorFeedback
            l.comm.dpCodec = *plan::Codec::parse("bf16"), l.comm.errorFeedback = true;
        if (change == 13) // Warmup
            l.comm.dpCodec = *plan::Codec::parse("fp16"), l.comm.errorFeedback = false, l.comm.codecWarmup = 100;
        if (change == 14) { // Group: interleaved with 4 micro-batches per chunk (m = 4 on gpt-mini, 16 on Llama)
            if (!llama)
                l.model.layers = 8;
            l.parallel.vpp = 2, l.parallel.schedule = plan::ScheduleKind::Interleaved, l.parallel.microbatchGroup = 4;
        }
        plan::ExportOptions options; // uneven stages: refused only by releases before --pipeline-model-parallel-layout
        if (tag.startsWith("megatron uneven"))
            options.frameworkVersion = "core_v0.12";
        const auto result = plan::exportLayout(l, t, {}, options);
        QVERIFY(!result.ok());
        QVERIFY(result.files.empty());
        QVERIFY2(std::count(result.refusals.begin(), result.refusals.end(), message.toStdString()) == 1,
            render(result).c_str());
    }

    // Megatron-LM takes the interleaved schedule's micro-batch group as it is; torchtitan only the group
    // torch.distributed.pipelining uses anyway (pp when pp divides m).
    void microbatchGroup()
    {
        plan::Layout l = layoutFile(QStringLiteral("gpt-mini-local.json"));
        l.model.layers = 8, l.parallel.vpp = 2, l.parallel.schedule = plan::ScheduleKind::Interleaved;
        l.parallel.microbatchGroup = 4;
        const auto megatron = plan::exportLayout(l, ExportTarget::Megatron);
        QVERIFY2(megatron.ok(), render(megatron).c_str());
        QVERIFY(megatron.files.at(0).text.find("--microbatch-group-size-per-virtual-pipeline-stage 4")
            != std::string::npos);
        l.parallel.microbatchGroup = 0;
        QVERIFY(plan::exportLayout(l, ExportTarget::Megatron).files.at(0).text.find("--microbatch-group")
            == std::string::npos);
        plan::Layout llama = layoutFile(QStringLiteral("llama2-7b-slurm.json"));
        llama.memory.zero = 3, llama.parallel.vpp = 2, llama.parallel.schedule = plan::ScheduleKind::Interleaved;
        llama.parallel.microbatchGroup = 2;
        const auto titan = plan::exportLayout(llama, ExportTarget::TorchTitan);
        QVERIFY2(titan.ok(), render(titan).c_str());
    }

    // Zero-bubble schedules: ZB-V is torchtitan's ZBVZeroBubble (2·pp model parts in stage order); ZB-H1,
    // ZB-H2 and DualPipe have no torchtitan counterpart, and Megatron-LM and DeepSpeed none at all.
    void zeroBubbleSchedules()
    {
        plan::Layout llama = layoutFile(QStringLiteral("llama2-7b-slurm.json"));
        llama.memory.zero = 3, llama.parallel.vpp = 2, llama.parallel.schedule = plan::ScheduleKind::ZbV;
        const auto titan = plan::exportLayout(llama, ExportTarget::TorchTitan);
        QVERIFY2(titan.ok(), render(titan).c_str());
        const std::string& config = titan.files.at(0).text;
        QVERIFY2(config.find("pipeline_parallel_schedule = \"ZBVZeroBubble\"") != std::string::npos, config.c_str());
        // Loom's zb-v lists are built from the predicted op times, ZBVZeroBubble's are its own: said in a note.
        QVERIFY2(render(titan).find("note: parallel.schedule \"zb-v\"") != std::string::npos, render(titan).c_str());
        // Its W run where listed, Loom's default; weight_fill "idle" is named as what the export does not carry.
        QVERIFY(render(titan).find("note: parallel.weight_fill") == std::string::npos);
        llama.parallel.weightFill = plan::WeightFill::Idle;
        const std::string idle = render(plan::exportLayout(llama, ExportTarget::TorchTitan));
        QVERIFY2(idle.find("parallel.weight_fill \"idle\"") != std::string::npos, idle.c_str());
        for (auto kind : { plan::ScheduleKind::ZbH1, plan::ScheduleKind::ZbH2, plan::ScheduleKind::DualPipe }) {
            llama.parallel.schedule = kind;
            llama.parallel.vpp = plan::vShaped(kind) ? 2 : 1;
            const auto refused = plan::exportLayout(llama, ExportTarget::TorchTitan);
            QVERIFY(refused.files.empty());
            QVERIFY2(
                render(refused).find(std::string(plan::toString(kind))) != std::string::npos, render(refused).c_str());
        }
        plan::Layout l = layoutFile(QStringLiteral("gpt-mini-local.json"));
        l.parallel.schedule = plan::ScheduleKind::ZbH1;
        for (auto target : { ExportTarget::Megatron, ExportTarget::DeepSpeed }) {
            const auto refused = plan::exportLayout(l, target);
            QVERIFY(refused.files.empty());
            QVERIFY2(render(refused).find("has no zero-bubble schedule") != std::string::npos, render(refused).c_str());
        }
    }

    // Llama 3's pipeline: one layer fewer on the first and the last virtual stage, or none at all ([]), is
    // Megatron-LM's split with the embedding and the loss counted as a layer each; DeepSpeed and torchtitan
    // refuse it.
    void accountedStages_data()
    {
        QTest::addColumn<int>("layers");
        QTest::addColumn<QString>("stages");
        QTest::addColumn<bool>("embedding");
        QTest::addColumn<bool>("loss");
        QTest::newRow("one layer fewer at both ends") << 6 << "[[0,0],[1,2],[3,4],[5,5]]" << true << true;
        QTest::newRow("embedding and head chunks alone") << 2 << "[[],[0,0],[1,1],[]]" << true << true;
        QTest::newRow("embedding chunk alone") << 3 << "[[],[0,0],[1,1],[2,2]]" << true << false;
    }
    void accountedStages()
    {
        QFETCH(int, layers);
        QFETCH(QString, stages);
        QFETCH(bool, embedding);
        QFETCH(bool, loss);
        plan::Layout l = layoutFile(QStringLiteral("gpt-mini-local.json"));
        l.model.layers = layers, l.parallel.vpp = 2, l.parallel.schedule = plan::ScheduleKind::Interleaved;
        l.parallel.stages.clear();
        for (const auto& s : nlohmann::json::parse(stages.toStdString())) {
            const std::int64_t next = l.parallel.stages.empty() ? 0 : l.parallel.stages.back().last + 1;
            l.parallel.stages.push_back(s.empty() ? plan::StageRange { next, next - 1 }
                                                  : plan::StageRange { s[0].get<int>(), s[1].get<int>() });
        }
        QVERIFY2(!plan::validateLayout(l).hasErrors(), plan::validateLayout(l).format().c_str());
        const auto megatron = plan::exportLayout(l, ExportTarget::Megatron);
        QVERIFY2(megatron.ok(), render(megatron).c_str());
        const std::string& text = megatron.files.at(0).text;
        QCOMPARE(text.find("--account-for-embedding-in-pipeline-split") != std::string::npos, embedding);
        QCOMPARE(text.find("--account-for-loss-in-pipeline-split") != std::string::npos, loss);
        QVERIFY2(text.find("--num-virtual-stages-per-pipeline-rank 2") != std::string::npos, text.c_str());
        QVERIFY(text.find("--num-layers-per-virtual-pipeline-stage") == std::string::npos);
        QVERIFY(!plan::exportLayout(l, ExportTarget::DeepSpeed).ok());
        QVERIFY(!plan::exportLayout(l, ExportTarget::TorchTitan).ok());
    }

    // memory.efficient_norm: no framework's command line sets it (Megatron-LM's memory_efficient_layer_norm is
    // kept off it), so every export notes how much more its norms keep, and none writes a flag that does not exist.
    void efficientNorm()
    {
        plan::Layout l = layoutFile(QStringLiteral("gpt-mini-local.json"));
        l.memory.efficientNorm = true;
        for (auto t : { ExportTarget::Megatron, ExportTarget::DeepSpeed }) {
            const auto r = plan::exportLayout(l, t);
            QVERIFY2(r.ok(), render(r).c_str());
            QVERIFY(render(r).find("note: memory.efficient_norm:") != std::string::npos);
            QVERIFY(render(r).find("--memory-efficient-layer-norm") == std::string::npos);
        }
    }

    // Uneven stages of any shape, interleaved or not: Megatron-LM's --pipeline-model-parallel-layout from
    // core_v0.13 (E the embedding, t a layer, L the loss), torchtitan's module_fqns_per_model_part.
    void unevenStages()
    {
        plan::Layout l = layoutFile(QStringLiteral("gpt-mini-local.json"));
        l.parallel.pp = 4, l.parallel.dp = 1, l.parallel.globalBatch = 16;
        l.parallel.stages = { { 0, 0 }, { 1, 2 }, { 3, 3 }, { 4, 5 } };
        const auto r = plan::exportLayout(l, ExportTarget::Megatron);
        QVERIFY2(r.ok(), render(r).c_str());
        QVERIFY2(r.files.at(0).text.find("--pipeline-model-parallel-layout 'Et|t*2|t|t*2L'") != std::string::npos,
            r.files.at(0).text.c_str());
        plan::Layout llama = layoutFile(QStringLiteral("llama2-7b-slurm.json"));
        llama.memory.zero = 3;
        llama.parallel.stages = { { 0, 14 }, { 15, 31 } };
        const auto titan = plan::exportLayout(llama, ExportTarget::TorchTitan);
        QVERIFY2(titan.ok(), render(titan).c_str());
        QVERIFY(titan.files.at(0).text.find("[\"tok_embeddings\", \"layers.0\", ") != std::string::npos);
        QVERIFY(titan.files.at(0).text.find("\"layers.14\"],\n    [\"layers.15\"") != std::string::npos);
        QVERIFY(titan.files.at(0).text.find("\"layers.31\", \"norm\", \"output\"]") != std::string::npos);
    }

    // What the launch script takes from the cluster profile is quoted: a host name cannot become a command.
    void launchQuotesProfileText()
    {
        plan::Layout l = layoutFile(QStringLiteral("gpt-mini-local.json"));
        l.cluster.devicesPerNode = 4;
        l.nodes = 2;
        l.cluster.hosts = { "node0$(reboot)", "node1" };
        const auto result = plan::exportLayout(l, ExportTarget::Megatron);
        QVERIFY2(result.ok(), render(result).c_str());
        const std::string& s = result.files.at(0).text;
        QVERIFY(s.find("MASTER_ADDR=${MASTER_ADDR:-'node0$(reboot)'}") != std::string::npos);
        QVERIFY(s.find("--nnodes 2 --nproc-per-node 4") != std::string::npos);
    }

    // Gradients reduced in bf16: Megatron-LM's --grad-reduce-in-bf16, DeepSpeed's communication_data_type;
    // torchtitan refuses it.
    void bf16Reduction()
    {
        plan::Layout l = layoutFile(QStringLiteral("llama2-7b-slurm.json"));
        l.memory.zero = 1;
        l.comm.dpCodec = *plan::Codec::parse("bf16");
        l.comm.errorFeedback = false;
        auto r = plan::exportLayout(l, ExportTarget::Megatron);
        QVERIFY(r.ok() && r.files.at(0).text.find("    --grad-reduce-in-bf16\n") != std::string::npos);
        r = plan::exportLayout(l, ExportTarget::DeepSpeed);
        QVERIFY(r.ok() && r.files.at(0).text.find("\"communication_data_type\": \"bf16\"") != std::string::npos);
        l.memory.zero = 3; // torchtitan's mixed_precision_reduce takes float32 only
        r = plan::exportLayout(l, ExportTarget::TorchTitan);
        QVERIFY(!r.ok());
        QVERIFY2(render(r).find("mixed_precision_reduce takes only") != std::string::npos, render(r).c_str());
    }

    // loom export applies loom run's policy: a layout file's own sbatch_options never reach the #SBATCH header;
    // a cluster profile from the user's store may carry them.
    void sbatchOptionsPolicy()
    {
        plan::Layout l = layoutFile(QStringLiteral("llama2-7b-slurm.json"));
        l.cluster.launch.sbatchOptions = { "--wrap=scontrol" };
        auto r = plan::exportLayout(l, ExportTarget::Megatron);
        QVERIFY(!r.ok());
        QVERIFY2(render(r).find("cluster.launch.sbatch_options: a layout file may not pass options to sbatch")
                != std::string::npos,
            render(r).c_str());
        l.clusterProfile = "mine";
        l.cluster.launch.sbatchOptions = { "--account=proj42" };
        r = plan::exportLayout(l, ExportTarget::Megatron);
        QVERIFY2(r.ok(), render(r).c_str());
        QVERIFY(r.files.at(0).text.find("#SBATCH --account=proj42\n") != std::string::npos);
    }

    // Names with control characters: TOML escapes them (DEL too), comments drop them.
    void controlCharactersInNames()
    {
        plan::Layout l = layoutFile(QStringLiteral("llama2-7b-ddp.json"));
        l.name = "a\x7f\nb";
        l.description = "d\x7f\ne";
        const auto r = plan::exportLayout(l, ExportTarget::TorchTitan);
        QVERIFY2(r.ok(), render(r).c_str());
        const std::string& toml = r.files.at(0).text;
        QVERIFY2(toml.find("description = \"d\\u007f\\u000ae\"") != std::string::npos, toml.c_str());
        QVERIFY(toml.find('\x7f') == std::string::npos);
        const std::string& script = r.files.at(1).text; // the name only in a quoted word, never in a comment
        const auto comment = script.find("launch of the Loom layout");
        QVERIFY(comment != std::string::npos);
        QCOMPARE(script.substr(comment, script.find('\n', comment) - comment),
            std::string("launch of the Loom layout \"a  b\", written by loom export."));
    }

    void names()
    {
        for (auto t : { ExportTarget::Megatron, ExportTarget::DeepSpeed, ExportTarget::TorchTitan })
            QCOMPARE(plan::exportTargetFromString(plan::toString(t)), std::optional(t));
        QCOMPARE(plan::exportTargetFromString("nemo"), std::nullopt);
        const auto r = plan::exportLayout(
            layoutFile(QStringLiteral("gpt-mini-local.json")), ExportTarget::DeepSpeed, "out/x.json");
        QCOMPARE(r.files.at(0).name, std::string("out/x.json"));
        QCOMPARE(r.files.at(1).name, std::string("out/x.deepspeed.sh"));
        QVERIFY(r.files.at(1).text.find("/x.json}") != std::string::npos);
    }
};

QTEST_APPLESS_MAIN(TestExport)
#include "tst_export.moc"
