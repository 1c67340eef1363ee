// transformers' config.json as a model profile (engine/plan/HfConfig): published configs give the published
// parameter counts, and every field Loom cannot express is refused by name.
#include "engine/plan/HfConfig.h"

#include <QTest>

#include <nlohmann/json.hpp>

#include <cmath>

using namespace loom::plan;
using nlohmann::json;

namespace {

// Meta's Llama 3.1 8B config.json (meta-llama/Llama-3.1-8B): the fields Loom reads.
json llama31_8b()
{
    return json::parse(R"({"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
        "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "hidden_act": "silu",
        "attention_bias": false, "mlp_bias": false, "tie_word_embeddings": false, "head_dim": 128,
        "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192, "rope_type": "llama3"}})");
}

// Mistral AI's Mixtral-8x7B-v0.1 config.json.
json mixtral()
{
    return json::parse(R"({"model_type": "mixtral", "hidden_size": 4096, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32000,
        "max_position_embeddings": 32768, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "hidden_act": "silu",
        "num_local_experts": 8, "num_experts_per_tok": 2, "router_aux_loss_coef": 0.02, "sliding_window": null,
        "tie_word_embeddings": false, "attention_dropout": 0.0})");
}

// deepseek-ai/deepseek-moe-16b-base config.json.
json deepseek()
{
    return json::parse(R"({"model_type": "deepseek", "hidden_size": 2048, "num_hidden_layers": 28,
        "num_attention_heads": 16, "num_key_value_heads": 16, "intermediate_size": 10944, "vocab_size": 102400,
        "max_position_embeddings": 4096, "rms_norm_eps": 1e-06, "rope_theta": 10000, "hidden_act": "silu",
        "n_routed_experts": 64, "num_experts_per_tok": 6, "moe_intermediate_size": 1408, "n_shared_experts": 2,
        "first_k_dense_replace": 1, "moe_layer_freq": 1, "norm_topk_prob": false, "scoring_func": "softmax",
        "topk_method": "greedy", "aux_loss_alpha": 0.001, "tie_word_embeddings": false, "attention_bias": false})");
}

// Qwen/Qwen1.5-MoE-A2.7B config.json.
json qwen2Moe()
{
    return json::parse(R"({"model_type": "qwen2_moe", "hidden_size": 2048, "num_hidden_layers": 24,
        "num_attention_heads": 16, "num_key_value_heads": 16, "intermediate_size": 5632, "vocab_size": 151936,
        "max_position_embeddings": 8192, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "hidden_act": "silu",
        "num_experts": 60, "num_experts_per_tok": 4, "moe_intermediate_size": 1408,
        "shared_expert_intermediate_size": 5632, "decoder_sparse_step": 1, "norm_topk_prob": false,
        "use_sliding_window": false, "tie_word_embeddings": false})");
}

} // namespace

class TestHfConfig : public QObject {
    Q_OBJECT
private slots:
    void published_data()
    {
        QTest::addColumn<int>("which");
        QTest::addColumn<double>("billions");
        QTest::addColumn<double>("activeBillions");
        QTest::newRow("llama 3.1 8b") << 0 << 8.03 << 8.03; // Meta: 8.03 B
        QTest::newRow("mixtral 8x7b") << 1 << 46.7 << 12.9; // Jiang et al. 2024
        QTest::newRow("deepseek-moe 16b") << 2 << 16.4 << 2.83; // Dai et al. 2024
    }
    void published()
    {
        QFETCH(int, which);
        QFETCH(double, billions);
        QFETCH(double, activeBillions);
        Diagnostics d;
        const json config = which == 0 ? llama31_8b() : which == 1 ? mixtral() : deepseek();
        const auto m = modelFromHfConfig(config, "imported", d);
        QVERIFY2(m, d.format().c_str());
        QVERIFY2(std::fabs(double(m->parameterCount()) / 1e9 - billions) < 0.05,
            qPrintable(QString::number(double(m->parameterCount()) / 1e9)));
        QVERIFY(std::fabs(double(m->activeParameterCount()) / 1e9 - activeBillions) < 0.05);
        QCOMPARE(m->name, std::string("imported"));
        if (which == 0) {
            QCOMPARE(m->ropeTheta, 500000.0);
            QCOMPARE(m->ropeScaling.factor, 8.0);
            QCOMPARE(m->ropeScaling.originalMaxPositions, std::int64_t(8192));
            QCOMPARE(m->kvHeads, std::int64_t(8));
        }
        if (which == 1) {
            QVERIFY(m->routerNormTopK);
            QCOMPARE(m->auxLossCoeff, 0.02);
        }
        if (which == 2) {
            QCOMPARE(m->sharedExperts, std::int64_t(2));
            QCOMPARE(m->firstDenseLayers, std::int64_t(1));
            QCOMPARE(m->normEps, 1e-6);
        }
    }

    void refused_data()
    {
        QTest::addColumn<int>("base");
        QTest::addColumn<QString>("patch");
        QTest::addColumn<QString>("field");
        QTest::newRow("gelu") << 0 << R"({"hidden_act": "gelu"})"
                              << "config.hidden_act";
        QTest::newRow("attention bias") << 0 << R"({"attention_bias": true})"
                                        << "config.attention_bias";
        QTest::newRow("yarn") << 0 << R"({"rope_scaling": {"rope_type": "yarn", "factor": 4}})"
                              << "config.rope_scaling";
        QTest::newRow("head dim") << 0 << R"({"head_dim": 256})"
                                  << "config.head_dim";
        QTest::newRow("sliding window") << 1 << R"({"sliding_window": 4096})"
                                        << "config.sliding_window";
        QTest::newRow("jitter") << 1 << R"({"router_jitter_noise": 0.1})"
                                << "config.router_jitter_noise";
        QTest::newRow("mla") << 2 << R"({"model_type": "deepseek_v3", "kv_lora_rank": 512})"
                             << "config.kv_lora_rank";
        QTest::newRow("sigmoid router") << 2 << R"({"scoring_func": "sigmoid"})"
                                        << "config.scoring_func";
        QTest::newRow("qwen2 gated shared expert") << 3 << "{}"
                                                   << "config.shared_expert_intermediate_size";
        QTest::newRow("qwen2 qkv biases") << 3 << "{}"
                                          << "config.model_type";
        QTest::newRow("unknown type") << 0 << R"({"model_type": "gpt_neox"})"
                                      << "config.model_type";
        QTest::newRow("no layers") << 0 << R"({"num_hidden_layers": null})"
                                   << "config.num_hidden_layers";
    }
    void refused()
    {
        QFETCH(int, base);
        QFETCH(QString, patch);
        QFETCH(QString, field);
        json config = base == 0 ? llama31_8b() : base == 1 ? mixtral() : base == 2 ? deepseek() : qwen2Moe();
        config.merge_patch(json::parse(patch.toStdString()));
        Diagnostics d;
        QVERIFY(!modelFromHfConfig(config, "x", d));
        QVERIFY2(d.format().find(field.toStdString()) != std::string::npos, d.format().c_str());
    }
};

QTEST_GUILESS_MAIN(TestHfConfig)
#include "tst_hfconfig.moc"
