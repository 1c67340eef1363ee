// Layout round trip: read -> write -> read gives the same Layout, for the examples and for inline profiles.
#include "engine/plan/LayoutParser.h"
#include "engine/profiles/BuiltinProfiles.h"

#include <QDir>
#include <QTest>

using namespace loom::plan;
using loom::profiles::BuiltinProfiles;

class TestLayout : public QObject {
    Q_OBJECT
private slots:
    void examplesRoundTrip_data()
    {
        QTest::addColumn<QString>("path");
        const QDir dir(QStringLiteral(LOOM_SOURCE_DIR "/resources/examples"));
        const auto files = dir.entryList({ QStringLiteral("*.json") }, QDir::Files);
        QVERIFY(files.size() >= 3);
        for (const auto& f : files)
            QTest::newRow(qPrintable(f)) << dir.filePath(f);
    }
    void examplesRoundTrip()
    {
        QFETCH(QString, path);
        const auto& profiles = BuiltinProfiles::instance();
        auto first = readLayoutFile(path.toStdString(), profiles);
        QVERIFY2(first.ok(), first.diagnostics.format().c_str());
        QVERIFY2(first.diagnostics.warnings().empty(), first.diagnostics.format().c_str());
        const std::string written = writeLayout(*first.layout);
        auto second = readLayout(written, profiles);
        QVERIFY2(second.ok(), second.diagnostics.format().c_str());
        QVERIFY(*first.layout == *second.layout);
        QCOMPARE(writeLayout(*second.layout), written); // writing is deterministic
    }

    void inlineProfilesRoundTrip()
    {
        // A layout that names no profiles: the model and cluster are written out in full and read back.
        const auto& profiles = BuiltinProfiles::instance();
        auto base = readLayoutFile(LOOM_SOURCE_DIR "/resources/examples/gpt3-175b-1024-a100.json", profiles);
        QVERIFY(base.ok());
        Layout layout = *base.layout;
        layout.modelProfile.clear();
        layout.clusterProfile.clear();
        layout.cluster.hosts = { "node001", "node002" };
        layout.parallel.stages = evenStageSplit(layout.model.layers, layout.parallel.pp);
        layout.parallel.order = RankOrder::TpDpPp;
        layout.comm.dpCodec = Codec { Codec::Kind::TopK, 0.001 };
        layout.comm.allreduce = AllreduceAlgorithm::Hierarchical;
        layout.memory = { 1, Recompute::Selective };
        layout.precision = Precision::Bf16;
        layout.description = "every field set";
        auto again = readLayout(writeLayout(layout), profiles);
        QVERIFY2(again.ok(), again.diagnostics.format().c_str());
        QVERIFY(*again.layout == layout);
        QVERIFY(again.layout->modelProfile.empty());
    }

    void llamaModelRoundTrip()
    {
        const auto& profiles = BuiltinProfiles::instance();
        Layout layout = *readLayoutFile(LOOM_SOURCE_DIR "/resources/examples/tiny-local.json", profiles).layout;
        layout.model = *profiles.findModel("llama2-70b");
        layout.modelProfile.clear();
        layout.parallel = {};
        layout.parallel.tp = 8;
        layout.parallel.pp = 1;
        layout.parallel.globalBatch = 4;
        auto again = readLayout(writeLayout(layout), profiles);
        QVERIFY2(again.ok(), again.diagnostics.format().c_str());
        QVERIFY(again.layout->model == layout.model);
        QCOMPARE(again.layout->model.kvHeads, 8);
    }

    void defaultsApplied()
    {
        const char* minimal = R"({"loom_layout": 1, "name": "m", "model": "gpt-tiny", "cluster": "local",
                                  "parallel": {"tp": 1, "pp": 2, "dp": 1, "micro_batch": 1, "global_batch": 4}})";
        auto r = readLayout(minimal, BuiltinProfiles::instance());
        QVERIFY2(r.ok(), r.diagnostics.format().c_str());
        const Layout& l = *r.layout;
        QCOMPARE(l.nodes, 1);
        QCOMPARE(l.parallel.vpp, 1);
        QVERIFY(l.parallel.schedule == ScheduleKind::OneFOneB);
        QVERIFY(l.parallel.order == RankOrder::TpPpDp);
        QCOMPARE(l.memory.zero, 0);
        QVERIFY(l.memory.recompute == Recompute::None);
        QVERIFY(l.precision == Precision::Fp32);
        QVERIFY(l.comm.dpCodec.kind == Codec::Kind::None);
        QVERIFY(l.comm.overlap && l.comm.errorFeedback);
        QCOMPARE(l.comm.codecWarmup, std::int64_t(-1)); // absent: chosen by the trainer
        QCOMPARE(l.comm.bucketMb, 25.0);
        QVERIFY(l.comm.allreduce == AllreduceAlgorithm::Auto);
        QCOMPARE(l.parallel.microBatches(), 4);
        QCOMPARE(l.stageRanges().size(), std::size_t(2));
    }

    void nodesDefaultToCluster()
    {
        const char* text = R"({"loom_layout": 1, "name": "n", "model": "gpt2-124m",
            "cluster": {"name": "two", "nodes": 2, "devices_per_node": 4,
                        "device": {"name": "g", "memory_gb": 16, "memory_bandwidth_gbs": 900,
                                   "peak_tflops": {"fp32": 15, "fp16": 120, "bf16": 120}},
                        "intra_node": {"link": "nvlink", "bandwidth_gbs": 150, "latency_us": 2},
                        "inter_node": {"link": "ethernet", "bandwidth_gbs": 12.5, "latency_us": 10}},
            "parallel": {"tp": 4, "pp": 1, "dp": 2, "micro_batch": 1, "global_batch": 8}})";
        auto r = readLayout(text, BuiltinProfiles::instance());
        QVERIFY2(r.ok(), r.diagnostics.format().c_str());
        QCOMPARE(r.layout->nodes, 2);
        QCOMPARE(r.layout->cluster.interNode->nicsPerNode, 1);
    }

    void evenSplit_data()
    {
        QTest::addColumn<int>("layers");
        QTest::addColumn<int>("stages");
        QTest::addColumn<QString>("expected");
        QTest::newRow("even") << 12 << 4 << "0-2 3-5 6-8 9-11";
        QTest::newRow("remainder to inner stages") << 10 << 4 << "0-1 2-4 5-7 8-9";
        QTest::newRow("remainder beyond inner") << 11 << 4 << "0-2 3-5 6-8 9-10";
        QTest::newRow("two stages odd") << 5 << 2 << "0-2 3-4";
        QTest::newRow("one layer each") << 3 << 3 << "0-0 1-1 2-2";
        QTest::newRow("single stage") << 7 << 1 << "0-6";
    }
    void evenSplit()
    {
        QFETCH(int, layers);
        QFETCH(int, stages);
        QFETCH(QString, expected);
        QStringList parts;
        for (const auto& s : evenStageSplit(layers, stages))
            parts << QStringLiteral("%1-%2").arg(s.first).arg(s.last);
        QCOMPARE(parts.join(QLatin1Char(' ')), expected);
    }

    void codecText_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<bool>("valid");
        for (const char* ok : { "none", "fp16", "bf16", "int8", "int4", "lz4", "topk:0.01", "topk:0.5", "topk:1e-05" })
            QTest::newRow(ok) << ok << true;
        for (const char* bad :
            { "", "topk", "topk:", "topk:0", "topk:1", "topk:-0.1", "topk:abc", "topk:0.1x", "int2", "NONE" })
            QTest::newRow(qPrintable(QStringLiteral("bad '%1'").arg(bad))) << bad << false;
    }
    void codecText()
    {
        QFETCH(QString, text);
        QFETCH(bool, valid);
        std::string why;
        auto codec = Codec::parse(text.toStdString(), &why);
        QCOMPARE(codec.has_value(), valid);
        if (valid) {
            QCOMPARE(QString::fromStdString(codec->toString()), text);
        } else {
            QVERIFY(!why.empty());
        }
    }
};

QTEST_GUILESS_MAIN(TestLayout)
#include "tst_layout.moc"
