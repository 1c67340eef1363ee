// Layout search: every result is valid and fits, results are ranked, and the first beats the second for a
// stated reason. (Its speed is measured by `loom plan search` itself, not asserted here.)
#include "engine/plan/LayoutValidator.h"
#include "engine/plan/Search.h"
#include "engine/plan/SearchCandidates.h"
#include "engine/plan/SearchEnumeration.h"
#include "engine/profiles/BuiltinProfiles.h"

#include <QTest>

#include <cstdio>

using namespace loom::plan;
using loom::profiles::BuiltinProfiles;

namespace {

// A search for a built-in model on `nodes` nodes of a built-in cluster.
SearchRequest request(
    const char* model, const char* cluster, std::int64_t nodes, std::int64_t globalBatch, Precision precision, int top)
{
    SearchRequest r;
    r.model = *BuiltinProfiles::instance().findModel(model);
    r.cluster = *BuiltinProfiles::instance().findCluster(cluster);
    r.nodes = nodes;
    r.globalBatch = globalBatch;
    r.precision = precision;
    r.top = top;
    return r;
}

} // namespace

class TestSearch : public QObject {
    Q_OBJECT
private slots:
    // The search skips a grid's ZeRO stage whose memory floor exceeds the device; the floor must never exceed
    // what the estimate finds for any candidate of that family, or a fitting layout would be lost.
    void memoryFloorBelowEveryEstimate_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<int>("tp");
        QTest::addColumn<int>("pp");
        QTest::addColumn<int>("dp");
        QTest::addColumn<int>("zero");
        QTest::newRow("megatron-1t tp 8 pp 64") << "megatron-1t" << 8 << 64 << 6 << 1;
        QTest::newRow("megatron-1t tp 1 pp 1 (far too big)") << "megatron-1t" << 1 << 1 << 3072 << 0;
        QTest::newRow("megatron-1t ZeRO-3") << "megatron-1t" << 8 << 4 << 96 << 3;
        QTest::newRow("llama2-7b tp 1 dp 8") << "llama2-7b" << 1 << 1 << 8 << 0;
        QTest::newRow("mixtral ep from dp") << "mixtral-8x7b" << 2 << 2 << 16 << 2;
    }
    void memoryFloorBelowEveryEstimate()
    {
        QFETCH(QString, model);
        QFETCH(int, tp);
        QFETCH(int, pp);
        QFETCH(int, dp);
        QFETCH(int, zero);
        SearchRequest r
            = request(model.toUtf8().constData(), "dgx-a100", tp * pp * dp / 8, 8L * dp, Precision::Bf16, 1);
        Layout l;
        l.model = r.model;
        l.cluster = r.cluster;
        l.nodes = r.nodes;
        l.precision = r.precision;
        l.parallel.tp = tp;
        l.parallel.pp = pp;
        l.parallel.dp = dp;
        l.parallel.sp = tp > 1;
        l.parallel.globalBatch = 8L * dp;
        l.parallel.ep = l.model.isMoe() ? 8 : 1;
        l.memory.zero = zero;
        const double floor = searching::memoryFloorGB(l, { tp, 1, pp, dp }, zero);
        for (Recompute rc : { Recompute::None, Recompute::Full }) {
            l.memory.recompute = rc;
            const Estimate e = estimate(l);
            qInfo("%s: floor %.1f GB, estimate %.1f GB", QTest::currentDataTag(), floor, e.memoryGB);
            QVERIFY(floor <= e.memoryGB * (1 + 1e-12));
        }
    }

    // Megatron-Core's expert grid lets the search try ep above dp (ep 8 from tp 8 on one node).
    void expertGridCandidates()
    {
        const ModelSpec m = *BuiltinProfiles::instance().findModel("mixtral-8x7b");
        bool gridEightFromTp = false;
        for (const auto& c : searching::expertChoices(m, { 8, 1, 1, 1 }))
            gridEightFromTp = gridEightFromTp || (c.ep == 8 && c.expertTp == 1);
        QVERIFY(gridEightFromTp);
        for (const auto& c : searching::expertChoices(m, { 1, 1, 1, 8 }))
            QCOMPARE(c.expertTp, 0); // ep divides dp: Loom's carving, as before
    }

    void megatron1tOn384Nodes()
    {
        const SearchResult s = search(request("megatron-1t", "dgx-a100", 384, 3072, Precision::Fp16, 5));
        QVERIFY(s.evaluated > 1000);
        QVERIFY(s.fitting > 0);
        QCOMPARE(int(s.ranked.size()), 5);
        for (std::size_t i = 0; i < s.ranked.size(); ++i) {
            const auto& c = s.ranked[i];
            const Diagnostics d = validateLayout(c.layout);
            QVERIFY2(!d.hasErrors(), d.format().c_str());
            QVERIFY(c.prediction.fits);
            QCOMPARE(c.layout.parallel.worldSize(), 3072);
            if (i > 0)
                QVERIFY(s.ranked[i - 1].prediction.tokensPerSecond >= c.prediction.tokensPerSecond);
        }
        QVERIFY(
            s.why.find("faster than") != std::string::npos && s.why.find("mainly because its") != std::string::npos);
        // The published layout (tp 8, pp 64) is among what was considered, and the winner is no slower.
        QVERIFY(s.ranked.front().prediction.tflopsPerGpu >= 150);
    }

    void llama3StagesCountingEmbeddingAndHead()
    {
        // 126 layers divide by no pp·vpp of 16·v, but 126 + 2 do: the search tries Llama 3's own split (the
        // embedding and the LM head counted as a layer each, Megatron-LM's --account-for-*-in-pipeline-split).
        const SearchResult s = search(request("llama3-405b", "dgx-h100", 1024, 2048, Precision::Bf16, 3));
        QVERIFY(!s.ranked.empty());
        bool accounted = false;
        for (const auto& c : s.ranked) {
            const Diagnostics d = validateLayout(c.layout);
            QVERIFY2(!d.hasErrors(), d.format().c_str());
            const auto ranges = c.layout.stageRanges();
            if (c.layout.parallel.stages.empty())
                continue;
            accounted = true;
            QCOMPARE(ranges.front().size(), ranges[1].size() - 1);
            QCOMPARE(ranges.back().size(), ranges[1].size() - 1);
            QVERIFY(describeCandidate(c.layout).find("stages=embedding+head-as-layers") != std::string::npos);
        }
        QVERIFY(accounted);
        QCOMPARE(accountedStageSplit(126, 128).front().size(), std::int64_t(0));
        QCOMPARE(accountedStageSplit(126, 128)[1], (StageRange { 0, 0 }));
        QCOMPARE(accountedStageSplit(126, 64)[0], (StageRange { 0, 0 }));
        QVERIFY(accountedStageSplit(126, 48).empty());
    }

    void efficientNormWhereNothingElseFits()
    {
        // Memory-efficient norms cost no time in the model, so the search keeps them only for layouts that do
        // not fit without them; on 64 nodes with 512 sequences some of the best layouts are such.
        const SearchResult s = search(request("llama3-405b", "dgx-h100", 64, 512, Precision::Bf16, 10));
        int efficient = 0;
        for (const auto& c : s.ranked) {
            if (!c.layout.memory.efficientNorm)
                continue;
            ++efficient;
            QVERIFY(describeCandidate(c.layout).find(" efficient-norm") != std::string::npos);
            Layout plain = c.layout;
            plain.memory.efficientNorm = false;
            QVERIFY(c.estimate.fits && !estimate(plain).fits);
        }
        QVERIFY(efficient > 0);
    }

    // The search stops estimating where the floor under a candidate's step time (its compute at the mean
    // stage's pace and its bubble) is slower than the best few found: the floor must never exceed the estimate.
    void stepTimeFloorBelowEveryEstimate_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("cluster");
        QTest::addColumn<QByteArray>("parallel"); // tp pp dp cp mb vpp schedule
        QTest::addColumn<int>("recompute");
        QTest::addColumn<bool>("flash");
        QTest::newRow("megatron-1t 1F1B") << "megatron-1t"
                                          << "dgx-a100" << QByteArray("8 64 6 1 1 1 1f1b") << 0 << true;
        QTest::newRow("megatron-1t interleaved") << "megatron-1t"
                                                 << "dgx-a100" << QByteArray("8 16 24 1 1 8 interleaved") << 0 << true;
        QTest::newRow("gpt3 gpipe full") << "gpt3-175b"
                                         << "dgx-a100" << QByteArray("8 8 16 1 2 1 gpipe") << 2 << true;
        QTest::newRow("gpt3 zb-v materialised") << "gpt3-175b"
                                                << "dgx-h100" << QByteArray("4 16 16 1 1 2 zb-v") << 1 << false;
        QTest::newRow("gpt3 dualpipe") << "gpt3-175b"
                                       << "dgx-h100" << QByteArray("8 8 16 1 1 2 dualpipe") << 0 << true;
        QTest::newRow("gpt3 zb-h2") << "gpt3-175b"
                                    << "dgx-h100" << QByteArray("8 8 16 1 1 1 zb-h2") << 0 << true;
        QTest::newRow("llama3 embedding+head as layers")
            << "llama3-405b"
            << "dgx-h100" << QByteArray("8 16 8 1 1 8 interleaved") << 2 << true;
        QTest::newRow("llama2-7b cp 4") << "llama2-7b"
                                        << "dgx-h100" << QByteArray("2 2 4 4 1 1 1f1b") << 0 << true;
        QTest::newRow("mixtral ep 8") << "mixtral-8x7b"
                                      << "dgx-h100" << QByteArray("2 4 16 1 1 1 1f1b") << 0 << true;
        QTest::newRow("gpt3 tp overlap") << "gpt3-175b"
                                         << "dgx-h100" << QByteArray("8 8 16 1 1 4 interleaved") << 0 << true;
    }
    void stepTimeFloorBelowEveryEstimate()
    {
        QFETCH(QString, model);
        QFETCH(QString, cluster);
        QFETCH(QByteArray, parallel);
        QFETCH(int, recompute);
        QFETCH(bool, flash);
        std::int64_t tp, pp, dp, cp, mb, vpp;
        char schedule[32];
        QCOMPARE(
            std::sscanf(parallel.constData(), "%ld %ld %ld %ld %ld %ld %31s", &tp, &pp, &dp, &cp, &mb, &vpp, schedule),
            7);
        SearchRequest r
            = request(model.toUtf8().constData(), cluster.toUtf8().constData(), 1, 64L * dp * mb, Precision::Bf16, 1);
        if (cp > 1)
            r.model.seqLen = 32768;
        r.nodes = tp * pp * dp * cp / r.cluster.devicesPerNode;
        Layout l = searching::baseLayout(r);
        auto& p = l.parallel;
        p.tp = tp, p.pp = pp, p.dp = dp, p.cp = cp, p.microBatch = mb, p.vpp = vpp, p.sp = tp > 1;
        p.schedule = scheduleKindOf(schedule);
        if (l.model.layers % (pp * scheduleChunks(p.schedule, vpp)) != 0)
            p.stages = accountedStageSplit(l.model.layers, pp * vpp);
        p.ep = l.model.isMoe() ? 8 : 1;
        l.memory.recompute = Recompute(recompute);
        l.memory.attention = flash ? Attention::Flash : Attention::Materialized;
        l.comm.tpCommOverlap = QByteArray(QTest::currentDataTag()).contains("tp overlap");
        QVERIFY2(!validateLayout(l).hasErrors(), validateLayout(l).format().c_str());
        const Estimate e = estimate(l);
        Layout probe = l;
        const double floor = searching::stepTimeFloor(searching::wholeModelSeconds(probe, p.microBatches()),
            p.microBatches(), pp, scheduleChunks(p.schedule, vpp));
        qInfo("%s: floor %.3f s, estimate %.3f s", QTest::currentDataTag(), floor, e.stepTime);
        QVERIFY(floor > 0);
        QVERIFY(floor <= e.stepTime * (1 + 1e-12));
    }

    // The floor changes which candidates are estimated, never the answer: the same ranked layouts, predictions
    // and reason as estimating every candidate (the search before the floor), on dense, long-sequence and
    // mixture-of-experts models.
    void rankingSameAsExhaustive_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("cluster");
        QTest::addColumn<int>("nodes");
        QTest::addColumn<int>("batch");
        QTest::addColumn<int>("seqLen"); // 0: the profile's
        QTest::addColumn<int>("top");
        QTest::newRow("megatron-1t on 384 A100 nodes") << "megatron-1t"
                                                       << "dgx-a100" << 384 << 3072 << 0 << 5;
        QTest::newRow("gpt3-175b on 64 H100 nodes, top 10") << "gpt3-175b"
                                                            << "dgx-h100" << 64 << 1536 << 0 << 10;
        QTest::newRow("llama3-405b on 64 H100 nodes") << "llama3-405b"
                                                      << "dgx-h100" << 64 << 512 << 0 << 10;
        QTest::newRow("llama2-7b at 32K tokens on 8 H200 nodes") << "llama2-7b"
                                                                 << "dgx-h200" << 8 << 64 << 32768 << 5;
        QTest::newRow("mixtral-8x7b on 16 H100 nodes") << "mixtral-8x7b"
                                                       << "dgx-h100" << 16 << 1024 << 4096 << 5;
        QTest::newRow("gpt2-1.5b on 2 MI300X nodes, top 1") << "gpt2-1.5b"
                                                            << "mi300x-8" << 2 << 512 << 0 << 1;
    }
    void rankingSameAsExhaustive()
    {
        QFETCH(QString, model);
        QFETCH(QString, cluster);
        QFETCH(int, nodes);
        QFETCH(int, batch);
        QFETCH(int, seqLen);
        QFETCH(int, top);
        SearchRequest r
            = request(model.toUtf8().constData(), cluster.toUtf8().constData(), nodes, batch, Precision::Bf16, top);
        if (seqLen > 0)
            r.model.seqLen = seqLen;
        const SearchResult bounded = search(r);
        r.exhaustive = true;
        const SearchResult all = search(r);
        qInfo("%s: %zu estimated and %zu skipped by the floor, against %zu estimated", QTest::currentDataTag(),
            bounded.evaluated, bounded.bounded, all.evaluated);
        QCOMPARE(all.bounded, std::size_t(0));
        QVERIFY(bounded.bounded > 0); // the floor did skip candidates, so the comparison can fail
        QVERIFY(bounded.evaluated < all.evaluated);
        QVERIFY(!all.ranked.empty());
        QCOMPARE(bounded.ranked.size(), all.ranked.size());
        for (std::size_t i = 0; i < all.ranked.size(); ++i) {
            QCOMPARE(describeCandidate(bounded.ranked[i].layout), describeCandidate(all.ranked[i].layout));
            QCOMPARE(bounded.ranked[i].estimate.stepTime, all.ranked[i].estimate.stepTime);
            QCOMPARE(bounded.ranked[i].prediction.stepTime, all.ranked[i].prediction.stepTime);
        }
        QCOMPARE(bounded.why, all.why);
        QCOMPARE(bounded.unsimulatable <= all.unsimulatable, true);
    }

    void impossibleRequests()
    {
        SearchRequest r = request("gpt3-175b", "dgx-a100", 1, 8, Precision::Bf16, 5); // the defaults
        const SearchResult s = search(r);
        QVERIFY(s.ranked.empty()); // 175B cannot fit on 8 GPUs
        // Every layout was considered: the memory floors rule them out before any estimate.
        QVERIFY(s.evaluated + s.pruned > 0);
        QVERIFY(s.pruned > 0);
        r.cluster = *BuiltinProfiles::instance().findCluster("local");
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, search(r));
    }
};

QTEST_GUILESS_MAIN(TestSearch)
#include "tst_search.moc"
