// The trainer's sharding strategy as the layout chooses it (train::shardingKind), the codec warm-up it
// implies, and the per-tensor roles the trainer reads instead of tensor names (TensorRole, ParamSpec::layer).
#include "engine/plan/EngineSupport.h"
#include "engine/train/CpuKernels.h"
#include "engine/train/GptStage.h"
#include "engine/train/Sharding.h"

#include <QTest>

#include "GradCheckModel.h"

#include <algorithm>
#include <set>

using namespace loom;
using namespace loom::train;

Q_DECLARE_METATYPE(loom::train::ShardingKind)

namespace {

plan::Layout layoutWith(int dp, int cp, int zero, plan::Codec::Kind codec, bool errorFeedback, int staleness, int ep)
{
    plan::Layout l;
    l.parallel.dp = dp;
    l.parallel.cp = cp;
    l.parallel.ep = ep;
    l.memory.zero = zero;
    l.comm.dpCodec.kind = codec;
    if (codec == plan::Codec::Kind::TopK)
        l.comm.dpCodec.topkFraction = 0.01;
    l.comm.errorFeedback = errorFeedback;
    l.comm.staleness = staleness;
    return l;
}

plan::ModelSpec moeModel(int layers)
{
    plan::ModelSpec m = test::smallGradCheckModel();
    m.name = "moe-roles";
    m.layers = layers;
    m.experts = 4;
    m.topK = 2;
    m.moeFfnHidden = 24;
    m.moeLayerFreq = 2; // blocks 0, 2, ... MoE; the others dense
    return m;
}

} // namespace

class TestSharding : public QObject {
    Q_OBJECT

private slots:
    void kindOfLayout_data()
    {
        using K = plan::Codec::Kind;
        QTest::addColumn<int>("dp");
        QTest::addColumn<int>("cp");
        QTest::addColumn<int>("zero");
        QTest::addColumn<int>("codec");
        QTest::addColumn<bool>("errorFeedback");
        QTest::addColumn<int>("staleness");
        QTest::addColumn<int>("ep");
        QTest::addColumn<ShardingKind>("kind");
        QTest::addColumn<ShardingKind>("warmup");
        const auto R = ShardingKind::Replicated, Z1 = ShardingKind::Zero1, D = ShardingKind::DistributedOptimizer,
                   Z23 = ShardingKind::Zero23, S = ShardingKind::SparseTopK;
        auto row = [](const char* name, int dp, int cp, int zero, K codec, bool ef, int staleness, int ep,
                       ShardingKind kind, ShardingKind warmup) {
            QTest::newRow(name) << dp << cp << zero << int(codec) << ef << staleness << ep << kind << warmup;
        };
        row("one replica", 1, 1, 0, K::None, true, 0, 1, R, R);
        row("one replica, zero 1", 1, 1, 1, K::None, true, 0, 1, R, R);
        row("one replica, zero 3", 1, 1, 3, K::None, true, 0, 1, R, R);
        row("one replica, top-k", 1, 1, 0, K::TopK, true, 0, 1, R, R);
        row("dp 2", 2, 1, 0, K::None, true, 0, 1, R, R);
        row("dp 2, int8", 2, 1, 0, K::Int8, true, 0, 1, R, R);
        row("dp 2, zero 1", 2, 1, 1, K::None, true, 0, 1, D, D);
        row("cp 2, zero 1: cp ranks are replicas", 1, 2, 1, K::None, true, 0, 1, D, D);
        row("dp 2, zero 1, lz4", 2, 1, 1, K::Lz4, true, 0, 1, Z1, Z1);
        row("dp 2, zero 1, int8", 2, 1, 1, K::Int8, true, 0, 1, Z1, Z1);
        row("dp 2, zero 1, staleness 1", 2, 1, 1, K::None, true, 1, 1, Z1, Z1);
        row("dp 2, zero 1, ep 2", 2, 1, 1, K::None, true, 0, 2, Z1, Z1);
        row("dp 2, zero 2", 2, 1, 2, K::None, true, 0, 1, Z23, Z23);
        row("dp 3, cp 2, zero 3", 3, 2, 3, K::None, true, 0, 1, Z23, Z23);
        row("dp 2, zero 3, int8", 2, 1, 3, K::Int8, true, 0, 1, Z23, Z23);
        row("dp 2, top-k with feedback", 2, 1, 0, K::TopK, true, 0, 1, S, R);
        row("dp 2, zero 1, top-k with feedback", 2, 1, 1, K::TopK, true, 0, 1, S, Z1);
        row("dp 2, top-k without feedback", 2, 1, 0, K::TopK, false, 0, 1, R, R);
        row("dp 2, zero 1, top-k without feedback", 2, 1, 1, K::TopK, false, 0, 1, Z1, Z1);
    }
    void kindOfLayout()
    {
        QFETCH(int, dp);
        QFETCH(int, cp);
        QFETCH(int, zero);
        QFETCH(int, codec);
        QFETCH(bool, errorFeedback);
        QFETCH(int, staleness);
        QFETCH(int, ep);
        QFETCH(ShardingKind, kind);
        QFETCH(ShardingKind, warmup);
        const plan::Layout l = layoutWith(dp, cp, zero, plan::Codec::Kind(codec), errorFeedback, staleness, ep);
        QCOMPARE(QString(toString(shardingKind(l))), QString(toString(kind)));
        QCOMPARE(QString(toString(warmupShardingKind(l))), QString(toString(warmup)));
    }

    // The one pair shardingKind cannot honour both halves of: ZeRO-2/3 wins, and the engine refuses it.
    void sparseAdamWithZero23IsRefused_data()
    {
        QTest::addColumn<int>("zero");
        QTest::addColumn<bool>("trainable");
        QTest::newRow("zero 1") << 1 << true;
        QTest::newRow("zero 2") << 2 << false;
        QTest::newRow("zero 3") << 3 << false;
    }
    void sparseAdamWithZero23IsRefused()
    {
        QFETCH(int, zero);
        QFETCH(bool, trainable);
        const plan::Layout l = layoutWith(2, 1, zero, plan::Codec::Kind::TopK, true, 0, 1);
        const plan::EngineSupport support = plan::engineSupport(l);
        QCOMPARE(support.trainable(), trainable);
        if (!trainable)
            QVERIFY2(QString::fromStdString(support.reason()).contains("memory.zero=" + QString::number(zero)),
                support.reason().c_str());
    }

    void codecWarmup_data()
    {
        QTest::addColumn<int>("codec");
        QTest::addColumn<bool>("errorFeedback");
        QTest::addColumn<int>("warmup");
        QTest::addColumn<int>("steps");
        QTest::addColumn<int>("expected");
        using K = plan::Codec::Kind;
        QTest::newRow("top-k, unset: a tenth") << int(K::TopK) << true << -1 << 100 << 10;
        QTest::newRow("top-k, unset, short run: one") << int(K::TopK) << true << -1 << 5 << 1;
        QTest::newRow("top-k, set") << int(K::TopK) << true << 3 << 100 << 3;
        QTest::newRow("top-k without feedback, unset: none") << int(K::TopK) << false << -1 << 100 << 0;
        QTest::newRow("int8, unset: none") << int(K::Int8) << true << -1 << 100 << 0;
        QTest::newRow("int8, set") << int(K::Int8) << true << 4 << 100 << 4;
    }
    void codecWarmup()
    {
        QFETCH(int, codec);
        QFETCH(bool, errorFeedback);
        QFETCH(int, warmup);
        QFETCH(int, steps);
        QFETCH(int, expected);
        plan::Layout l = layoutWith(2, 1, 0, plan::Codec::Kind(codec), errorFeedback, 0, 1);
        l.comm.codecWarmup = warmup;
        QCOMPARE(codecWarmupSteps(l, steps), std::int64_t(expected));
    }

    // Every tensor carries its role and block: the blocks' tensors (GptStage::blockParams) are Block or
    // Expert with their layer, the rest Outer; experts exactly MoeLayer's, in both block forms, and on a
    // stage that holds neither the embedding nor the head.
    void tensorRoles_data()
    {
        QTest::addColumn<bool>("llama");
        QTest::addColumn<bool>("middleStage");
        QTest::newRow("gpt-2 form, whole model") << false << false;
        QTest::newRow("llama form, whole model") << true << false;
        QTest::newRow("gpt-2 form, a middle stage") << false << true;
    }
    void tensorRoles()
    {
        QFETCH(bool, llama);
        QFETCH(bool, middleStage);
        plan::ModelSpec model = moeModel(4);
        if (llama) {
            model.mlp = plan::ModelSpec::Mlp::SwiGlu;
            model.norm = plan::ModelSpec::Norm::RmsNorm;
            model.position = plan::ModelSpec::Position::Rope;
            model.bias = false;
            model.tieEmbeddings = false;
        }
        CpuKernels kernels;
        GptStage::Config config;
        config.model = model;
        config.chunks
            = { { middleStage ? plan::StageRange { 1, 2 } : plan::StageRange { 0, 3 }, !middleStage, !middleStage } };
        GptStage stage(config, kernels);
        const ParamSet& params = stage.params();
        std::set<int> inBlocks;
        int experts = 0;
        for (std::int64_t layer = config.chunks[0].blocks.first; layer <= config.chunks[0].blocks.last; ++layer)
            for (int i : stage.blockParams(layer)) {
                inBlocks.insert(i);
                QCOMPARE(params.spec(i).layer, layer);
                QVERIFY2(
                    params.spec(i).role != TensorRole::Outer, qPrintable(QString::fromStdString(params.spec(i).name)));
                if (params.spec(i).role == TensorRole::Expert) {
                    ++experts;
                    QVERIFY(stage.isExpertParam(i));
                    QVERIFY(params.spec(i).name.find(".expert") != std::string::npos);
                }
            }
        QVERIFY(experts > 0);
        const std::vector<int> outer = stage.outerParams();
        QCOMPARE(outer.empty(), middleStage);
        for (int i = 0; i < static_cast<int>(params.specs().size()); ++i) {
            const bool isOuter = std::find(outer.begin(), outer.end(), i) != outer.end();
            QCOMPARE(isOuter, !inBlocks.count(i)); // every tensor is a block's or an outer one
            if (isOuter) {
                QVERIFY(params.spec(i).role == TensorRole::Outer);
                QCOMPARE(params.spec(i).layer, std::int64_t(-1));
            }
        }
    }
};

QTEST_APPLESS_MAIN(TestSharding)
#include "tst_sharding.moc"
