// The safetensors reader and writer (engine/train/Safetensors) and Hugging Face's weight layout
// (engine/train/HfWeights): round trips in fp32 and bf16, every malformed header refused with the tensor and
// what was expected, and Loom checkpoint -> safetensors -> checkpoint giving back every tensor (GPT-2, Llama,
// Mixtral and DeepSeek forms) with the padding rows zero. The PyTorch comparison is tst_torch_parity (torch).
#include "engine/train/CpuKernels.h"
#include "engine/train/GptStage.h"
#include "engine/train/HfWeights.h"
#include "engine/train/Safetensors.h"

#include <QTemporaryDir>
#include <QTest>

#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

using namespace loom;
using namespace loom::train;
namespace fs = std::filesystem;

namespace {

void writeRaw(const std::string& path, const std::string& header, std::size_t dataBytes)
{
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    std::uint64_t n = header.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << header;
    out << std::string(dataBytes, '\0');
}

plan::ModelSpec form(int which)
{
    plan::ModelSpec m;
    m.name = "st";
    m.layers = 3;
    m.hidden = 16;
    m.heads = 4;
    m.ffnHidden = 24;
    m.vocab = 50;
    m.seqLen = 8;
    m.vocabPadMultiple = 16;
    if (which == 0)
        return m; // GPT-2
    m.mlp = plan::ModelSpec::Mlp::SwiGlu;
    m.norm = plan::ModelSpec::Norm::RmsNorm;
    m.position = plan::ModelSpec::Position::Rope;
    m.bias = false;
    m.tieEmbeddings = which != 1;
    m.kvHeads = 2;
    if (which >= 2) {
        m.experts = 4;
        m.topK = 2;
        m.moeFfnHidden = 12;
    }
    if (which == 3) {
        m.sharedExperts = 1;
        m.firstDenseLayers = 1;
    }
    return m;
}

} // namespace

class TestSafetensors : public QObject {
    Q_OBJECT
private slots:
    void roundTrip_data()
    {
        QTest::addColumn<bool>("bf16");
        QTest::newRow("fp32") << false;
        QTest::newRow("bf16") << true;
    }
    void roundTrip()
    {
        QFETCH(bool, bf16);
        QTemporaryDir dir;
        const std::string path = dir.filePath("a.safetensors").toStdString();
        std::vector<SafeTensorOut> t { { "x.weight", { 2, 3 }, { 1, -2, 3.5f, 0.1f, 1e-3f, -7 } },
            { "y", { 4 }, { 0, 1, 2, 3 } }, { "empty", { 0, 5 }, {} } };
        writeSafetensors(path, t, bf16, { { "format", "pt" } });
        const auto f = SafetensorsFile::read(path);
        QCOMPARE(f.tensors().size(), std::size_t(3));
        QCOMPARE(f.metadata().at("format"), std::string("pt"));
        QCOMPARE(f.tensors().at("x.weight").dtype, std::string(bf16 ? "BF16" : "F32"));
        const auto x = f.floats("x.weight", { 2, 3 });
        for (std::size_t i = 0; i < x.size(); ++i)
            QVERIFY(std::fabs(x[i] - t[0].values[i]) <= (bf16 ? std::fabs(t[0].values[i]) / 256 : 0.0f));
        QVERIFY(f.floats("y", { 4 }) == t[1].values);
        QVERIFY_THROWS_EXCEPTION(std::runtime_error, f.floats("y", { 2, 2 })); // the shape the model needs
        QVERIFY_THROWS_EXCEPTION(std::runtime_error, f.floats("z", { 4 }));
        QCOMPARE(toBf16(1.0f), std::uint16_t(0x3f80));
        QCOMPARE(fromBf16(toBf16(1.00390625f)), 1.0f); // halfway: to even
        QCOMPARE(fromBf16(toBf16(1.01171875f)), 1.015625f);
    }

    void malformed_data()
    {
        QTest::addColumn<QString>("header");
        QTest::addColumn<int>("dataBytes");
        QTest::addColumn<QString>("expected");
        QTest::newRow("not json") << "{\"a\": " << 0 << "not a JSON object";
        QTest::newRow("f16") << R"({"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})" << 4
                             << "\"F32\" and \"BF16\"";
        QTest::newRow("size") << R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})" << 12 << "needs 16";
        QTest::newRow("beyond") << R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})" << 8 << "cut short";
        QTest::newRow("overlap")
            << R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})"
            << 12 << "overlap";
        QTest::newRow("hole") << R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})" << 8 << "hole";
        QTest::newRow("trailing") << R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})" << 8 << "account for";
        QTest::newRow("negative") << R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})" << 4 << "sizes";
        QTest::newRow("reversed") << R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})" << 4 << "end before";
        QTest::newRow("deep") << R"({"__metadata__":{"a":[[[[[[[[[1]]]]]]]]]}})" << 0 << "deeper";
        QTest::newRow("no offsets") << R"({"a":{"dtype":"F32","shape":[1]}})" << 4 << "data_offsets";
    }
    void malformed()
    {
        QFETCH(QString, header);
        QFETCH(int, dataBytes);
        QFETCH(QString, expected);
        QTemporaryDir dir;
        const std::string path = dir.filePath("bad.safetensors").toStdString();
        writeRaw(path, header.toStdString(), static_cast<std::size_t>(dataBytes));
        try {
            SafetensorsFile::read(path);
            QFAIL("read a malformed file");
        } catch (const std::runtime_error& e) {
            QVERIFY2(QString(e.what()).contains(expected) && QString(e.what()).contains("bad.safetensors"), e.what());
        }
    }

    void headerLongerThanFile()
    {
        QTemporaryDir dir;
        const std::string path = dir.filePath("short.safetensors").toStdString();
        std::ofstream out(path, std::ios::binary);
        const std::uint64_t n = 1000;
        out.write(reinterpret_cast<const char*>(&n), 8);
        out << "{}";
        out.close();
        QVERIFY_THROWS_EXCEPTION(std::runtime_error, SafetensorsFile::read(path));
    }

    // Loom's checkpoint tensors out as Hugging Face's and back in: every tensor as it was.
    void hfRoundTrip_data()
    {
        QTest::addColumn<int>("which");
        QTest::newRow("gpt2") << 0;
        QTest::newRow("llama") << 1;
        QTest::newRow("mixtral") << 2;
        QTest::newRow("deepseek") << 3;
    }
    void hfRoundTrip()
    {
        QFETCH(int, which);
        const plan::ModelSpec m = form(which);
        CpuKernels kernels;
        GptStage stage({ .model = m, .chunks = { { { 0, m.layers - 1 }, true, true } } }, kernels);
        ParamSet& params = stage.params();
        params.initialise(5);
        QTemporaryDir dir;
        const fs::path ck = dir.filePath("ck").toStdString(), hf = dir.filePath("hf").toStdString();
        fs::create_directories(ck);
        for (const auto& s : params.specs()) {
            std::ofstream out(ck / (s.name + ".f32"), std::ios::binary);
            out.write(reinterpret_cast<const char*>(params.values.data() + s.offset),
                static_cast<std::streamsize>(s.size() * 4));
        }
        exportSafetensors(ck.string(), m, hf.string(), false);
        const auto file = SafetensorsFile::read((hf / "model.safetensors").string());
        const auto config = nlohmann::json::parse(std::ifstream(hf / "config.json"));
        if (which == 0) {
            QVERIFY(file.tensors().count("transformer.h.2.attn.c_attn.weight"));
            QVERIFY(config["model_type"] == "gpt2");
        } else {
            const auto& q = file.tensors().at("model.layers.0.self_attn.q_proj.weight");
            QVERIFY(q.shape == (std::vector<std::int64_t> { 16, 16 }));
            QVERIFY(file.tensors().at("model.layers.1.self_attn.k_proj.weight").shape
                == (std::vector<std::int64_t> { 8, 16 })); // (kv_heads·d, hidden)
            QVERIFY(file.tensors().at("model.embed_tokens.weight").shape == (std::vector<std::int64_t> { 50, 16 }));
            QCOMPARE(bool(file.tensors().count("lm_head.weight")), which == 1);
            // q_proj row i of head 0 (i < d/2) is Loom's column 2i: the rotate_half permutation.
            const auto w = file.floats("model.layers.0.self_attn.q_proj.weight", { 16, 16 });
            const float* loomQ = params.value(params.find("h0.q.w"));
            for (int r = 0; r < 16; ++r) {
                QCOMPARE(w[static_cast<std::size_t>(1 * 16 + r)], loomQ[r * 16 + 2]); // HF 1 = Loom 2
                QCOMPARE(w[static_cast<std::size_t>(2 * 16 + r)], loomQ[r * 16 + 1]); // HF 2 = d/2 + 0 = Loom 1
            }
        }
        if (which == 2)
            QVERIFY(file.tensors().count("model.layers.1.block_sparse_moe.experts.3.w2.weight"));
        if (which == 3) {
            QVERIFY(file.tensors().count("model.layers.1.mlp.shared_experts.down_proj.weight"));
            QVERIFY(file.tensors().count("model.layers.0.mlp.gate_proj.weight")); // dense block 0
            QVERIFY(config["first_k_dense_replace"] == 1);
        }
        const fs::path back = dir.filePath("back").toStdString();
        importSafetensors(hf.string(), m, "{}", back.string());
        for (const auto& s : params.specs()) {
            std::ifstream in(back / (s.name + ".f32"), std::ios::binary);
            std::vector<float> t(s.size());
            in.read(reinterpret_cast<char*>(t.data()), static_cast<std::streamsize>(t.size() * 4));
            QVERIFY2(in, s.name.c_str());
            for (std::size_t i = 0; i < t.size(); ++i) {
                const bool padding = (s.name == "wte" || s.name == "lm_head") && i >= std::size_t(m.vocab * m.hidden);
                QCOMPARE(t[i], padding ? 0.0f : params.values[s.offset + i]);
            }
        }
        // A tensor missing, or one the model has no place for, is refused by name.
        fs::path broken = dir.filePath("broken").toStdString();
        fs::create_directories(broken);
        std::vector<SafeTensorOut> some { { "model.embed_tokens.weight", { 50, 16 }, std::vector<float>(800, 0.0f) },
            { "model.layers.9.mlp.up_proj.weight", { 1 }, { 1.0f } } };
        writeSafetensors((broken / "model.safetensors").string(), some, false);
        try {
            importSafetensors(broken.string(), m, "{}", (dir.filePath("b2").toStdString()));
            QFAIL("imported a file that does not fit");
        } catch (const std::runtime_error& e) {
            QVERIFY2(
                QString(e.what()).contains("has no place") || QString(e.what()).contains("no file holds"), e.what());
        }
    }

    // A model split over several files that model.safetensors.index.json's weight_map names; a weight_map
    // entry that leaves the folder is refused.
    void shardedIndex()
    {
        const plan::ModelSpec m = form(1);
        CpuKernels kernels;
        GptStage stage({ .model = m, .chunks = { { { 0, m.layers - 1 }, true, true } } }, kernels);
        ParamSet& params = stage.params();
        params.initialise(8);
        QTemporaryDir dir;
        const fs::path ck = dir.filePath("ck").toStdString(), hf = dir.filePath("hf").toStdString();
        fs::create_directories(ck);
        for (const auto& s : params.specs()) {
            std::ofstream out(ck / (s.name + ".f32"), std::ios::binary);
            out.write(reinterpret_cast<const char*>(params.values.data() + s.offset),
                static_cast<std::streamsize>(s.size() * 4));
        }
        exportSafetensors(ck.string(), m, hf.string(), false);
        const auto whole = SafetensorsFile::read((hf / "model.safetensors").string());
        std::vector<SafeTensorOut> first, second;
        nlohmann::json index = { { "metadata", nlohmann::json::object() }, { "weight_map", nlohmann::json::object() } };
        int n = 0;
        for (const auto& [name, t] : whole.tensors()) {
            auto& part = n++ % 2 ? second : first;
            part.push_back({ name, t.shape, whole.floats(name, t.shape) });
            index["weight_map"][name] = n % 2 ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
        }
        const fs::path split = dir.filePath("split").toStdString();
        fs::create_directories(split);
        writeSafetensors((split / "model-00001-of-00002.safetensors").string(), first, false);
        writeSafetensors((split / "model-00002-of-00002.safetensors").string(), second, true);
        std::ofstream(split / "model.safetensors.index.json") << index.dump();
        const fs::path back = dir.filePath("back").toStdString();
        importSafetensors(split.string(), m, "{}", back.string());
        std::ifstream in(back / "h2.down.w.f32", std::ios::binary);
        const auto& spec = params.spec(params.find("h2.down.w"));
        std::vector<float> t(spec.size());
        QVERIFY(in.read(reinterpret_cast<char*>(t.data()), static_cast<std::streamsize>(t.size() * 4)));
        for (std::size_t i = 0; i < t.size(); ++i) // bf16 or fp32, whichever file it went to
            QVERIFY(
                std::fabs(t[i] - params.values[spec.offset + i]) <= std::fabs(params.values[spec.offset + i]) / 256);
        index["weight_map"]["model.norm.weight"] = "../elsewhere.safetensors";
        std::ofstream(split / "model.safetensors.index.json", std::ios::trunc) << index.dump();
        try {
            importSafetensors(split.string(), m, "{}", back.string());
            QFAIL("followed a weight_map out of the folder");
        } catch (const std::runtime_error& e) {
            QVERIFY2(QString(e.what()).contains("model.norm.weight"), e.what());
        }
    }

    void refusals()
    {
        plan::ModelSpec gptMoe = form(0);
        gptMoe.experts = 4;
        QVERIFY_THROWS_EXCEPTION(std::runtime_error, checkHfCompatible(gptMoe));
        plan::ModelSpec biased = form(1);
        biased.bias = true;
        try {
            checkHfCompatible(biased);
            QFAIL("accepted biases");
        } catch (const std::runtime_error& e) {
            QVERIFY(QString(e.what()).contains("bias"));
        }
    }
};

QTEST_GUILESS_MAIN(TestSafetensors)
#include "tst_safetensors.moc"
