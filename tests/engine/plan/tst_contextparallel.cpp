// Context parallelism in the planner: the ring-attention volume against counts derived by hand, the exposed
// part of the exchange, activations divided by cp, the simulator's CP events against the schedule it
// replays, and the search trying cp for long sequences.
#include "engine/plan/CostModel.h"
#include "engine/plan/LayoutParser.h"
#include "engine/plan/Search.h"
#include "engine/profiles/BuiltinProfiles.h"

#include <QTest>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

using namespace loom::plan;
using loom::trace::EventKind;

namespace {

Layout layout(const nlohmann::json& parallel, const std::string& model, const std::string& cluster, int nodes,
    const nlohmann::json& modelPatch = nullptr)
{
    nlohmann::json j = { { "loom_layout", 1 }, { "name", "cp" }, { "model", model }, { "cluster", cluster },
        { "nodes", nodes }, { "parallel", parallel }, { "precision", "bf16" } };
    if (!modelPatch.is_null()) { // the profile's shape with changes, inline
        const auto m = loom::profiles::BuiltinProfiles::instance().findModel(model);
        nlohmann::json inlineModel = nlohmann::json::parse(toJson(*m).dump());
        inlineModel.merge_patch(modelPatch);
        j["model"] = inlineModel;
    }
    auto r = readLayout(j.dump(), loom::profiles::BuiltinProfiles::instance());
    if (!r.ok())
        qFatal("%s", r.diagnostics.format().c_str());
    return *r.layout;
}

ModelSpec model(const std::string& name)
{
    return *loom::profiles::BuiltinProfiles::instance().findModel(name);
}

} // namespace

class TestContextParallel : public QObject {
    Q_OBJECT
private slots:
    void ringVolumeByHand()
    {
        // gpt-tiny (s = 32, 4 heads of 16), b = 2, cp = 4, fp32: a K/V block is K and V of the rank's
        // 32/4 = 8 tokens of 2 sequences, 2·2·8·64 values · 4 bytes = 8192 bytes; forward 3 blocks, backward
        // 3 K/V blocks and 4 dK/dV accumulators.
        const RingAttentionVolume tiny = ringAttentionVolume(model("gpt-tiny"), 2, 1, 4, 4.0);
        QCOMPARE(tiny.blockBytes, 8192.0);
        QCOMPARE(tiny.forwardBlocks, std::int64_t(3));
        QCOMPARE(tiny.backwardBlocks, std::int64_t(7));
        QCOMPARE(tiny.forwardBytes(), 24576.0);
        QCOMPARE(tiny.backwardBytes(), 57344.0);
        // llama-tiny: 2 KV heads of 16 over tp = 2 (one per rank), b = 1, cp = 2, bf16: 2·1·16·16·2 = 1024.
        const RingAttentionVolume llama = ringAttentionVolume(model("llama-tiny"), 1, 2, 2, 2.0);
        QCOMPARE(llama.blockBytes, 1024.0);
        QCOMPARE(llama.forwardBytes(), 1024.0);
        QCOMPARE(llama.backwardBytes(), 3072.0);
        // No context parallelism, no exchange.
        QCOMPARE(ringAttentionVolume(model("gpt-tiny"), 2, 1, 1, 4.0).forwardBytes(), 0.0);
    }

    void exposedExchange()
    {
        // cp = 4, a block takes 1 s on the link, the layer's attention 2 s (0.5 s a ring step):
        // forward 3·(1 - 0.5) = 1.5; backward (1 - 0.5) + 2·(2 - 0.5) + (1 - 0.5) + 1 = 5.
        QCOMPARE(ringExposedForward(4, 1.0, 2.0), 1.5);
        QCOMPARE(ringExposedBackward(4, 1.0, 2.0), 5.0);
        // A fast link hides all but the last accumulator's trip home.
        QCOMPARE(ringExposedForward(4, 0.1, 2.0), 0.0);
        QCOMPARE(ringExposedBackward(4, 0.1, 2.0), 0.1);
        QCOMPARE(ringExposedBackward(1, 1.0, 2.0), 0.0);
    }

    void activationsDividedByCp()
    {
        const nlohmann::json base = { { "tp", 8 }, { "pp", 1 }, { "dp", 2 }, { "micro_batch", 1 },
            { "global_batch", 8 }, { "schedule", "1f1b" } };
        nlohmann::json withCp = base;
        withCp["cp"] = 2;
        withCp["dp"] = 1;
        const Prediction one = predict(layout(base, "llama2-7b", "dgx-a100", 2, { { "seq_len", 32768 } }), false);
        const Prediction two = predict(layout(withCp, "llama2-7b", "dgx-a100", 2, { { "seq_len", 32768 } }), false);
        QVERIFY(one.memory.activations > 0);
        QVERIFY(std::abs(two.memory.activations * 2.0 - one.memory.activations) < 1e-9 * one.memory.activations);
        QVERIFY(two.cpExposed >= 0);
        QCOMPARE(one.cpExposed, 0.0);
        QVERIFY(std::abs(two.compute + two.tpExposed + two.cpExposed + two.ppExposed + two.bubble + two.dpExposed
                    + two.optimizer - two.stepTime)
            < 1e-9 * two.stepTime);
    }

    void simulatorEventsFollowTheSchedule()
    {
        // gpt-mini (6 layers, s = 128) with cp = 4, pp = 2, 4 micro-batches of 1: every forward and backward op
        // of the replay carries one exchange to the next CP rank, inside the op, with its stage's volume.
        const Layout l = layout({ { "tp", 1 }, { "cp", 4 }, { "pp", 2 }, { "dp", 1 }, { "micro_batch", 1 },
                                    { "global_batch", 4 }, { "schedule", "1f1b" } },
            "gpt-mini", "dgx-a100", 1);
        const Prediction p = predict(l);
        const RingAttentionVolume vol = ringAttentionVolume(l.model, 1, 1, 4, 2.0);
        const auto ranges = l.stageRanges();
        int ops = 0, exchanges = 0;
        for (const auto& op : p.events) {
            if (op.kind != EventKind::Forward && op.kind != EventKind::Backward)
                continue;
            ++ops;
            const bool fwd = op.kind == EventKind::Forward;
            const double layers = double(ranges[static_cast<std::size_t>(op.stage)].size());
            int found = 0;
            for (const auto& e : p.events) {
                if (e.kind != EventKind::Send || e.groupSize != 4 || e.rank != op.rank || e.microBatch != op.microBatch
                    || e.stage != op.stage || e.startNs != op.startNs)
                    continue;
                ++found;
                QVERIFY(e.endNs <= op.endNs);
                QCOMPARE(e.peer, op.rank + 1); // tp = 1: the next CP rank is the next rank
                QCOMPARE(double(e.bytes), layers * (fwd ? vol.forwardBytes() : vol.backwardBytes()));
            }
            QCOMPARE(found, 1);
            exchanges += found;
        }
        QCOMPARE(ops, 2 * 2 * 4); // 2 stages, forward and backward, 4 micro-batches
        QCOMPARE(exchanges, ops);
    }

    void searchTriesCpForLongSequences()
    {
        QCOMPARE(contextParallelDegrees(model("megatron-1t")), (std::vector<std::int64_t> { 1 }));
        ModelSpec m = model("llama3-405b");
        m.seqLen = 131072;
        const auto cps = contextParallelDegrees(m);
        QVERIFY(std::find(cps.begin(), cps.end(), 16) != cps.end());
        // Llama 3 405B at 128K tokens on 128 dgx-h100 nodes: the best layouts split the sequence.
        SearchRequest r;
        r.model = m;
        r.cluster = *loom::profiles::BuiltinProfiles::instance().findCluster("dgx-h100");
        r.clusterProfile = "dgx-h100";
        r.nodes = 128;
        r.globalBatch = 64;
        r.top = 3;
        const SearchResult s = search(r);
        QVERIFY2(!s.ranked.empty(), "no layout fits");
        QVERIFY(s.ranked.front().layout.parallel.cp > 1);
        qInfo("best: tp=%lld cp=%lld pp=%lld dp=%lld, %.2f s a step, %.1f TFLOP/s per GPU (%zu evaluated)",
            static_cast<long long>(s.ranked.front().layout.parallel.tp),
            static_cast<long long>(s.ranked.front().layout.parallel.cp),
            static_cast<long long>(s.ranked.front().layout.parallel.pp),
            static_cast<long long>(s.ranked.front().layout.parallel.dp), s.ranked.front().prediction.stepTime,
            s.ranked.front().prediction.tflopsPerGpu, s.evaluated);
    }
};

QTEST_GUILESS_MAIN(TestContextParallel)
#include "tst_contextparallel.moc"
