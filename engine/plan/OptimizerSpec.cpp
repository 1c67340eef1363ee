#include "engine/plan/OptimizerSpec.h"

#include "engine/plan/JsonFields.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

namespace loom::plan {

using nlohmann::json;

namespace {

const std::vector<std::string> kStyles { "cosine", "linear", "WSD", "constant" };
const std::vector<std::string> kGroups { "matrices", "embedding", "lm_head", "router", "norm", "bias" };
const std::vector<std::string> kDtypes { "fp32", "bf16", "fp16", "fp8" };

OptimizerSpec::StateDtype dtypeOf(const std::string& s)
{
    const auto it = std::find(kDtypes.begin(), kDtypes.end(), s);
    return static_cast<OptimizerSpec::StateDtype>(it == kDtypes.end() ? 0 : it - kDtypes.begin());
}

OptimizerSpec::DecayStyle styleOf(const std::string& s)
{
    return s == "linear"  ? OptimizerSpec::DecayStyle::Linear
        : s == "WSD"      ? OptimizerSpec::DecayStyle::Wsd
        : s == "constant" ? OptimizerSpec::DecayStyle::Constant
                          : OptimizerSpec::DecayStyle::Cosine;
}

std::string nameOf(OptimizerSpec::DecayStyle s)
{
    return kStyles[static_cast<std::size_t>(s)];
}

// Falls from 1 to 0 as progress goes from 0 to 1.
double fall(OptimizerSpec::DecayStyle style, double progress)
{
    progress = std::clamp(progress, 0.0, 1.0);
    if (style == OptimizerSpec::DecayStyle::Linear)
        return 1.0 - progress;
    if (style == OptimizerSpec::DecayStyle::Constant)
        return 1.0;
    return 0.5 * (1.0 + std::cos(3.141592653589793 * progress));
}

} // namespace

bool OptimizerSpec::decays(DecayGroup g) const
{
    return std::find(weightDecayOn.begin(), weightDecayOn.end(), g) != weightDecayOn.end();
}

bool OptimizerSpec::precisionAware() const
{
    return expAvgDtype != StateDtype::Fp32 || expAvgSqDtype != StateDtype::Fp32 || mainParamsDtype != StateDtype::Fp32;
}

double bytesOf(OptimizerSpec::StateDtype dtype)
{
    switch (dtype) {
    case OptimizerSpec::StateDtype::Fp32:
        return 4.0;
    case OptimizerSpec::StateDtype::Bf16:
    case OptimizerSpec::StateDtype::Fp16:
        return 2.0;
    case OptimizerSpec::StateDtype::Fp8:
        return 1.0;
    }
    return 4.0;
}

std::string toString(OptimizerSpec::StateDtype dtype)
{
    return kDtypes[static_cast<std::size_t>(dtype)];
}

void readOptimizerSpec(const json& object, OptimizerSpec& o, Diagnostics& d)
{
    ObjectReader r(object, "optimizer", d);
    if (auto v = r.number("adam_beta1", Presence::Optional, 0.0, 1.0))
        o.adamBeta1 = *v;
    if (auto v = r.number("adam_beta2", Presence::Optional, 0.0, 1.0))
        o.adamBeta2 = *v;
    if (auto v = r.number("adam_eps", Presence::Optional, 0.0, 1.0, true))
        o.adamEps = *v;
    if (auto v = r.number("weight_decay", Presence::Optional, 0.0, 10.0))
        o.weightDecay = *v;
    if (const json* on = r.find("weight_decay_on")) {
        if (!on->is_array() || on->size() > kGroups.size()) {
            r.reportWrongType("weight_decay_on", *on,
                "an array of \"matrices\", \"embedding\", \"lm_head\", "
                "\"router\", \"norm\", \"bias\"");
        } else {
            o.weightDecayOn.clear();
            for (const auto& g : *on) {
                const auto it
                    = g.is_string() ? std::find(kGroups.begin(), kGroups.end(), g.get<std::string>()) : kGroups.end();
                if (it == kGroups.end())
                    d.error(r.pathOf("weight_decay_on"),
                        r.pathOf("weight_decay_on") + " holds " + jsonSnippet(g)
                            + "; expected \"matrices\", \"embedding\", \"lm_head\", \"router\", \"norm\" or \"bias\"");
                else
                    o.weightDecayOn.push_back(static_cast<OptimizerSpec::DecayGroup>(it - kGroups.begin()));
            }
        }
    }
    if (auto v = r.number("clip_grad", Presence::Optional, 0.0, 1e6))
        o.clipGrad = *v;
    if (auto v = r.number("lr", Presence::Optional, 0.0, 10.0, true))
        o.lr = *v;
    if (auto v = r.number("min_lr", Presence::Optional, 0.0, 10.0))
        o.minLr = *v;
    if (auto v = r.number("min_lr_fraction", Presence::Optional, 0.0, 1.0))
        o.minLrFraction = *v;
    if (r.find("min_lr") && r.find("min_lr_fraction"))
        d.error(r.pathOf("min_lr_fraction"),
            "optimizer.min_lr and optimizer.min_lr_fraction both set the final learning rate; keep one");
    if (o.minLr && o.lr && *o.minLr > *o.lr)
        d.error(r.pathOf("min_lr"), "optimizer.min_lr is above optimizer.lr; the schedule decays from lr to min_lr");
    if (auto v = r.choice("lr_decay_style", Presence::Optional, kStyles))
        o.lrDecayStyle = styleOf(*v);
    if (auto v = r.integer("lr_warmup_iters", Presence::Optional, 0, std::int64_t(1) << 40))
        o.lrWarmupIters = *v;
    if (auto v = r.integer("lr_decay_iters", Presence::Optional, 1, std::int64_t(1) << 40))
        o.lrDecayIters = *v;
    if (auto v = r.integer("lr_wsd_decay_iters", Presence::Optional, 1, std::int64_t(1) << 40))
        o.lrWsdDecayIters = *v;
    if (auto v = r.choice("lr_wsd_decay_style", Presence::Optional, { "linear", "cosine" }))
        o.lrWsdDecayStyle = styleOf(*v);
    for (const char* key : { "lr_wsd_decay_iters", "lr_wsd_decay_style" })
        if (r.find(key) && o.lrDecayStyle != OptimizerSpec::DecayStyle::Wsd)
            d.error(r.pathOf(key), r.pathOf(key) + " is given but optimizer.lr_decay_style is not \"WSD\"");
    if (auto v = r.choice("exp_avg_dtype", Presence::Optional, kDtypes))
        o.expAvgDtype = dtypeOf(*v);
    if (auto v = r.choice("exp_avg_sq_dtype", Presence::Optional, kDtypes))
        o.expAvgSqDtype = dtypeOf(*v);
    if (auto v = r.choice("main_params_dtype", Presence::Optional, { "fp32", "fp16" }))
        o.mainParamsDtype = dtypeOf(*v);
    if (auto v = r.choice("main_grads_dtype", Presence::Optional, { "fp32", "bf16" }))
        o.mainGradsDtype = dtypeOf(*v);
    r.warnUnknown({ "adam_beta1", "adam_beta2", "adam_eps", "weight_decay", "weight_decay_on", "clip_grad", "lr",
        "min_lr", "min_lr_fraction", "lr_decay_style", "lr_warmup_iters", "lr_decay_iters", "lr_wsd_decay_iters",
        "lr_wsd_decay_style", "exp_avg_dtype", "exp_avg_sq_dtype", "main_params_dtype", "main_grads_dtype" });
}

void readInitSpec(const json& object, InitSpec& out, Diagnostics& d)
{
    ObjectReader r(object, "init", d);
    if (auto v = r.choice("method", Presence::Optional, { "gpt2", "normal" }))
        out.method = *v == "normal" ? InitSpec::Method::Normal : InitSpec::Method::Gpt2;
    if (auto v = r.number("std", Presence::Optional, 0.0, 10.0, true))
        out.std = *v;
    r.warnUnknown({ "method", "std" });
}

nlohmann::ordered_json toJson(const OptimizerSpec& o)
{
    const OptimizerSpec def;
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    if (o.adamBeta1 != def.adamBeta1)
        j["adam_beta1"] = o.adamBeta1;
    if (o.adamBeta2 != def.adamBeta2)
        j["adam_beta2"] = o.adamBeta2;
    if (o.adamEps != def.adamEps)
        j["adam_eps"] = o.adamEps;
    if (o.weightDecay != def.weightDecay)
        j["weight_decay"] = o.weightDecay;
    if (o.weightDecayOn != def.weightDecayOn) {
        j["weight_decay_on"] = nlohmann::ordered_json::array();
        for (auto g : o.weightDecayOn)
            j["weight_decay_on"].push_back(kGroups[static_cast<std::size_t>(g)]);
    }
    if (o.clipGrad != def.clipGrad)
        j["clip_grad"] = o.clipGrad;
    if (o.lr)
        j["lr"] = *o.lr;
    if (o.minLr)
        j["min_lr"] = *o.minLr;
    if (o.minLrFraction != def.minLrFraction)
        j["min_lr_fraction"] = o.minLrFraction;
    if (o.lrDecayStyle != def.lrDecayStyle)
        j["lr_decay_style"] = nameOf(o.lrDecayStyle);
    if (o.lrWarmupIters)
        j["lr_warmup_iters"] = *o.lrWarmupIters;
    if (o.lrDecayIters)
        j["lr_decay_iters"] = *o.lrDecayIters;
    if (o.lrWsdDecayIters)
        j["lr_wsd_decay_iters"] = *o.lrWsdDecayIters;
    if (o.lrWsdDecayStyle != def.lrWsdDecayStyle)
        j["lr_wsd_decay_style"] = nameOf(o.lrWsdDecayStyle);
    if (o.expAvgDtype != def.expAvgDtype)
        j["exp_avg_dtype"] = toString(o.expAvgDtype);
    if (o.expAvgSqDtype != def.expAvgSqDtype)
        j["exp_avg_sq_dtype"] = toString(o.expAvgSqDtype);
    if (o.mainParamsDtype != def.mainParamsDtype)
        j["main_params_dtype"] = toString(o.mainParamsDtype);
    if (o.mainGradsDtype)
        j["main_grads_dtype"] = toString(*o.mainGradsDtype);
    return j;
}

nlohmann::ordered_json toJson(const InitSpec& s)
{
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    if (s.method != InitSpec::Method::Gpt2)
        j["method"] = "normal";
    if (s.std != 0.02)
        j["std"] = s.std;
    return j;
}

double LrSchedule::at(std::int64_t step) const
{
    if (step < warmup)
        return maxLr * static_cast<double>(step + 1) / static_cast<double>(warmup);
    if (style == OptimizerSpec::DecayStyle::Constant || decayIters <= warmup)
        return maxLr;
    if (style == OptimizerSpec::DecayStyle::Wsd) {
        const std::int64_t start = std::max(warmup, decayIters - wsdDecayIters);
        if (step < start)
            return maxLr;
        const double progress = double(step - start) / double(std::max<std::int64_t>(1, decayIters - start));
        return minLr + (maxLr - minLr) * fall(wsdStyle, progress);
    }
    const double progress = double(step - warmup) / double(decayIters - warmup);
    return minLr + (maxLr - minLr) * fall(style, progress);
}

LrSchedule lrSchedule(const OptimizerSpec& o, double flagLr, std::int64_t flagWarmup, std::int64_t steps)
{
    LrSchedule s;
    s.maxLr = o.lr.value_or(flagLr);
    s.minLr = o.minLr.value_or(s.maxLr * o.minLrFraction);
    s.warmup = o.lrWarmupIters.value_or(flagWarmup);
    s.decayIters = o.lrDecayIters.value_or(steps);
    s.wsdDecayIters = o.lrWsdDecayIters.value_or(std::max<std::int64_t>(1, s.decayIters / 10));
    s.style = o.lrDecayStyle;
    s.wsdStyle = o.lrWsdDecayStyle;
    return s;
}

} // namespace loom::plan
