#include "engine/plan/MemoryTraffic.h"

#include "engine/plan/CostModel.h"
#include "engine/plan/Formulas.h"
#include "engine/plan/SoftwareStack.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace loom::plan {

double layerTrafficBytes(const Layout& l)
{
    const ModelSpec& m = l.model;
    // Flash attention on a GPU keeps the scores in on-chip memory: only what the layer keeps per token moves.
    // (Loom's CPU engine still writes each score row out, so CPU clusters keep the count the calibration fits.)
    const Attention scores
        = l.memory.attention == Attention::Flash && l.onGpuCluster() ? Attention::Flash : Attention::Materialized;
    return 2.0 * layerActivationBytes(m, l.parallel.microBatch, l.parallel.tp, l.parallel.sp, scores, Recompute::None)
        / double(l.parallel.cp) * (l.precision == Precision::Fp32 ? 2.0 : 1.0);
}

LossTraffic lossTrafficBytes(const Layout& l)
{
    if (!l.onGpuCluster())
        return {};
    const ModelSpec& m = l.model;
    const double logits
        = double(l.parallel.microBatch * m.seqLen / l.parallel.cp) * double(m.paddedVocab()) / double(l.parallel.tp);
    return { 26.0 * logits, 14.0 * logits };
}

LossTraffic ringMergeBytes(const Layout& l)
{
    const auto& p = l.parallel;
    if (p.cp <= 1 || !l.onGpuCluster())
        return {};
    const ModelSpec& m = l.model;
    const double T = double(p.microBatch * m.seqLen / p.cp), cp = double(p.cp), t = double(p.tp);
    const double q = T * double(m.hidden) / t, kv = 2.0 * T * double(m.effectiveKvHeads() * m.headDim()) / t;
    return { 6.0 * cp * q, 6.0 * cp * (q + kv) };
}

bool usesFlashKernel(const Layout& l)
{
    // FlashAttention's and cuDNN's fused kernels take 16-bit inputs only; fp32 attention runs as GEMMs.
    return l.memory.attention == Attention::Flash && l.onGpuCluster() && l.precision != Precision::Fp32
        && l.cluster.device.flashEfficiency > 0;
}

double fp8Speedup(const Layout& l)
{
    const DeviceSpec& d = l.cluster.device;
    const double fp8 = d.fp8PeakTflops(l.fp8), base = d.peakTflops(l.precision);
    return l.fp8 != Fp8Recipe::None && fp8 > 0 && base > 0 && d.gemmMax > 0 ? fp8 * d.fp8GemmMax() / (base * d.gemmMax)
                                                                            : 1.0;
}

double fp8CastBytes(const Layout& l)
{
    if (l.fp8 == Fp8Recipe::None)
        return 0;
    const ModelSpec& m = l.model;
    const double T = double(l.parallel.microBatch * m.seqLen / l.parallel.cp), h = double(m.hidden),
                 f = double(m.ffnHidden), t = double(l.parallel.tp);
    // The inputs of the column-parallel QKV and FC1 products are whole (T·h each, gathered with sp), those of
    // the row-parallel projection and FC2 split over t (T·h/t and T·f/t).
    const double elements = T * (2.0 * h + (h + f) / t);
    // Cast: read 16 bits, write 8 (3 bytes); current scaling reads the tensor once more for its amax first;
    // every recipe writes a second, transposed (or column-wise scaled) copy for the backward's GEMMs.
    const double perElement = (l.fp8 == Fp8Recipe::Current ? 5.0 : 3.0) + 1.0;
    return elements * perElement;
}

double fp8ActivationSavingBytes(const Layout& l, std::int64_t microBatch)
{
    if (l.fp8 == Fp8Recipe::None || l.memory.recompute == Recompute::Full)
        return 0;
    const ModelSpec& m = l.model;
    const double sbh = double(m.seqLen) * double(microBatch) * double(m.hidden), t = double(l.parallel.tp);
    // One byte instead of two per element of the QKV and FC1 inputs (kept whole, split with sp), the
    // attention output and FC2's input (2·f bytes a token: f saved), both split over t.
    const double whole = 2.0 / (l.parallel.sp ? t : 1.0);
    const double split = (1.0 + double(m.ffnHidden) / double(m.hidden)) / t;
    return sbh * (whole + split) / double(l.parallel.cp);
}

double attentionCoreFlops(const Layout& l)
{
    const ModelSpec& m = l.model;
    const double T = double(l.parallel.microBatch * m.seqLen / l.parallel.cp), s = double(m.seqLen),
                 h = double(m.hidden);
    const double whole = 4.0 * T * s * h / double(l.parallel.tp);
    // Loom's models are causal decoders: a GPU flash kernel computes only the blocks on and below the diagonal
    // (Loom's CPU engine computes every score and masks it).
    return l.memory.attention == Attention::Flash && l.onGpuCluster() ? whole / 2.0 : whole;
}

double gemmEfficiency(const DeviceSpec& d, double width, double rows)
{
    return d.gemmMax * width / (width + d.gemmHalfWidth) * rows / (rows + d.gemmHalfRows);
}

double layerGemmShape(const Layout& l, const DeviceSpec& d, double rows)
{
    const ModelSpec& m = l.model;
    const double t = double(l.parallel.tp);
    if (d.gemmMax <= 0)
        return 1.0;
    const auto shape = [&](double width) { return gemmEfficiency(d, width, rows) / d.gemmMax; };
    if (m.isMoe()) // the experts' GEMMs are shaped by the routing: the whole layer at its thinnest width, h/t
        return shape(double(m.hidden) / t);
    const double h = double(m.hidden), kv = double(m.headDim() * m.effectiveKvHeads()), f = double(m.ffnHidden);
    const double gates = m.mlp == ModelSpec::Mlp::SwiGlu ? 2.0 : 1.0; // SwiGLU's gate and up products as one
    // {weights (FLOPs / 2T), thinner dimension} of QKV, the projection, FC1 and FC2 on one TP rank.
    const double gemms[4][2]
        = { { h * (h + 2.0 * kv) / t, std::min(h, (h + 2.0 * kv) / t) }, { h * h / t, std::min(h, h / t) },
              { gates * h * f / t, std::min(h, gates * f / t) }, { h * f / t, std::min(h, f / t) } };
    double weights = 0, time = 0;
    for (const auto& g : gemms) {
        weights += g[0];
        time += g[0] / shape(g[1]);
    }
    return weights / time;
}

double ComputeWork::seconds(const DeviceSpec& device, Precision precision) const
{
    return flops / (device.peakTflops(precision) * 1e12 * device.gemmMax) + bytes / (device.memoryBandwidthGBs * 1e9);
}

std::vector<StageWork> stageWork(const Layout& l, std::int64_t chunks)
{
    const ModelSpec& m = l.model;
    const DeviceSpec& dev = l.cluster.device;
    const std::int64_t t = l.parallel.tp;
    const std::vector<StageRange> ranges = l.stageRanges();
    const std::int64_t virtualStages = l.parallel.pp * chunks;
    // T: the tokens of a micro-batch on this rank (s/cp of each sequence with context parallelism); the
    // attention of each of them still reads all s keys, so its FLOPs are 4·T·s·h (1/cp of the sequence's).
    const double T = double(l.parallel.microBatch * m.seqLen / l.parallel.cp), h = double(m.hidden),
                 s = double(m.seqLen), V = double(m.paddedVocab());
    // FLOPs run at peak · max · shape; dividing by the shape leaves what peak · max must do.
    // The attention core's batched products on the curve at h/t (as every GEMM was before); the block's own GEMMs
    // each at its own thinner dimension (layerGemmShape), the LM head at min(h, V/t).
    const double shape = dev.gemmMax > 0 ? gemmEfficiency(dev, h / double(t), T) / dev.gemmMax : 1.0;
    const double blockShape = layerGemmShape(l, dev, T);
    const double headShape = dev.gemmMax > 0 ? gemmEfficiency(dev, std::min(h, V / double(t)), T) / dev.gemmMax : 1.0;
    (void)s;
    // Scores and their use, forward, as executed: at the flash kernel's own efficiency where the profile has
    // one (counted as the FLOPs that take as long at peak · max), else on the GEMM curve.
    const bool flashKernel = usesFlashKernel(l);
    const double attentionFlops
        = attentionCoreFlops(l) * (flashKernel ? dev.gemmMax / dev.flashEfficiency : 1.0 / shape);
    // With FP8 the block's linear layers run at the FP8 peak: counted as the bf16 FLOPs that take as long.
    const double linearSpeedup = fp8Speedup(l);
    const double layerFlops
        = 2.0 * T * blockMatmulParameters(m) / double(t) / blockShape / linearSpeedup + attentionFlops;
    // The backward recomputes: with flash attention the scores Q·Kᵀ (half of attentionFlops),
    // with selective recomputation of materialised attention the whole attention core.
    const bool flash = l.memory.attention == Attention::Flash;
    const double attentionRecompute
        = flash ? attentionFlops / 2.0 : (l.memory.recompute == Recompute::Selective ? attentionFlops : 0.0);
    // Memory-bound work moves about the layer's activation bytes once in and once out (MemoryTraffic.h); it
    // weighs most where h is small.
    const LossTraffic merge = ringMergeBytes(l), loss = lossTrafficBytes(l);
    // An eager stack's element-wise ops pass over their tensors more often than the fused kernels (SoftwareStack.h).
    const double traffic = layerTrafficBytes(l) + fp8CastBytes(l) + eagerElementwiseBytes(l);
    const double layerBytes = traffic + merge.forward, layerBackwardBytes = 2.0 * traffic + merge.backward;
    const double headFlops = 2.0 * T * h * V / double(t) / headShape;
    const bool full = l.memory.recompute == Recompute::Full;
    std::vector<StageWork> out(static_cast<std::size_t>(virtualStages));
    for (std::int64_t vs = 0; vs < virtualStages; ++vs) {
        const double layers = double(ranges[static_cast<std::size_t>(vs)].size());
        StageWork& w = out[static_cast<std::size_t>(vs)];
        const double recompute = full ? 1.0 : 0.0;
        w.forward = { layers * layerFlops, layers * layerBytes };
        // Full recomputation runs each layer's forward again in the backward.
        w.backward = { layers * ((2.0 + recompute) * layerFlops + attentionRecompute),
            layers * (layerBackwardBytes + recompute * layerBytes) };
        if (vs == virtualStages - 1) {
            w.forward.flops += headFlops;
            w.backward.flops += 2.0 * headFlops;
            w.forward.bytes += loss.forward;
            w.backward.bytes += loss.backward;
        }
    }
    return out;
}

} // namespace loom::plan
