// Built-in profiles load, carry their published shapes and figures, and round-trip through the file format.
#include "engine/profiles/BuiltinProfiles.h"

#include <QTest>

using namespace loom::profiles;
using loom::plan::ClusterSpec;
using loom::plan::LinkKind;
using loom::plan::ModelSpec;
using loom::plan::Precision;

class TestBuiltinProfiles : public QObject {
    Q_OBJECT
private slots:
    void allLoad()
    {
        const auto& b = BuiltinProfiles::instance();
        QVERIFY2(b.loadErrors().empty(), b.loadErrors().empty() ? "" : b.loadErrors().front().c_str());
        QCOMPARE(b.modelNames(),
            (std::vector<std::string> { "gpt-mini", "gpt-tiny", "gpt2-1.5b", "gpt2-124m", "gpt2-350m", "gpt2-774m",
                "gpt3-175b", "llama-tiny", "llama2-70b", "llama2-7b", "llama3-405b", "megatron-1t", "mixtral-8x7b",
                "moe-tiny" }));
        QCOMPARE(b.clusterNames(),
            (std::vector<std::string> { "dgx-a100", "dgx-b200", "dgx-h100", "dgx-h200", "gb200-nvl72",
                "grand-teton-h100", "hgx-h800", "local", "mi300x-8", "pcie-4gpu" }));
        for (const auto& p : b.all()) {
            QVERIFY2(!p.description().empty(), p.name().c_str());
            QVERIFY2(!p.source.empty(), p.name().c_str());
        }
    }

    void modelShapes_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<qint64>("layers");
        QTest::addColumn<qint64>("hidden");
        QTest::addColumn<qint64>("heads");
        QTest::addColumn<qint64>("vocab");
        QTest::addColumn<qint64>("seq");
        QTest::addColumn<qint64>("parameters"); // published count; 0 = check against 12·l·h² within 2%
        QTest::newRow("gpt2-124m") << "gpt2-124m" << 12LL << 768LL << 12LL << 50257LL << 1024LL << 124439808LL;
        QTest::newRow("gpt2-350m") << "gpt2-350m" << 24LL << 1024LL << 16LL << 50257LL << 1024LL << 354823168LL;
        QTest::newRow("gpt2-774m") << "gpt2-774m" << 36LL << 1280LL << 20LL << 50257LL << 1024LL << 774030080LL;
        QTest::newRow("gpt2-1.5b") << "gpt2-1.5b" << 48LL << 1600LL << 25LL << 50257LL << 1024LL << 1557611200LL;
        QTest::newRow("llama2-7b") << "llama2-7b" << 32LL << 4096LL << 32LL << 32000LL << 4096LL << 6738415616LL;
        QTest::newRow("llama2-70b") << "llama2-70b" << 80LL << 8192LL << 64LL << 32000LL << 4096LL << 68976648192LL;
        QTest::newRow("gpt3-175b") << "gpt3-175b" << 96LL << 12288LL << 96LL << 50257LL << 2048LL << 0LL;
        QTest::newRow("megatron-1t") << "megatron-1t" << 128LL << 25600LL << 160LL << 51200LL << 2048LL << 0LL;
        QTest::newRow("gpt-tiny") << "gpt-tiny" << 4LL << 64LL << 4LL << 256LL << 32LL << 218496LL;
        QTest::newRow("gpt-mini") << "gpt-mini" << 6LL << 192LL << 6LL << 256LL << 128LL << 2743296LL;
        // Mixtral: 46.7 B in all (12.9 B active, tst_moeplan); moe-tiny: gpt-tiny with 4 experts in 2 blocks.
        QTest::newRow("mixtral-8x7b") << "mixtral-8x7b" << 32LL << 4096LL << 32LL << 32000LL << 32768LL
                                      << 46702792704LL;
        QTest::newRow("moe-tiny") << "moe-tiny" << 4LL << 64LL << 4LL << 256LL << 32LL << 285440LL;
    }
    void modelShapes()
    {
        QFETCH(QString, name);
        QFETCH(qint64, layers);
        QFETCH(qint64, hidden);
        QFETCH(qint64, heads);
        QFETCH(qint64, vocab);
        QFETCH(qint64, seq);
        QFETCH(qint64, parameters);
        const auto m = BuiltinProfiles::instance().findModel(name.toStdString());
        QVERIFY(m);
        QCOMPARE(m->layers, layers);
        QCOMPARE(m->hidden, hidden);
        QCOMPARE(m->heads, heads);
        QCOMPARE(m->vocab, vocab);
        QCOMPARE(m->seqLen, seq);
        if (parameters > 0) {
            QCOMPARE(m->parameterCount(), parameters);
        } else {
            // GPT blocks: 12·l·h² dominates; embeddings add V·h.
            const double approx = 12.0 * double(layers) * double(hidden) * double(hidden) + double(vocab * hidden);
            QVERIFY(std::abs(double(m->parameterCount()) / approx - 1.0) < 0.02);
        }
    }

    void publishedTotals()
    {
        // GPT-3 "175B" and Megatron's "1T" (1008B in Narayanan et al. Table 1).
        const auto& b = BuiltinProfiles::instance();
        QVERIFY(std::abs(double(b.findModel("gpt3-175b")->parameterCount()) / 175e9 - 1) < 0.01);
        QVERIFY(std::abs(double(b.findModel("megatron-1t")->parameterCount()) / 1008e9 - 1) < 0.01);
    }

    void clusterFigures()
    {
        const auto& b = BuiltinProfiles::instance();
        const ClusterSpec a100 = *b.findCluster("dgx-a100");
        QCOMPARE(a100.devicesPerNode, 8);
        QCOMPARE(a100.device.memoryGB, 80.0);
        QCOMPARE(a100.device.peakTflops(Precision::Bf16), 312.0);
        QCOMPARE(a100.device.peakTflops(Precision::Fp32), 19.5);
        QVERIFY(a100.intraNode.kind == LinkKind::NvLink);
        QCOMPARE(a100.intraNode.bandwidthGBs, 300.0);
        QVERIFY(a100.interNode && a100.interNode->kind == LinkKind::InfiniBand);
        QCOMPARE(a100.interNode->bandwidthGBs * a100.interNode->nicsPerNode, 200.0); // 8 × 200 Gb/s = 200 GB/s
        const ClusterSpec h100 = *b.findCluster("dgx-h100");
        QCOMPARE(h100.device.peakTflops(Precision::Bf16), 989.0);
        QCOMPARE(h100.device.memoryBandwidthGBs, 3350.0);
        QCOMPARE(h100.intraNode.bandwidthGBs, 450.0);
        QCOMPARE(h100.interNode->bandwidthGBs * h100.interNode->nicsPerNode, 400.0); // 8 × 400 Gb/s
        const ClusterSpec pcie = *b.findCluster("pcie-4gpu");
        QCOMPARE(pcie.devicesPerNode, 4);
        QVERIFY(pcie.intraNode.kind == LinkKind::Pcie);
        const ClusterSpec local = *b.findCluster("local");
        QVERIFY(local.autoDevices());
        QVERIFY(!local.interNode);
        QVERIFY(local.intraNode.kind == LinkKind::Shm);
    }

    void fileRoundTrip()
    {
        for (const auto& p : BuiltinProfiles::instance().all()) {
            const auto again = readProfile(writeProfile(p));
            QVERIFY2(again.profile && !again.diagnostics.hasErrors(), again.diagnostics.format().c_str());
            QVERIFY(again.profile->spec == p.spec);
            QCOMPARE(again.profile->source, p.source);
        }
    }

    void badProfiles_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<QString>("message");
        QTest::newRow("not json") << "{"
                                  << "not valid JSON";
        QTest::newRow("no version") << R"({"kind": "model"})"
                                    << "loom_profile is missing";
        QTest::newRow("newer version") << R"({"loom_profile": 2, "kind": "model"})"
                                       << "loom_profile=2 is not supported";
        QTest::newRow("unknown kind") << R"({"loom_profile": 1, "kind": "gpu"})"
                                      << "kind=\"gpu\" is not known";
        QTest::newRow("model without layers")
            << R"({"loom_profile": 1, "kind": "model", "name": "m", "hidden": 8, "heads": 2, "ffn_hidden": 32, "vocab": 10, "seq_len": 4})"
            << "layers is missing";
        QTest::newRow("cluster with bad link")
            << R"({"loom_profile": 1, "kind": "cluster", "name": "c", "devices_per_node": 2,
                  "device": {"name": "g", "memory_gb": 8, "memory_bandwidth_gbs": 100, "peak_tflops": {"fp32": 1, "fp16": 2, "bf16": 2}},
                  "intra_node": {"link": "nvlnk", "bandwidth_gbs": 10, "latency_us": 1}})"
            << "intra_node.link=\"nvlnk\" is not known; use one of \"nvlink\", \"pcie\", \"infiniband\", \"ethernet\", "
               "\"shm\", \"xgmi\" (did you mean \"nvlink\"?)";
        QTest::newRow("cluster with zero bandwidth")
            << R"({"loom_profile": 1, "kind": "cluster", "name": "c", "devices_per_node": 2,
                  "device": {"name": "g", "memory_gb": 8, "memory_bandwidth_gbs": 100, "peak_tflops": {"fp32": 1, "fp16": 2, "bf16": 2}},
                  "intra_node": {"link": "pcie", "bandwidth_gbs": 0, "latency_us": 1}})"
            << "intra_node.bandwidth_gbs=0 is too small; it must be above 0";
        QTest::newRow("multi-node cluster without a network")
            << R"({"loom_profile": 1, "kind": "cluster", "name": "c", "nodes": 4, "devices_per_node": 2,
                  "device": {"name": "g", "memory_gb": 8, "memory_bandwidth_gbs": 100, "peak_tflops": {"fp32": 1, "fp16": 2, "bf16": 2}},
                  "intra_node": {"link": "pcie", "bandwidth_gbs": 10, "latency_us": 1}})"
            << "nodes=4 needs an inter_node link";
        QTest::newRow("devices per node as a word")
            << R"({"loom_profile": 1, "kind": "cluster", "name": "c", "devices_per_node": "eight",
                  "device": {"name": "g", "memory_gb": 8, "memory_bandwidth_gbs": 100, "peak_tflops": {"fp32": 1, "fp16": 2, "bf16": 2}},
                  "intra_node": {"link": "pcie", "bandwidth_gbs": 10, "latency_us": 1}})"
            << "devices_per_node=\"eight\" is not known; write a whole number from 1 to 1024, or \"auto\"";
    }
    void badProfiles()
    {
        QFETCH(QString, text);
        QFETCH(QString, message);
        const auto r = readProfile(text.toStdString());
        QVERIFY(!r.profile);
        QVERIFY2(
            r.diagnostics.format().find(message.toStdString()) != std::string::npos, r.diagnostics.format().c_str());
    }
};

QTEST_GUILESS_MAIN(TestBuiltinProfiles)
#include "tst_builtinprofiles.moc"
