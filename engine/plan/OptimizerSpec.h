#pragma once

#include "engine/plan/Diagnostics.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace loom::plan {

// The layout's `optimizer` section: AdamW's constants, what weight decay applies to, gradient clipping and
// the learning-rate schedule. Field names are Megatron-LM's arguments (--adam-beta1, --lr-decay-style, ...)
// with '_' for '-'; min_lr_fraction is Loom's (min_lr as a fraction of lr). Absent fields keep loom-train's
// defaults, which are the values before the section existed.
struct OptimizerSpec {
    enum class DecayStyle { Cosine, Linear, Wsd, Constant };
    // Megatron's choices for --exp-avg-dtype and --exp-avg-sq-dtype (fp8 moments keep a per-tensor scale),
    // --main-params-dtype (fp32, fp16) and --main-grads-dtype (fp32, bf16).
    enum class StateDtype { Fp32, Bf16, Fp16, Fp8 };
    // What decays: "matrices" (the blocks' and experts' weight matrices), "embedding" (token and position),
    // "lm_head" (an untied head), "router", "norm" (gains and shifts), "bias".
    enum class DecayGroup { Matrices, Embedding, LmHead, Router, Norm, Bias };

    double adamBeta1 = 0.9;
    double adamBeta2 = 0.95;
    double adamEps = 1e-8;
    double weightDecay = 0.1;
    std::vector<DecayGroup> weightDecayOn { DecayGroup::Matrices, DecayGroup::Embedding, DecayGroup::LmHead,
        DecayGroup::Router };
    double clipGrad = 1.0; // 0: no clipping
    std::optional<double> lr; // peak; loom-train's --lr when absent
    std::optional<double> minLr; // absolute (Megatron's --min-lr); else minLrFraction · lr
    double minLrFraction = 0.1;
    DecayStyle lrDecayStyle = DecayStyle::Cosine;
    std::optional<std::int64_t> lrWarmupIters; // loom-train's --warmup when absent
    std::optional<std::int64_t> lrDecayIters; // the last step of the decay; --steps when absent
    // WSD (warm-up, stable, decay): the decay takes the last lr_wsd_decay_iters steps before lr_decay_iters
    // (a tenth of them when absent), in lr_wsd_decay_style.
    std::optional<std::int64_t> lrWsdDecayIters;
    DecayStyle lrWsdDecayStyle = DecayStyle::Linear;
    StateDtype expAvgDtype = StateDtype::Fp32; // Megatron's --exp-avg-dtype, --exp-avg-sq-dtype
    StateDtype expAvgSqDtype = StateDtype::Fp32;
    StateDtype mainParamsDtype = StateDtype::Fp32; // the optimizer's master copy of 16-bit weights
    // The gradients as kept, accumulated and reduced over DP: absent, the training precision (what the planner
    // counted before the field; Megatron-Core and torchtitan's FSDP2 keep bf16 training's in fp32).
    std::optional<StateDtype> mainGradsDtype;

    bool operator==(const OptimizerSpec&) const = default;
    bool decays(DecayGroup g) const;
    // Megatron-LM's --use-precision-aware-optimizer: needed for any state away from fp32.
    bool precisionAware() const;
};

// Bytes a value of `dtype` takes.
double bytesOf(OptimizerSpec::StateDtype dtype);
// Its name as the layout and Megatron-LM spell it ("fp32", "bf16", "fp16", "fp8").
std::string toString(OptimizerSpec::StateDtype dtype);

// The layout's `init` section: "gpt2" (normal of std, output projections scaled by 1/√(2·layers), the
// position embedding at half the std: loom-train's initialisation before the section existed) or "normal"
// (every matrix normal of std, as Hugging Face's Llama and Mixtral initialise).
struct InitSpec {
    enum class Method { Gpt2, Normal };
    Method method = Method::Gpt2;
    double std = 0.02; // Megatron's --init-method-std
    bool operator==(const InitSpec&) const = default;
};

void readOptimizerSpec(const nlohmann::json& object, OptimizerSpec& out, Diagnostics& diagnostics);
void readInitSpec(const nlohmann::json& object, InitSpec& out, Diagnostics& diagnostics);
// Only the fields away from the defaults (an empty object when all are).
nlohmann::ordered_json toJson(const OptimizerSpec& spec);
nlohmann::ordered_json toJson(const InitSpec& spec);

// The learning rate at step `step` (0-based) of `steps`: linear warm-up to lr over `warmup` steps
// (step+1)/warmup·lr, then the decay style down to the minimum at `decayIters`, the minimum after it.
struct LrSchedule {
    double maxLr = 1e-3, minLr = 1e-4;
    std::int64_t warmup = 10, decayIters = 100, wsdDecayIters = 10;
    OptimizerSpec::DecayStyle style = OptimizerSpec::DecayStyle::Cosine;
    OptimizerSpec::DecayStyle wsdStyle = OptimizerSpec::DecayStyle::Linear;
    double at(std::int64_t step) const;
};
// The schedule of `spec` with loom-train's flags for what it leaves out.
LrSchedule lrSchedule(const OptimizerSpec& spec, double flagLr, std::int64_t flagWarmup, std::int64_t steps);

} // namespace loom::plan
