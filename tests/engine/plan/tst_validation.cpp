// One case per validation rule: each row patches a valid base layout (JSON merge patch, RFC 7386; null
// deletes a field) and names the field and the words the message must contain.
#include "engine/plan/CostModel.h"
#include "engine/plan/LayoutParser.h"
#include "engine/plan/LayoutValidator.h"
#include "engine/profiles/BuiltinProfiles.h"

#include <QTest>

#include <nlohmann/json.hpp>

using namespace loom::plan;
using loom::profiles::BuiltinProfiles;
using nlohmann::json;

namespace {

// gpt2-124m on one dgx-a100 node: tp 4 x pp 2 x dp 1 = 8 devices. Valid, without warnings.
json baseLayout()
{
    return json::parse(R"({
        "loom_layout": 1, "name": "base", "model": "gpt2-124m", "cluster": "dgx-a100", "nodes": 1,
        "parallel": {"tp": 4, "pp": 2, "dp": 1, "vpp": 1, "micro_batch": 1, "global_batch": 8, "schedule": "1f1b"},
        "memory": {"zero": 0, "recompute": "none"}, "precision": "bf16",
        "comm": {"dp_codec": "none", "error_feedback": true, "overlap": true, "bucket_mb": 25, "chunk_kb": 1024,
                 "allreduce": "library"}})");
}

// An inline model with the given overrides (gpt2-124m's shape otherwise).
std::string inlineModel(const std::string& overrides)
{
    json m = json::parse(R"({"name": "custom", "layers": 12, "hidden": 768, "heads": 12, "ffn_hidden": 3072,
                             "vocab": 50257, "seq_len": 1024})");
    m.merge_patch(json::parse(overrides));
    return json { { "model", m } }.dump();
}

LayoutReadResult readPatched(const std::string& patch)
{
    json layout = baseLayout();
    layout.merge_patch(json::parse(patch));
    return readLayout(layout.dump(), BuiltinProfiles::instance());
}

} // namespace

class TestValidation : public QObject {
    Q_OBJECT
private slots:
    void baseIsValid()
    {
        auto r = readPatched("{}");
        QVERIFY2(r.ok(), r.diagnostics.format().c_str());
        QVERIFY2(r.diagnostics.empty(), r.diagnostics.format().c_str());
    }

    // Issue 36: the does-not-fit advice names only what the layout has not done yet (it advised recompute when
    // recompute was already full, and ZeRO when ZeRO-3 was on).
    void fitAdviceNamesWhatIsLeft_data()
    {
        QTest::addColumn<QString>("patch");
        QTest::addColumn<bool>("advisesZero");
        QTest::addColumn<bool>("advisesRecompute");
        QTest::newRow("nothing done") << R"({"nodes": 2, "parallel": {"dp": 2, "global_batch": 16}})" << true << true;
        QTest::newRow("recompute full")
            << R"({"nodes": 2, "parallel": {"dp": 2, "global_batch": 16}, "memory": {"recompute": "full"}})" << true
            << false;
        QTest::newRow("ZeRO-3 and full")
            << R"({"nodes": 2, "parallel": {"dp": 2, "global_batch": 16}, "memory": {"zero": 3, "recompute": "full"}})"
            << false << false;
    }
    void fitAdviceNamesWhatIsLeft()
    {
        QFETCH(QString, patch);
        QFETCH(bool, advisesZero);
        QFETCH(bool, advisesRecompute);
        auto r = readPatched(patch.toStdString());
        QVERIFY2(r.ok(), r.diagnostics.format().c_str());
        Layout l = *r.layout;
        l.cluster.device.memoryGB = 0.01; // nothing fits
        const Prediction p = predict(l);
        QVERIFY(!p.fits);
        Diagnostics d;
        warnIfItDoesNotFit(l, p, d);
        QCOMPARE(int(d.warnings().size()), 1);
        const QString message = QString::fromStdString(d.warnings().front().message);
        QVERIFY2(message.contains(QLatin1String("raise tp or pp")), qPrintable(message));
        QVERIFY2(message.contains(QLatin1String("memory.zero")) == advisesZero, qPrintable(message));
        QVERIFY2(message.contains(QLatin1String("recompute")) == advisesRecompute, qPrintable(message));
    }

    void unevenInterleavedStages()
    {
        // Interleaved with uneven stages: 12 layers on pp·vpp = 2·4 = 8 virtual stages, valid when the stages are
        // listed (Llama 3's way: fewer layers on the first and the last).
        auto r = readPatched(R"({"parallel": {"tp": 4, "pp": 2, "dp": 1, "vpp": 4, "micro_batch": 1, "global_batch": 8,
            "schedule": "interleaved", "stages": [[0, 0], [1, 2], [3, 4], [5, 6], [7, 8], [9, 9], [10, 10], [11, 11]]}})");
        QVERIFY2(r.ok(), r.diagnostics.format().c_str());
        const Diagnostics d = validateLayout(*r.layout);
        QVERIFY2(!d.hasErrors(), d.format().c_str());
        // A pair that starts after it ends is refused, naming [] as the way to write a chunk without layers.
        r = readPatched(R"({"parallel": {"tp": 4, "pp": 2, "dp": 1, "vpp": 4, "micro_batch": 1,
            "global_batch": 8, "schedule": "interleaved",
            "stages": [[0, 0], [1, 2], [3, 4], [5, 6], [7, 8], [9, 10], [11, 11], [12, 11]]}})");
        QVERIFY(!r.ok());
        QVERIFY2(r.diagnostics.format().find("parallel.stages[7]=[12, 11] starts after it ends") != std::string::npos,
            r.diagnostics.format().c_str());
        QVERIFY2(r.diagnostics.format().find("or []") != std::string::npos, r.diagnostics.format().c_str());
    }

    void emptyEndChunks()
    {
        // Llama 3's pipeline: the first chunk holds only the embedding and the last only the LM head ([]), which
        // lets pp·vpp reach model.layers + 2 (here 2·7 = 14 virtual stages for 12 layers).
        const std::string stages = R"([[], [0, 0], [1, 1], [2, 2], [3, 3], [4, 4], [5, 5], [6, 6], [7, 7], [8, 8],
            [9, 9], [10, 10], [11, 11], []])";
        auto r = readPatched(R"({"parallel": {"tp": 4, "pp": 2, "dp": 1, "vpp": 7, "micro_batch": 1,
            "global_batch": 8, "schedule": "interleaved", "stages": )"
            + stages + "}}");
        QVERIFY2(r.ok(), r.diagnostics.format().c_str());
        QVERIFY2(!validateLayout(*r.layout).hasErrors(), validateLayout(*r.layout).format().c_str());
        const auto ranges = r.layout->stageRanges();
        QVERIFY(ranges.front().empty() && ranges.back().empty() && !ranges[1].empty());
        QCOMPARE(ranges.front().first, std::int64_t(0));
        QCOMPARE(ranges.back().first, std::int64_t(12));
        // Written back as [] and read again to the same layout.
        const std::string text = writeLayout(*r.layout);
        QVERIFY2(text.find("[]") != std::string::npos, text.c_str());
        const auto again = readLayout(text, BuiltinProfiles::instance());
        QVERIFY2(again.ok(), again.diagnostics.format().c_str());
        QVERIFY(again.layout->parallel.stages == r.layout->parallel.stages);
        // An empty chunk anywhere else is refused, saying which and why.
        r = readPatched(R"({"parallel": {"tp": 4, "pp": 2, "dp": 1, "vpp": 4, "micro_batch": 1, "global_batch": 8,
            "schedule": "interleaved", "stages": [[0, 1], [2, 3], [], [4, 5], [6, 7], [8, 9], [10, 10], [11, 11]]}})");
        QVERIFY(!r.ok() || validateLayout(*r.layout).hasErrors());
        const std::string why = r.ok() ? validateLayout(*r.layout).format() : r.diagnostics.format();
        QVERIFY2(why.find("parallel.stages[2]=[] holds no layers") != std::string::npos, why.c_str());
        QVERIFY2(why.find("only the first virtual stage") != std::string::npos, why.c_str());
    }

    void newChoicesRoundTrip()
    {
        auto r
            = readPatched(R"({"parallel": {"tp": 4, "pp": 2, "dp": 1, "micro_batch": 1, "global_batch": 8, "sp": true},
            "memory": {"zero": 3, "recompute": "selective", "attention": "materialized", "efficient_norm": true}})");
        QVERIFY2(r.ok(), r.diagnostics.format().c_str());
        QVERIFY(r.layout->parallel.sp);
        QCOMPARE(r.layout->memory.zero, 3);
        QVERIFY(r.layout->memory.attention == Attention::Materialized);
        QVERIFY(r.layout->memory.efficientNorm);
        QVERIFY(writeLayout(*r.layout).find("\"efficient_norm\": true") != std::string::npos);
        auto again = readLayout(writeLayout(*r.layout), BuiltinProfiles::instance());
        QVERIFY(again.ok());
        QVERIFY(*again.layout == *r.layout);
        // sp with tp = 1 and ZeRO with dp = 1 warn.
        r = readPatched(R"({"parallel": {"tp": 1, "pp": 8, "dp": 1, "micro_batch": 1, "global_batch": 8, "sp": true},
            "memory": {"zero": 2}})");
        QVERIFY(r.ok());
        const std::string w = validateLayout(*r.layout).format();
        QVERIFY2(w.find("parallel.sp=true") != std::string::npos && w.find("memory.zero=2 shards") != std::string::npos,
            w.c_str());
    }

    void microbatchGroupRoundTrip()
    {
        // With a group, m need not be a multiple of pp (m = 7 on pp 2, N = 7: Megatron-LM's rule); the group is
        // written back only when set.
        auto r = readPatched(
            R"({"parallel": {"schedule": "interleaved", "vpp": 2, "global_batch": 7, "microbatch_group": 7}})");
        QVERIFY2(r.ok() && r.diagnostics.empty(), r.diagnostics.format().c_str());
        QCOMPARE(r.layout->parallel.microbatchGroup, std::int64_t(7));
        QVERIFY2(!validateLayout(*r.layout).hasErrors(), validateLayout(*r.layout).format().c_str());
        const std::string text = writeLayout(*r.layout);
        QVERIFY(text.find("\"microbatch_group\": 7") != std::string::npos);
        auto again = readLayout(text, BuiltinProfiles::instance());
        QVERIFY(again.ok() && *again.layout == *r.layout);
        r = readPatched(R"({"parallel": {"schedule": "interleaved", "vpp": 2}})");
        QVERIFY(r.ok());
        QVERIFY(writeLayout(*r.layout).find("microbatch_group") == std::string::npos);
    }

    void rule_data()
    {
        QTest::addColumn<QString>("patch");
        QTest::addColumn<bool>("isError");
        QTest::addColumn<QString>("field");
        QTest::addColumn<QString>("message"); // a part of the message that must appear verbatim

        // Devices
        QTest::newRow("tp·pp·dp != devices")
            << R"({"parallel": {"dp": 2}})" << true << "parallel"
            << "parallel.tp·pp·dp = 4·2·2 = 16 does not match the 8 devices of nodes=1 × 8 devices per node "
               "(dgx-a100); with tp=4 and pp=2 use dp=1, or set nodes to 2";
        QTest::newRow("tp·cp·pp·dp != devices")
            << R"({"parallel": {"cp": 2}})" << true << "parallel"
            << "parallel.tp·cp·pp·dp = 4·2·2·1 = 16 does not match the 8 devices of nodes=1 × 8 devices per node "
               "(dgx-a100); set nodes to 2";
        // Context parallel
        QTest::newRow("cp does not split seq_len into 2·cp chunks")
            << QString::fromStdString(
                   inlineModel(R"({"seq_len": 1022})").insert(1, R"("parallel": {"tp": 2, "cp": 2, "pp": 2}, )"))
            << true << "parallel.cp"
            << "parallel.cp=2 needs model.seq_len=1022 divisible by 2·cp = 4 (each sequence is cut into 2·cp equal "
               "chunks and CP rank i holds chunks i and 2·cp-1-i, so that every rank does the same causal attention "
               "work); with model.seq_len=1022 use cp in {7, 73, 511}";
        QTest::newRow("cp with materialized attention")
            << R"({"parallel": {"tp": 2, "cp": 2, "pp": 2}, "memory": {"attention": "materialized"}})" << false
            << "memory.attention"
            << "ring attention computes the scores one K/V block at a time";
        QTest::newRow("CP group across nodes")
            << R"({"nodes": 2, "parallel": {"tp": 4, "cp": 4, "pp": 1}})" << false << "parallel.cp"
            << "a CP group spans 2 nodes (tp·cp = 4·4 = 16 ranks per TP×CP block, 8 devices per node)";
        QTest::newRow("nodes > 1 on a one-machine cluster")
            << R"({"cluster": "local", "nodes": 2})" << true << "nodes"
            << "nodes=2 but cluster local has no inter-node link (it is one machine); set nodes to 1";
        // Tensor parallel
        QTest::newRow("tp does not divide heads")
            << R"({"parallel": {"tp": 8, "pp": 1}})" << true << "parallel.tp"
            << "parallel.tp=8 does not divide model.heads=12; valid tp: 1, 2, 3, 4, 6, 12";
        QTest::newRow("tp does not divide ffn_hidden")
            << QString::fromStdString(inlineModel(R"({"ffn_hidden": 3074})")) << true << "parallel.tp"
            << "parallel.tp=4 does not divide model.ffn_hidden=3074; valid tp: 1, 2";
        QTest::newRow("tp does not divide padded vocab")
            << QString::fromStdString(inlineModel(R"({"vocab_pad_multiple": 1})")) << true << "parallel.tp"
            << "parallel.tp=4 does not divide the padded vocabulary 50257 (model.vocab=50257 rounded up to a multiple "
               "of 1); valid tp: 1";
        QTest::newRow("tp does not divide kv_heads")
            << QString::fromStdString(inlineModel(R"({"kv_heads": 6})")) << true << "parallel.tp"
            << "parallel.tp=4 does not divide model.kv_heads=6 (Loom splits the KV heads over the tp ranks as "
               "Megatron-LM does and never replicates them, so every rank needs whole KV heads); valid tp: 1, 2, 3, 6";
        QTest::newRow("heads do not divide hidden")
            << QString::fromStdString(inlineModel(R"({"heads": 10, "kv_heads": null})")) << true << "model.heads"
            << "model.heads=10 does not divide model.hidden=768";
        QTest::newRow("kv_heads do not divide heads")
            << QString::fromStdString(inlineModel(R"({"kv_heads": 5})")) << true << "model.kv_heads"
            << "model.kv_heads=5 does not divide model.heads=12";
        // Pipeline
        QTest::newRow("pp > layers")
            << R"({"parallel": {"tp": 1, "pp": 16, "dp": 1, "global_batch": 16}, "nodes": 2})" << true << "parallel.pp"
            << "parallel.pp=16 is more than model.layers=12; every pipeline stage needs at least one layer";
        QTest::newRow("stages: wrong count") << R"({"parallel": {"stages": [[0, 11]]}})" << true << "parallel.stages"
                                             << "parallel.stages has 1 entries but the pipeline has 2 stages (pp)";
        QTest::newRow("stages: missing layers")
            << R"({"parallel": {"stages": [[0, 3], [7, 11]]}})" << true << "parallel.stages"
            << "parallel.stages leaves layers 4-6 on no stage";
        QTest::newRow("stages: doubled layers")
            << R"({"parallel": {"stages": [[0, 6], [5, 11]]}})" << true << "parallel.stages"
            << "parallel.stages puts layers 5-6 on more than one stage";
        QTest::newRow("stages: out of order")
            << R"({"parallel": {"stages": [[6, 11], [0, 5]]}})" << true << "parallel.stages"
            << "parallel.stages is not in layer order: stage 1 starts at layer 0 but stage 0 ends at layer 11";
        QTest::newRow("stages: past the last layer")
            << R"({"parallel": {"stages": [[0, 5], [6, 12]]}})" << true << "parallel.stages[1]"
            << "parallel.stages[1]=[6, 12] goes past the last layer 11";
        QTest::newRow("stages: first after last")
            << R"({"parallel": {"stages": [[0, 5], [11, 6]]}})" << true << "parallel.stages[1]"
            << "parallel.stages[1]=[11, 6] starts after it ends";
        QTest::newRow("stages: not a pair")
            << R"({"parallel": {"stages": [[0, 5], [6]]}})" << true << "parallel.stages[1]"
            << "parallel.stages[1]=[6] is not a [first_layer, last_layer] pair";
        // Batch
        QTest::newRow("global batch not a multiple of micro_batch·dp")
            << R"({"parallel": {"tp": 2, "dp": 2, "micro_batch": 4, "global_batch": 100}})" << true
            << "parallel.global_batch"
            << "parallel.global_batch=100 is not a multiple of micro_batch·dp = 4·2 = 8; use global_batch 96 or 104";
        // Schedules
        QTest::newRow("interleaved: layers not divisible by pp·vpp")
            << R"({"parallel": {"schedule": "interleaved", "vpp": 4}})" << true << "parallel.vpp"
            << "schedule \"interleaved\" needs model.layers=12 divisible by pp·vpp = 2·4 = 8; with pp=2 use vpp in {2, "
               "3, 6}";
        QTest::newRow("interleaved: micro-batches not divisible by pp")
            << R"({"parallel": {"schedule": "interleaved", "vpp": 2, "global_batch": 7}})" << true
            << "parallel.global_batch"
            << "needs the micro-batches per step (global_batch / (micro_batch·dp) = 7) divisible by pp=2; use "
               "global_batch a multiple of 2";
        QTest::newRow("microbatch_group below pp")
            << R"({"parallel": {"schedule": "interleaved", "vpp": 2, "microbatch_group": 1}})" << true
            << "parallel.microbatch_group"
            << "parallel.microbatch_group=1 is smaller than pp=2: a micro-batch reaches rank 0's next chunk only after "
               "all pp stages";
        QTest::newRow("microbatch_group above the micro-batches")
            << R"({"parallel": {"schedule": "interleaved", "vpp": 2, "microbatch_group": 9}})" << true
            << "parallel.microbatch_group"
            << "parallel.microbatch_group=9 is more than the 8 micro-batches per step (global_batch / "
               "(micro_batch·dp)); "
               "use a value from pp=2 to 8 that divides the micro-batches or leaves at least pp, e.g. one of {2, 4, 8}";
        QTest::newRow("microbatch_group leaves a short last group")
            << R"({"parallel": {"schedule": "interleaved", "vpp": 2, "microbatch_group": 7}})" << true
            << "parallel.microbatch_group"
            << "leaves a last group of 1 micro-batches (8 mod 7), fewer than pp=2";
        QTest::newRow("microbatch_group without interleaving (warning)")
            << R"({"parallel": {"microbatch_group": 4}})" << false << "parallel.microbatch_group"
            << "parallel.microbatch_group=4 only shapes schedule \"interleaved\"; with \"1f1b\" it changes nothing";
        QTest::newRow("interleaved: vpp 1") << R"({"parallel": {"schedule": "interleaved"}})" << true << "parallel.vpp"
                                            << "needs vpp ≥ 2 model chunks per pipeline rank (here vpp=1)";
        QTest::newRow("interleaved: pp 1")
            << R"({"parallel": {"schedule": "interleaved", "vpp": 2, "tp": 8, "pp": 1}, "model": "gpt2-350m"})" << true
            << "parallel.schedule"
            << "needs a pipeline (pp ≥ 2, here pp=1)";
        QTest::newRow("vpp without interleaving")
            << R"({"parallel": {"vpp": 2}})" << true << "parallel.vpp"
            << "parallel.vpp=2 needs schedule \"interleaved\" (schedule is \"1f1b\")";
        QTest::newRow("interleaved stages need pp·vpp entries")
            << R"({"parallel": {"schedule": "interleaved", "vpp": 2, "stages": [[0, 5], [6, 11]]}})" << true
            << "parallel.stages"
            << "has 2 entries but the pipeline has 4 virtual stages (pp·vpp)";
        // Profiles
        QTest::newRow("unknown model profile")
            << R"({"model": "gpt2-124"})" << true << "model"
            << "model=\"gpt2-124\" is not a known model profile; known: gpt-mini, gpt-tiny, gpt2-1.5b, gpt2-124m, "
               "gpt2-350m, gpt2-774m, gpt3-175b, llama-tiny, llama2-70b, llama2-7b, llama3-405b, megatron-1t, "
               "mixtral-8x7b, moe-tiny (did you mean \"gpt2-124m\"?)";
        QTest::newRow("unknown cluster profile")
            << R"({"cluster": "dgx-z900"})" << true << "cluster"
            << "cluster=\"dgx-z900\" is not a known cluster profile; known: dgx-a100, dgx-b200, dgx-h100, dgx-h200, "
               "gb200-nvl72, grand-teton-h100, hgx-h800, local, mi300x-8, pcie-4gpu";
        // Field-level
        QTest::newRow("unknown field warns")
            << R"({"paralel": 1})" << false << "paralel"
            << "paralel is not a known field and is ignored (did you mean \"parallel\"?)";
        QTest::newRow("unknown nested field warns") << R"({"comm": {"bucket": 4}})" << false << "comm.bucket"
                                                    << "comm.bucket is not a known field and is ignored";
        QTest::newRow("wrong type: quoted number")
            << R"({"parallel": {"tp": "4"}})" << true << "parallel.tp"
            << "parallel.tp=\"4\" is a string; write a whole number from 1 to 1048576 without quotes, e.g. \"tp\": 4";
        QTest::newRow("wrong type: bool as string")
            << R"({"comm": {"overlap": "yes"}})" << true << "comm.overlap"
            << "comm.overlap=\"yes\" is a string; write true or false (without quotes)";
        QTest::newRow("wrong type: object for number") << R"({"parallel": {"pp": {"n": 2}}})" << true << "parallel.pp"
                                                       << "parallel.pp={\"n\":2} is an object; write a whole number";
        QTest::newRow("not a whole number") << R"({"parallel": {"micro_batch": 1.5}})" << true << "parallel.micro_batch"
                                            << "parallel.micro_batch=1.5 is not a whole number";
        QTest::newRow("zero") << R"({"parallel": {"dp": 0}})" << true << "parallel.dp"
                              << "parallel.dp=0 is too small; it must be at least 1";
        QTest::newRow("negative") << R"({"comm": {"bucket_mb": -1}})" << true << "comm.bucket_mb"
                                  << "comm.bucket_mb=-1 is too small; it must be above 0";
        QTest::newRow("too large") << R"({"parallel": {"tp": 100000000000}})" << true << "parallel.tp"
                                   << "parallel.tp=100000000000 is too large; it must be at most 1048576";
        QTest::newRow("too large for a 64-bit integer")
            << R"({"parallel": {"global_batch": 18446744073709551615}})" << true << "parallel.global_batch"
            << "is too large; it must be at most 16777216";
        QTest::newRow("missing field") << R"({"parallel": {"global_batch": null}})" << true << "parallel.global_batch"
                                       << "parallel.global_batch is missing; add \"global_batch\" to parallel";
        QTest::newRow("missing section") << R"({"parallel": null})" << true << "parallel"
                                         << "parallel is missing; add \"parallel\" to the layout";
        QTest::newRow("missing name") << R"({"name": null})" << true << "name"
                                      << "name is missing";
        QTest::newRow("unsupported version") << R"({"loom_layout": 2})" << true << "loom_layout"
                                             << "loom_layout=2 is not supported: this Loom reads layout version 1";
        QTest::newRow("not a layout") << R"({"loom_layout": null})" << true << "loom_layout"
                                      << "loom_layout is missing, so this is not a Loom layout";
        QTest::newRow("unknown schedule suggests")
            << R"({"parallel": {"schedule": "1F1B"}})" << true << "parallel.schedule"
            << "parallel.schedule=\"1F1B\" is not known; use one of \"gpipe\", \"1f1b\", \"interleaved\", \"zb-h1\", "
               "\"zb-h2\", \"zb-v\", \"dualpipe\" (did you mean "
               "\"1f1b\"?)";
        QTest::newRow("unknown recompute") << R"({"memory": {"recompute": "all"}})" << true << "memory.recompute"
                                           << "use one of \"none\", \"selective\", \"full\"";
        QTest::newRow("zero stage 4 unknown") << R"({"memory": {"zero": 4}})" << true << "memory.zero"
                                              << "memory.zero=4 is too large; it must be at most 3";
        QTest::newRow("bad attention") << R"({"memory": {"attention": "sparse"}})" << true << "memory.attention"
                                       << "memory.attention";
        QTest::newRow("efficient_norm is a bool")
            << R"({"memory": {"efficient_norm": "yes"}})" << true << "memory.efficient_norm"
            << "memory.efficient_norm";
        QTest::newRow("sp is a bool")
            << R"({"parallel": {"tp": 4, "pp": 1, "dp": 2, "micro_batch": 1, "global_batch": 8, "sp": 1}})" << true
            << "parallel.sp"
            << "parallel.sp";
        QTest::newRow("sp needs tp to divide seq_len")
            << R"({"model": {"name": "odd-seq", "layers": 12, "hidden": 768, "heads": 12, "ffn_hidden": 3072,
                "vocab": 50257, "seq_len": 1022}, "parallel": {"sp": true}})"
            << true << "parallel.sp"
            << "parallel.sp=true gives each tp rank seq_len/tp positions of every sequence, but tp=4 does not divide "
               "model.seq_len=1022";
        QTest::newRow("bad codec") << R"({"comm": {"dp_codec": "int2"}})" << true << "comm.dp_codec"
                                   << "comm.dp_codec=\"int2\" is not a known codec; use one of";
        QTest::newRow("bad top-k fraction") << R"({"comm": {"dp_codec": "topk:0"}})" << true << "comm.dp_codec"
                                            << "the top-k fraction must be above 0 and below 1";
        QTest::newRow("top-k feedback without warm-up")
            << R"({"parallel": {"tp": 4, "pp": 1, "dp": 2}, "comm": {"dp_codec": "topk:0.01", "codec_warmup": 0}})"
            << true << "comm.codec_warmup"
            << "leaves no uncompressed AdamW steps to freeze the variance from";
        QTest::newRow("negative codec warm-up") << R"({"comm": {"codec_warmup": -1}})" << true << "comm.codec_warmup"
                                                << "comm.codec_warmup=-1 is too small";
        QTest::newRow("unknown precision") << R"({"precision": "fp8"})" << true << "precision"
                                           << "precision=\"fp8\" is not known; use one of \"fp32\", \"fp16\", \"bf16\"";
        QTest::newRow("too many ranks") << R"({"parallel": {"tp": 1024, "pp": 1024, "dp": 2}})" << true << "parallel"
                                        << "= 2097152 ranks is more than Loom's limit of 1048576";
        // Warnings
        QTest::newRow("TP group spans nodes (warning)")
            << R"({"model": "gpt3-175b", "nodes": 2, "parallel": {"tp": 16, "pp": 1, "global_batch": 8}})" << false
            << "parallel.tp"
            << "a TP group spans 2 nodes (tp=16 is more than the 8 devices of a node)";
        QTest::newRow("TP group straddles nodes (warning)")
            << R"({"nodes": 3, "parallel": {"tp": 3, "pp": 8, "global_batch": 8}})" << false << "parallel.tp"
            << "a TP group spans 2 nodes (tp=3 does not divide the 8 devices of a node)";
        QTest::newRow("does not fit in memory (warning)")
            << R"({"model": "gpt3-175b", "parallel": {"tp": 8, "pp": 1}})" << false << "memory"
            << "GB per device (parameters";
        QTest::newRow("ZeRO-1 with dp 1 (warning)")
            << R"({"memory": {"zero": 1}})" << false << "memory.zero"
            << "memory.zero=1 shards optimizer state across the DP group, but dp=1";
        QTest::newRow("codec with dp 1 (warning)") << R"({"comm": {"dp_codec": "int8"}})" << false << "comm.dp_codec"
                                                   << "compresses the data-parallel all-reduce, but dp=1";
        QTest::newRow("hierarchical on one node (warning)")
            << R"({"comm": {"allreduce": "hierarchical"}})" << false << "comm.allreduce"
            << "but the layout has one node";
        QTest::newRow("staleness 2") << R"({"comm": {"staleness": 2}})" << true << "comm.staleness"
                                     << "comm.staleness=2 is too large";
        QTest::newRow("staleness with top-k feedback")
            << R"({"parallel": {"tp": 4, "pp": 1, "dp": 2}, "comm": {"dp_codec": "topk:0.01", "staleness": 1}})" << true
            << "comm.staleness"
            << "top-k's sparse AdamW exchanges the update inside the optimizer step";
        QTest::newRow("staleness with dp 1 (warning)") << R"({"comm": {"staleness": 1}})" << false << "comm.staleness"
                                                       << "but dp=1, so there is none to hide";
        QTest::newRow("zero 3 with a codec")
            << R"({"parallel": {"tp": 4, "pp": 1, "dp": 2}, "memory": {"zero": 3}, "comm": {"dp_codec": "int8"}})"
            << true << "comm.dp_codec"
            << "memory.zero=3 reduce-scatters the gradients instead; use dp_codec \"none\"";
        QTest::newRow("zero 2 with staleness")
            << R"({"parallel": {"tp": 4, "pp": 1, "dp": 2}, "memory": {"zero": 2}, "comm": {"staleness": 1}})" << true
            << "comm.staleness"
            << "memory.zero=2 reduce-scatters each block's gradient during backward";
    }

    void rule()
    {
        QFETCH(QString, patch);
        QFETCH(bool, isError);
        QFETCH(QString, field);
        QFETCH(QString, message);
        const auto r = readPatched(patch.toStdString());
        const auto problems = isError ? r.diagnostics.errors() : r.diagnostics.warnings();
        bool found = false;
        for (const auto& p : problems)
            found = found
                || (p.field == field.toStdString() && p.message.find(message.toStdString()) != std::string::npos);
        QVERIFY2(found,
            qPrintable(QStringLiteral("expected %1 at %2 containing:\n  %3\ngot:\n%4")
                           .arg(isError ? "an error" : "a warning", field, message,
                               QString::fromStdString(r.diagnostics.format()))));
        QCOMPARE(r.ok(), !isError);
    }

    void everyProblemAtOnce()
    {
        // Four independent mistakes: all four are reported, not just the first.
        auto r = readPatched(R"({"parallel": {"tp": "two", "global_batch": 7, "stages": [[0, 3], [5, 11]]},
                                 "comm": {"allreduce": "tree"}, "precision": "fp64"})");
        QVERIFY(!r.ok());
        const auto errors = r.diagnostics.errors();
        QStringList fields;
        for (const auto& e : errors)
            fields << QString::fromStdString(e.field);
        QVERIFY2(fields.contains("parallel.tp") && fields.contains("comm.allreduce") && fields.contains("precision")
                && fields.contains("parallel.stages"),
            qPrintable(fields.join(", ")));
        // tp could not be read, so rules that need tp stay silent rather than guessing.
        for (const auto& e : errors)
            QVERIFY2(e.message.find("does not divide") == std::string::npos, e.message.c_str());
    }

    void validTensorDegrees()
    {
        const auto& profiles = BuiltinProfiles::instance();
        QCOMPARE(validTensorParallelDegrees(*profiles.findModel("gpt2-124m")),
            (std::vector<std::int64_t> { 1, 2, 3, 4, 6, 12 }));
        QCOMPARE(
            validTensorParallelDegrees(*profiles.findModel("llama2-70b")), (std::vector<std::int64_t> { 1, 2, 4, 8 }));
        QCOMPARE(validTensorParallelDegrees(*profiles.findModel("gpt-tiny")), (std::vector<std::int64_t> { 1, 2, 4 }));
    }

    void inMemoryLayoutWithZeroDegree()
    {
        // The GUI validates layouts it builds in memory; a zero there must be an error, not a division by zero.
        Layout l = *readPatched("{}").layout;
        l.parallel.tp = 0;
        l.parallel.dp = 0;
        const auto d = validateLayout(l);
        QCOMPARE(d.errors().size(), std::size_t(2));
        QVERIFY(d.hasErrorAt("parallel.tp") && d.hasErrorAt("parallel.dp"));
    }
};

QTEST_GUILESS_MAIN(TestValidation)
#include "tst_validation.moc"
