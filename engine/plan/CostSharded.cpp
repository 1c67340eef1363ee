// Sharded data parallelism inside each op: ZeRO-2's gradient reduce-scatters and ZeRO-3's (FSDP's) parameter
// all-gathers per layer, what the compute hides of them, and on GPU clusters what PyTorch FSDP2 adds around
// them: the first gather and the last reduce-scatter of an op that nothing hides, and the copies into and out
// of the collectives' flat buffers on the compute stream (docs/formulas.md, "FSDP's own costs").
#include "engine/plan/CostModelDetail.h"

#include "engine/plan/AllreduceChoice.h"
#include "engine/plan/CollectiveCost.h"
#include "engine/plan/Formulas.h"

#include <algorithm>
#include <cstdint>

namespace loom::plan::cost {

namespace {

// What ZeRO-2 and ZeRO-3 add to an op that computes for `compute` seconds while `comm` seconds of its
// collectives run on their own stream: gathers are prefetched and gradient reduce-scatters wait for nothing,
// so only what the link cannot finish beside the compute is exposed: max(0, comm - compute). Without
// comm.overlap all of it waits.
double exposedBeside(const Layout& l, double comm, double compute)
{
    if (comm <= 0)
        return 0;
    return l.comm.overlap ? std::max(0.0, comm - compute) : comm;
}

// Seconds of one all-gather (or reduce-scatter) of `bytes` over the d ranks of the sharding group.
double shardCollective(const Layout& l, const Costs& c, Collective kind, double bytes, std::int64_t dpSpan)
{
    if (bytes <= 0)
        return 0;
    if (usesNcclModel(l))
        return collectiveSeconds(l, kind, bytes, { c.d, dpSpan });
    return ringAllGatherSeconds(bytes, c.d, linkOf(l, dpSpan)); // a reduce-scatter moves the same bytes
}

// One virtual stage as FSDP2 runs it on a GPU cluster (pytorch/pytorch torch/distributed/fsdp/_fully_shard,
// torchtitan's parallelize): one unit per layer plus the stage's root unit (embedding, final norm, head).
struct ShardedStage {
    double layers = 0, unit = 0, root = 0; // layers, one layer's parameters, the root's (this TP rank's)
    bool holdsLastLayer = false; // torchtitan keeps the model's last layer gathered from forward to backward
};

// FSDP2's exposed collectives of one op, with one unit prefetched at a time (its forward issues the next
// layer's all-gather when a layer starts; backward prefetches the layer before): each layer's gather hides
// behind the layer before it, so the op's first gathers wait in full, and the reduce-scatters of the op's
// last layer and of its root come after the last compute and wait too.
void fsdpExposed(const Layout& l, const ShardedStage& st, double gather, double scatter, double rootGather,
    double rootScatter, double computeF, double computeB, StageCost& sc)
{
    const bool three = l.memory.zero >= 3;
    const double rest = std::max(0.0, st.layers - 1.0); // layers whose gather has a layer before to hide behind
    const double hideF = computeF * rest / st.layers, hideB = computeB * rest / st.layers;
    if (three) {
        // Forward: the root's gather and the first layer's (issued right after, beside the embedding only).
        const double edgeF = rootGather + gather;
        sc.forwardDp = edgeF + exposedBeside(l, rest * gather, hideF);
        sc.forwardShardEdge = std::min(sc.forwardDp, edgeF);
    }
    // Backward: the root stays gathered (FSDP2 does not reshard the root after forward), and so does the
    // model's last layer; any other stage gathers its last layer first, before any compute.
    const double firstB = three && !st.holdsLastLayer ? gather : 0.0;
    const double regathers = three ? rest : 0.0; // each hidden behind the backward of the layer after it
    const double edgeB = firstB + scatter + rootScatter;
    sc.backwardDp = edgeB + exposedBeside(l, regathers * gather + rest * scatter, hideB);
    sc.backwardShardEdge = std::min(sc.backwardDp, edgeB);
}

// FSDP2's copies on the compute stream: after each all-gather the unsharded parameters are copied out of the
// flat output (split_with_sizes_copy: read and write, 2 bytes a 16-bit value each way), and before each
// reduce-scatter the gradients are copied into the flat input at the reduce dtype (chunk_cat: read at the
// compute width, write at the reduced one). The gather's copy-in reads only a shard on its own stream: left out.
void fsdpCopies(const Layout& l, const Costs& c, const ShardedStage& st, double gradWidth, StageCost& sc)
{
    const double memBw = l.cluster.device.memoryBandwidthGBs * 1e9;
    if (memBw <= 0)
        return;
    const double all = st.root + st.layers * st.unit;
    if (l.memory.zero >= 3) {
        sc.forwardShardCopy = 2.0 * c.actBytes * all / memBw;
        const double regathered = std::max(0.0, st.layers - (st.holdsLastLayer ? 1.0 : 0.0)) * st.unit;
        sc.backwardShardCopy = 2.0 * c.actBytes * regathered / memBw;
    }
    sc.backwardShardCopy += (c.actBytes + gradWidth) * all / memBw;
    sc.forwardDp += sc.forwardShardCopy;
    sc.backwardDp += sc.backwardShardCopy;
}

} // namespace

double rootParamsOfVirtualStage(const Layout& l, const std::vector<StageRange>& ranges, std::int64_t vs)
{
    const ModelSpec& m = l.model;
    const double t = double(l.parallel.tp);
    const auto last = static_cast<std::int64_t>(ranges.size()) - 1;
    double n = 0;
    if (vs == 0)
        n += double(m.embeddingParameters()) / t;
    if (vs == last) { // the final norm, and the LM head split over t (tied: a copy of the embedding unless vs = 0)
        const double head = double(m.paddedVocab() * m.hidden) / t;
        n += double(m.headParameters()) - (m.tieEmbeddings ? 0.0 : double(m.paddedVocab() * m.hidden))
            + (!m.tieEmbeddings || vs != 0 ? head : 0.0);
    }
    return n;
}

void shardedDataParallelCosts(const Layout& l, const Costs& c, std::int64_t vs, double computeF, double computeB,
    std::int64_t dpSpan, StageCost& sc)
{
    const double layers = sc.layers;
    const double params = paramsOfVirtualStage(l, c.ranges, vs), bytes = params * c.actBytes;
    // Each layer's gradients are reduce-scattered at their kept width (main_grads_dtype: fp32 for bf16
    // training by default, as FSDP2's reduce_dtype and Megatron's main_grad keep them).
    const double gradWidth = gradientBytesPerValue(l.precision, l.optimizer);
    const double perLayerGather = shardCollective(l, c, Collective::AllGather, bytes / layers, dpSpan);
    const double perLayerScatter
        = shardCollective(l, c, Collective::ReduceScatter, params * gradWidth / layers, dpSpan);
    sc.gatherBytes = bytes;
    // loom-train's ShardedParams gathers and scatters one block (a unit) per call, in fp32.
    sc.gatherAlgorithm = shardAlgorithm(resolveAllreduce(l.comm.allreduce,
        { toString(l.commBackend()), static_cast<std::size_t>(bytes / c.actBytes * 4.0 / layers), int(c.d),
            int(dpSpan) }));
    // ZeRO-3 all-gathers each layer's parameters before its forward and again before its backward; ZeRO-2
    // and 3 reduce-scatter each layer's gradients after its backward (every micro-batch: only a shard of the
    // gradients is kept). These are the collectives' whole durations, drawn on the timeline.
    sc.forwardGather = l.memory.zero >= 3 ? perLayerGather * layers : 0.0;
    sc.backwardGather = perLayerScatter * layers + sc.forwardGather;
    if (!usesNcclModel(l) || c.p * c.v > 1) {
        // loom-train's own sharding (engine/train ShardedParams) prefetches across ops, and so does a pipeline,
        // whose ops follow one another on a rank: the next op's first gather hides in the op before and the
        // last reduce-scatter in the op after. FSDP2's edges are those of one stage (FSDP alone).
        sc.forwardDp = exposedBeside(l, sc.forwardGather, computeF);
        sc.backwardDp = exposedBeside(l, sc.backwardGather, computeB);
        return;
    }
    ShardedStage st;
    st.layers = layers;
    st.root = rootParamsOfVirtualStage(l, c.ranges, vs);
    st.unit = std::max(0.0, params - st.root) / layers;
    const StageRange& range = c.ranges[static_cast<std::size_t>(vs)];
    st.holdsLastLayer = range.last == l.model.layers - 1;
    auto gatherOf = [&](double n) { return shardCollective(l, c, Collective::AllGather, n * c.actBytes, dpSpan); };
    auto scatterOf = [&](double n) { return shardCollective(l, c, Collective::ReduceScatter, n * gradWidth, dpSpan); };
    fsdpExposed(
        l, st, gatherOf(st.unit), scatterOf(st.unit), gatherOf(st.root), scatterOf(st.root), computeF, computeB, sc);
    fsdpCopies(l, c, st, gradWidth, sc);
}

} // namespace loom::plan::cost
