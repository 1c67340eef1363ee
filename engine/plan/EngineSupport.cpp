#include "engine/plan/EngineSupport.h"

#include <utility>

namespace loom::plan {

namespace {

void moeRules(const Layout& l, std::vector<std::string>& out)
{
    const ModelSpec& m = l.model;
    const ParallelSpec& p = l.parallel;
    if (!m.isMoe())
        return;
    if (m.capacityFactor > 0)
        out.push_back("model.capacity_factor=" + std::to_string(m.capacityFactor)
            + " drops tokens over an expert's capacity, but loom-train routes dropless (every layout computes the "
              "same function); remove capacity_factor or set it to 0");
    if (p.sp && p.tp > 1)
        out.push_back("parallel.sp with mixture-of-experts blocks is not implemented in loom-train (the "
                      "load-balancing loss is a product of means over the whole sequence); set parallel.sp to false");
    if (p.cp > 1)
        out.push_back("parallel.cp=" + std::to_string(p.cp)
            + " with mixture-of-experts blocks is not implemented in loom-train (the load-balancing loss is a "
              "product of means over the whole sequence); use cp 1");
    // Megatron-Core's grid is the engine's own carving (ep consecutive DP ranks, experts whole) only with
    // tp 1, cp 1 and expert_tp 1; any other split of the experts over TP ranks the engine cannot train.
    if (p.expertTp > 0 && (p.expertTp != 1 || p.tp != 1 || p.dp % p.ep != 0))
        out.push_back("parallel.expert_tp=" + std::to_string(p.expertTp) + " with tp=" + std::to_string(p.tp)
            + ", dp=" + std::to_string(p.dp) + ", ep=" + std::to_string(p.ep)
            + ": loom-train holds the experts whole on every TP rank and carves expert groups out of dp only; "
              "Megatron-Core's expert grid is planned but not trained (use tp 1, expert_tp 1 and an ep dividing "
              "dp, or leave expert_tp out)");
    if (p.ep > 1 && l.memory.zero >= 1)
        out.push_back("memory.zero=" + std::to_string(l.memory.zero) + " with parallel.ep=" + std::to_string(p.ep)
            + ": loom-train reduces the experts' gradients over the expert-data-parallel group and shards "
              "nothing over it; use memory.zero 0");
    if (p.ep > 1 && l.comm.dpCodec.kind == Codec::Kind::TopK && l.comm.errorFeedback)
        out.push_back("comm.dp_codec top-k with error feedback (sparse Adam) and parallel.ep=" + std::to_string(p.ep)
            + " are not supported together in loom-train; use another codec or ep 1");
}

// ZeRO-2/3 reduce-scatter each block's gradient as it is finished, uncompressed: sparse Adam's top-k
// exchange needs the whole local gradient, which those stages never hold (the update would read freed memory).
void shardingRules(const Layout& l, std::vector<std::string>& out)
{
    if (l.memory.zero >= 2 && l.parallel.dp * l.parallel.cp > 1 && l.comm.dpCodec.kind == Codec::Kind::TopK
        && l.comm.errorFeedback)
        out.push_back(
            "comm.dp_codec top-k with error feedback (sparse Adam) and memory.zero=" + std::to_string(l.memory.zero)
            + " are not supported together in loom-train (ZeRO-2/3 reduce-scatter each block's gradient "
              "uncompressed as soon as it is done); use memory.zero 0 or 1");
}

// loom-train keeps AdamW's moments in fp32; the planner also prices bf16 states.
void optimizerRules(const Layout& l, std::vector<std::string>& out)
{
    const auto& o = l.optimizer;
    for (auto [dtype, field] : { std::pair { o.expAvgDtype, "exp_avg_dtype" }, { o.expAvgSqDtype, "exp_avg_sq_dtype" },
             { o.mainParamsDtype, "main_params_dtype" } })
        if (dtype != OptimizerSpec::StateDtype::Fp32)
            out.push_back(std::string("optimizer.") + field + " is \"" + toString(dtype)
                + "\", but loom-train keeps AdamW's moments and master weights in fp32 (the planner counts "
                  "smaller states); remove it or use \"fp32\"");
}

// Zero-bubble schedules defer the weight gradients to W; ZeRO-2/3 reduce-scatter (and ZeRO-3 frees) each
// block's gradients right after its backward pass, before W has added them.
void scheduleRules(const Layout& l, std::vector<std::string>& out)
{
    if (splitsBackward(l.parallel.schedule) && l.memory.zero >= 2)
        out.push_back("parallel.schedule \"" + std::string(toString(l.parallel.schedule))
            + "\" with memory.zero=" + std::to_string(l.memory.zero)
            + ": loom-train reduce-scatters each block's gradients after its backward, before the deferred weight "
              "gradients (W) are added; use memory.zero 0 or 1, or schedule \"1f1b\"");
}

} // namespace

std::string EngineSupport::reason() const
{
    std::string out;
    for (const auto& p : problems)
        out += (out.empty() ? "" : "; ") + p;
    return out;
}

EngineSupport engineSupport(const Layout& l)
{
    EngineSupport s;
    // loom-train's kernels run on the CPU: NCCL would be handed host pointers. Until a GPU engine exists,
    // a layout that trains on NCCL (a GPU cluster's default backend) is planned, not trained.
    if (l.commBackend() == CommBackend::Nccl)
        s.problems.push_back(std::string("comm.backend is nccl")
            + (l.comm.backend ? "" : " (the default on a GPU cluster)")
            + ", but loom-train computes on the CPU and NCCL needs GPU memory; set comm.backend to \"mpi\" or "
              "\"gloo\" to train this layout on CPU ranks");
    moeRules(l, s.problems);
    shardingRules(l, s.problems);
    optimizerRules(l, s.problems);
    scheduleRules(l, s.problems);
    return s;
}

} // namespace loom::plan
