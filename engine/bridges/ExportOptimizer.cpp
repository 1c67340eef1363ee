// The layout's `optimizer` section in each framework's own terms: Megatron-LM's and Megatron-DeepSpeed's
// arguments, DeepSpeed's config keys and torchtitan's [optimizer] and [lr_scheduler] tables. A layout without
// the section exports none of it (the framework's own defaults, or the caller's arguments, decide); with it,
// every AdamW constant and the schedule are written out, so that the framework runs what loom-train runs.
#include "engine/bridges/ExportDetail.h"

#include <nlohmann/json.hpp>

namespace loom::plan::exporting {

namespace {

using Dtype = OptimizerSpec::StateDtype;

// Loom's decay style as Megatron-LM's --lr-decay-style spells it.
std::string megatronStyle(OptimizerSpec::DecayStyle s)
{
    switch (s) {
    case OptimizerSpec::DecayStyle::Linear:
        return "linear";
    case OptimizerSpec::DecayStyle::Wsd:
        return "WSD";
    case OptimizerSpec::DecayStyle::Constant:
        return "constant";
    case OptimizerSpec::DecayStyle::Cosine:
        break;
    }
    return "cosine";
}

// Megatron decays every parameter of two or more dimensions: Loom's default groups.
bool megatronDecayGroups(const OptimizerSpec& o)
{
    return o.weightDecayOn == OptimizerSpec().weightDecayOn;
}

void decayGroupNote(const std::string& target, const std::string& rule, ExportResult& r)
{
    r.notes.push_back("optimizer.weight_decay_on: " + target + " " + rule
        + ", not only the groups the layout names; the run decays a different set of parameters");
}

void minLrArgs(const OptimizerSpec& o, std::vector<Arg>& a, ExportResult& r, const std::string& target)
{
    if (o.minLr)
        a.push_back({ "--min-lr", number(*o.minLr) });
    else if (o.lr)
        a.push_back({ "--min-lr", number(*o.lr * o.minLrFraction) });
    else
        r.notes.push_back("optimizer.min_lr_fraction " + number(o.minLrFraction) + ": " + target
            + " takes an absolute --min-lr; pass --lr LR --min-lr " + number(o.minLrFraction) + "·LR together");
}

// The moments' and master weights' dtypes: Megatron-LM's precision-aware optimizer (core_v0.12 on; bf16
// moments from core_v0.13, whose --exp-avg-dtype first lists it).
void precisionArgs(const Layout& l, std::vector<Arg>& a, ExportResult& r, bool forDeepSpeed, int minor)
{
    const OptimizerSpec& o = l.optimizer;
    if (o.precisionAware()) {
        if (forDeepSpeed) {
            r.refusals.push_back("optimizer.exp_avg_dtype, exp_avg_sq_dtype and main_params_dtype: "
                                 "Megatron-DeepSpeed keeps AdamW's states in fp32; remove them or use \"fp32\"");
            return;
        }
        if (minor < 13 && (o.expAvgDtype == Dtype::Bf16 || o.expAvgSqDtype == Dtype::Bf16))
            r.refusals.push_back("optimizer.exp_avg_dtype \"bf16\": Megatron-LM before core_v0.13 offers fp32, fp16 "
                                 "and fp8 moments; use --framework-version core_v0.13.0 or later");
        a.push_back({ "--use-precision-aware-optimizer", "" });
        a.push_back({ "--exp-avg-dtype", toString(o.expAvgDtype) });
        a.push_back({ "--exp-avg-sq-dtype", toString(o.expAvgSqDtype) });
        a.push_back({ "--main-params-dtype", toString(o.mainParamsDtype) });
    }
    if (!o.mainGradsDtype)
        return;
    // Megatron keeps bf16 training's gradients in fp32 unless told otherwise; fp16 training keeps fp16 ones.
    if (*o.mainGradsDtype == Dtype::Bf16 && l.precision == Precision::Bf16) {
        if (l.comm.dpCodec.kind != Codec::Kind::Bf16 && !forDeepSpeed)
            a.push_back({ "--grad-reduce-in-bf16", "" });
        else if (forDeepSpeed)
            r.notes.push_back(
                "optimizer.main_grads_dtype \"bf16\": written as DeepSpeed's data_types.grad_accum_dtype");
    } else if (*o.mainGradsDtype == Dtype::Fp32 && l.precision == Precision::Fp16) {
        a.push_back({ "--accumulate-allreduce-grads-in-fp32", "" });
    }
}

} // namespace

bool optimizerSectionGiven(const Layout& layout)
{
    return !toJson(layout.optimizer).empty();
}

void megatronOptimizerArgs(const Layout& l, std::vector<Arg>& a, ExportResult& r, bool forDeepSpeed, int minor)
{
    const OptimizerSpec& o = l.optimizer;
    const std::string target = forDeepSpeed ? "Megatron-DeepSpeed" : "Megatron-LM";
    precisionArgs(l, a, r, forDeepSpeed, minor);
    if (!optimizerSectionGiven(l))
        return;
    a.push_back({ "--adam-beta1", number(o.adamBeta1) });
    a.push_back({ "--adam-beta2", number(o.adamBeta2) });
    a.push_back({ "--adam-eps", number(o.adamEps) });
    a.push_back({ "--weight-decay", number(o.weightDecay) });
    if (!forDeepSpeed) // DeepSpeed clips by its config's gradient_clipping
        a.push_back({ "--clip-grad", number(o.clipGrad) });
    if (!megatronDecayGroups(o) && o.weightDecay > 0)
        decayGroupNote(target, "decays every weight matrix and embedding (no biases or norms)", r);
    if (o.lr)
        a.push_back({ "--lr", number(*o.lr) });
    minLrArgs(o, a, r, target);
    if (forDeepSpeed && o.lrDecayStyle == OptimizerSpec::DecayStyle::Wsd)
        r.refusals.push_back("optimizer.lr_decay_style \"WSD\": Megatron-DeepSpeed's --lr-decay-style has constant, "
                             "linear, cosine and inverse-square-root; choose one of the first three");
    else
        a.push_back({ "--lr-decay-style", megatronStyle(o.lrDecayStyle) });
    if (o.lrWarmupIters)
        a.push_back({ "--lr-warmup-iters", std::to_string(*o.lrWarmupIters) });
    if (o.lrDecayIters)
        a.push_back({ "--lr-decay-iters", std::to_string(*o.lrDecayIters) });
    if (o.lrDecayStyle == OptimizerSpec::DecayStyle::Wsd && !forDeepSpeed) {
        if (o.lrWsdDecayIters || o.lrDecayIters)
            a.push_back({ "--lr-wsd-decay-iters",
                std::to_string(o.lrWsdDecayIters.value_or(std::max<std::int64_t>(1, *o.lrDecayIters / 10))) });
        else
            r.notes.push_back("optimizer.lr_decay_style \"WSD\": Loom decays over the last tenth of the steps; "
                              "pass --lr-wsd-decay-iters N for Megatron-LM");
        a.push_back({ "--lr-wsd-decay-style", megatronStyle(o.lrWsdDecayStyle) });
    }
}

void deepSpeedOptimizerConfig(const Layout& l, nlohmann::ordered_json& config)
{
    const OptimizerSpec& o = l.optimizer;
    if (o.mainGradsDtype && l.precision != Precision::Fp32)
        config["data_types"] = { { "grad_accum_dtype", *o.mainGradsDtype == Dtype::Bf16 ? "bf16" : "fp32" } };
    if (optimizerSectionGiven(l))
        config["gradient_clipping"] = o.clipGrad;
}

std::string torchTitanOptimizer(const Layout& l, ExportResult& r)
{
    const OptimizerSpec& o = l.optimizer;
    if (o.precisionAware())
        r.refusals.push_back("optimizer.exp_avg_dtype, exp_avg_sq_dtype and main_params_dtype: torchtitan keeps "
                             "AdamW's states and FSDP's sharded parameters in float32; remove them or use \"fp32\"");
    if (o.mainGradsDtype == Dtype::Bf16)
        r.refusals.push_back("optimizer.main_grads_dtype \"bf16\": torchtitan reduces gradients in float32 "
                             "(mixed_precision_reduce); remove it or use \"fp32\"");
    if (!optimizerSectionGiven(l))
        return {};
    if (o.clipGrad <= 0)
        r.refusals.push_back("optimizer.clip_grad 0: torchtitan always clips at training.max_norm; give a bound");
    if (o.weightDecay > 0 && o.weightDecayOn.size() < 6)
        decayGroupNote("torchtitan", "decays every parameter (norms and biases too)", r);
    std::string t = "[optimizer]\nname = \"AdamW\"\n";
    if (o.lr)
        t += "lr = " + number(*o.lr) + "\n";
    t += "beta1 = " + number(o.adamBeta1) + "\nbeta2 = " + number(o.adamBeta2) + "\neps = " + number(o.adamEps)
        + "\nweight_decay = " + number(o.weightDecay) + "\n\n[lr_scheduler]\n";
    if (o.lrWarmupIters)
        t += "warmup_steps = " + std::to_string(*o.lrWarmupIters) + "\n";
    // torchtitan warms up, holds, then decays over the last decay_ratio of the steps (all of them after the
    // warm-up when absent): Loom's cosine and linear decay over all, WSD over its last part, constant none.
    const auto style = o.lrDecayStyle == OptimizerSpec::DecayStyle::Wsd ? o.lrWsdDecayStyle : o.lrDecayStyle;
    if (o.lrDecayStyle == OptimizerSpec::DecayStyle::Constant)
        t += "decay_ratio = 0.0\n";
    else if (o.lrDecayStyle == OptimizerSpec::DecayStyle::Wsd) {
        if (o.lrWsdDecayIters && o.lrDecayIters)
            t += "decay_ratio = " + number(double(*o.lrWsdDecayIters) / double(*o.lrDecayIters)) + "\n";
        else
            t += "decay_ratio = 0.1\n"; // Loom's default: the last tenth
    }
    if (o.lrDecayStyle != OptimizerSpec::DecayStyle::Constant)
        t += std::string("decay_type = \"") + (style == OptimizerSpec::DecayStyle::Linear ? "linear" : "cosine")
            + "\"\n";
    if (o.minLr && o.lr)
        t += "min_lr_factor = " + number(*o.minLr / *o.lr) + "\n";
    else if (o.minLr)
        r.refusals.push_back("optimizer.min_lr without optimizer.lr: torchtitan takes the minimum as a fraction of "
                             "lr (min_lr_factor); give lr too, or min_lr_fraction");
    else
        t += "min_lr_factor = " + number(o.minLrFraction) + "\n";
    if (o.lrDecayIters)
        r.notes.push_back("optimizer.lr_decay_iters: torchtitan decays to the last of training.steps; set steps to "
            + std::to_string(*o.lrDecayIters));
    return t + "\n";
}

} // namespace loom::plan::exporting
