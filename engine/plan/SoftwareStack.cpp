#include "engine/plan/SoftwareStack.h"

#include "engine/plan/JsonFields.h"
#include "engine/plan/Layout.h"
#include "engine/plan/TextUtil.h"

#include <nlohmann/json.hpp>

namespace loom::plan {

const std::vector<BuiltinStack>& builtinStacks()
{
    // The figures and what fixed them; docs/planner.md ("Software stacks") tabulates the rows each was fitted to
    // and the rows kept out of the fit, and tst_published checks both.
    static const std::vector<BuiltinStack> stacks = {
        { { "megatron-core", Elementwise::Fused, 1.0 },
            "Megatron-Core as NeMo 24.x-25.x and Megatron-Bridge run it: Transformer Engine's fused norms, rotary "
            "embedding and SwiGLU, cuDNN's flash attention (the default)",
            "the cluster profiles' own efficiencies, fitted once to the SC21 rows and the published runs of "
            "docs/planner.md (\"The refit\")" },
        { { "megatron-2021", Elementwise::Fused, 1.0 },
            "Megatron-LM of 2021 (Narayanan et al., SC21): apex's fused layer norm, fused bias-GeLU and the fused "
            "scaled-masked softmax; attention materialised and gradients reduced after the backward are layout "
            "settings (memory.attention, comm.overlap_grad_reduce)",
            "compute 1: the SC21 rows are among those the A100 ceiling was fitted to; refitting them alone moves it "
            "by less than their spread (docs/planner.md)" },
        { { "megatron-deepspeed", Elementwise::Fused, 0.79 },
            "Megatron-DeepSpeed (Microsoft's fork as MT-NLG and BLOOM ran it): Megatron's fused kernels with "
            "DeepSpeed's pipeline engine and ZeRO-1",
            "compute fitted to MT-NLG 530B on 280 DGX A100 nodes (Smith et al. 2022, section 2.4: 60.1 s a step); "
            "the 350- and 420-node rows of the same table are held out" },
        { { "torchtitan", Elementwise::Eager, 1.02 },
            "torchtitan (eager PyTorch, FSDP2): RMSNorm, the rotary embedding and SwiGLU op by op; "
            "scaled_dot_product_attention's flash kernel",
            "element-wise passes counted from torchtitan's Llama model (docs/formulas.md); compute fitted to "
            "torchtitan's Llama 3 70B on 64 A100 (docs/performance.md at 0413364); its Llama 2 13B and 70B rows "
            "are held out" },
    };
    return stacks;
}

const BuiltinStack* findBuiltinStack(std::string_view name)
{
    for (const BuiltinStack& s : builtinStacks())
        if (s.spec.name == name)
            return &s;
    return nullptr;
}

std::vector<std::string> builtinStackNames()
{
    std::vector<std::string> names;
    for (const BuiltinStack& s : builtinStacks())
        names.push_back(s.spec.name);
    return names;
}

std::string builtinStackList()
{
    return text::orList(builtinStackNames());
}

std::optional<StackSpec> parseStack(const nlohmann::json& value, const std::string& path, Diagnostics& diagnostics)
{
    if (value.is_string()) {
        const auto& name = value.get_ref<const std::string&>();
        if (const BuiltinStack* s = findBuiltinStack(name))
            return s->spec;
        diagnostics.error(path,
            path + "=" + jsonSnippet(value) + " is not a known software stack; write " + builtinStackList()
                + ", or an object {\"name\", \"elementwise\", \"compute\"}");
        return std::nullopt;
    }
    if (!value.is_object()) {
        diagnostics.error(path,
            path + " is " + jsonTypeName(value) + "; write a stack name such as \"torchtitan\" (" + builtinStackList()
                + ") or an object {\"name\", \"elementwise\", \"compute\"}");
        return std::nullopt;
    }
    Diagnostics local;
    ObjectReader r(value, path, local);
    auto name = r.string("name", Presence::Required, 64);
    auto elementwise = r.choice("elementwise", Presence::Optional, wordsOf(kElementwiseWords));
    auto compute = r.number("compute", Presence::Optional, 0, 2, true);
    r.warnUnknown({ "name", "elementwise", "compute" });
    const bool ok = !local.hasErrors();
    diagnostics.append(local);
    if (!ok)
        return std::nullopt;
    StackSpec s;
    s.name = *name;
    if (elementwise)
        s.elementwise = *valueOf(kElementwiseWords, *elementwise);
    s.compute = compute.value_or(1.0);
    return s;
}

nlohmann::ordered_json toJson(const StackSpec& stack)
{
    if (const BuiltinStack* s = findBuiltinStack(stack.name); s && s->spec == stack)
        return stack.name;
    return { { "name", stack.name }, { "elementwise", wordOf(kElementwiseWords, stack.elementwise) },
        { "compute", stack.compute } };
}

bool stackApplies(const Layout& l)
{
    return l.onGpuCluster() && (l.stack.compute != 1.0 || l.stack.elementwise != Elementwise::Fused);
}

DeviceSpec stackDevice(const Layout& l)
{
    DeviceSpec d = l.cluster.device;
    if (!l.onGpuCluster())
        return d;
    d.gemmMax *= l.stack.compute;
    d.gemmFp8Max *= l.stack.compute;
    d.flashEfficiency *= l.stack.compute;
    return d;
}

double eagerElementwiseBytes(const Layout& l)
{
    if (l.stack.elementwise != Elementwise::Eager || !l.onGpuCluster())
        return 0;
    const ModelSpec& m = l.model;
    const auto& p = l.parallel;
    const double T = double(p.microBatch * m.seqLen / p.cp), t = double(p.tp);
    const double h = double(m.hidden), q = double(m.heads * m.headDim()),
                 k = double(m.effectiveKvHeads() * m.headDim()), f = double(m.ffnHidden);
    double perToken = 0;
    if (m.norm == ModelSpec::Norm::RmsNorm) // two norms a block, split along s with sequence parallelism
        perToken += 2.0 * (36.0 - 4.0) * h / (p.sp ? t : 1.0);
    if (m.position == ModelSpec::Position::Rope)
        perToken += (20.0 - 4.0) * (q + k) / t;
    perToken += 4.0 * q / t; // the attention output back to (batch, sequence, heads) order
    if (m.mlp == ModelSpec::Mlp::SwiGlu)
        perToken += (10.0 - 6.0) * f / t;
    if (k < q) // repeat_kv: K and V expanded to every query head and copied
        perToken += 2.0 * (2.0 * k + 2.0 * q) / t;
    return T * perToken;
}

} // namespace loom::plan
