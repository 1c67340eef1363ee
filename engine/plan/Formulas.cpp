#include "engine/plan/Formulas.h"

#include "engine/plan/TextUtil.h"

#include <algorithm>

namespace loom::plan {

double megatronModelFlops(const ModelSpec& m, std::int64_t globalBatch, bool fullRecompute)
{
    const double B = double(globalBatch), s = double(m.seqLen), l = double(m.layers), h = double(m.hidden),
                 V = double(m.vocab);
    return fullRecompute ? 96.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h))
                         : 72.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * l * h));
}

double blockMatmulParameters(const ModelSpec& m)
{
    const double h = double(m.hidden), kv = double(m.headDim() * m.effectiveKvHeads()), f = double(m.ffnHidden);
    const double gates = m.mlp == ModelSpec::Mlp::SwiGlu ? 3.0 : 2.0;
    const double attention = h * (h + 2.0 * kv) + h * h;
    const double dense = attention + gates * h * f;
    if (!m.isMoe() || m.layers <= 0)
        return dense;
    // An MoE block: the router, the top_k experts a token goes through and the shared experts every token
    // goes through; averaged over the blocks (the leading dense blocks count as dense).
    const double shared = m.sharedExperts > 0 ? gates * h * double(m.sharedExperts * m.sharedExpertFfn()) : 0.0;
    const double moe
        = attention + h * double(m.experts) + double(m.effectiveTopK()) * gates * h * double(m.expertFfn()) + shared;
    const double moeBlocks = double(m.moeLayerCount());
    return (dense * (double(m.layers) - moeBlocks) + moe * moeBlocks) / double(m.layers);
}

double allToAllSeconds(double bytes, std::int64_t n, const LinkSpec& link)
{
    if (n <= 1 || bytes <= 0)
        return 0;
    const double alpha = link.latencyUs * 1e-6, beta = link.bandwidthGBs * 1e9;
    return double(n - 1) * alpha + double(n - 1) / double(n) * bytes / beta;
}

double moeAllToAllBytes(const ModelSpec& m, std::int64_t microBatch, double activationBytes)
{
    return double(microBatch) * double(m.seqLen) * double(m.effectiveTopK()) * double(m.hidden) * activationBytes;
}

double modelFlops(const ModelSpec& m, std::int64_t globalBatch, bool fullRecompute)
{
    const double tokens = double(globalBatch) * double(m.seqLen), s = double(m.seqLen), h = double(m.hidden),
                 l = double(m.layers), V = double(m.vocab);
    const double perLayer = 2.0 * blockMatmulParameters(m) + 4.0 * s * h;
    return tokens * ((fullRecompute ? 4.0 : 3.0) * l * perLayer + 6.0 * h * V);
}

double deferredWeightFloatsPerToken(const ModelSpec& m, std::int64_t layer, std::int64_t tp)
{
    const double h = double(m.hidden), t = double(tp), kv = double(m.effectiveKvHeads() * m.headDim());
    const bool gpt2 = m.mlp == ModelSpec::Mlp::Gelu && m.norm == ModelSpec::Norm::LayerNorm
        && m.position == ModelSpec::Position::Learned && m.bias && m.tieEmbeddings && m.effectiveKvHeads() == m.heads;
    const bool swiglu = m.mlp == ModelSpec::Mlp::SwiGlu;
    // An MLP of inner size f on every token: up (and gate) h → f, down f → h.
    auto mlp = [&](double f, double split) { return (swiglu ? 2.0 : 1.0) * (h + f / split) + (f / split + h); };
    const double attention = gpt2 ? (h + 3.0 * h / t) + (h / t + h) : (h + h / t) + 2.0 * (h + kv / t) + (h / t + h);
    if (!m.moeLayer(layer))
        return attention + mlp(double(m.ffnHidden), t);
    double experts = double(m.effectiveTopK()) * mlp(double(m.expertFfn()), 1.0) + (h + double(m.experts));
    if (m.sharedExperts > 0)
        experts += mlp(double(m.sharedExperts * m.sharedExpertFfn()), 1.0);
    return attention + experts;
}

double activationBytesPerLayer(const ModelSpec& m, std::int64_t b, std::int64_t t, Recompute recompute, bool sp)
{
    const double s = double(m.seqLen), h = double(m.hidden), a = double(m.heads), B = double(b), T = double(t);
    switch (recompute) {
    case Recompute::Full:
        return 2.0 * s * B * h;
    case Recompute::Selective:
        return sp ? 34.0 * s * B * h / T : s * B * h * (10.0 + 24.0 / T);
    case Recompute::None:
        if (t == 1)
            return s * B * h * (34.0 + 5.0 * a * s / h);
        return sp ? s * B * h / T * (34.0 + 5.0 * a * s / h) : s * B * h * (10.0 + 24.0 / T + 5.0 * a * s / (h * T));
    }
    return 0;
}

ActivationTerms activationTerms(const ModelSpec& m, bool efficientNorm)
{
    const double h = double(m.hidden), f = double(m.ffnHidden);
    const double kvShare = double(m.effectiveKvHeads()) / double(m.heads > 0 ? m.heads : 1);
    const bool llama = m.mlp == ModelSpec::Mlp::SwiGlu; // the Llama form trains without dropout
    ActivationTerms a;
    // two norm inputs (4, none when the norms keep their outputs instead), the attention and MLP inputs (4),
    // and the two dropout masks (2) in the GPT form
    a.replicated = 8.0 + (llama ? 0.0 : 2.0) - (efficientNorm ? 4.0 : 0.0);
    // Q and K for the scores, V, the attention output (the projection's input): 2 + 2·kv/a + 2·kv/a + 2
    const double attention = 4.0 + 4.0 * kvShare;
    // GELU: its input and output (2·f each); SwiGLU: gate, up and their product (2·f each)
    const double mlp = (llama ? 6.0 : 4.0) * f / h;
    a.split = attention + mlp;
    a.scores = llama ? 2.0 : 5.0; // softmax output (2), with dropout also its mask (1) and output (2)
    return a;
}

double layerActivationBytes(const ModelSpec& m, std::int64_t b, std::int64_t t, bool sp, Attention attention,
    Recompute recompute, bool efficientNorm)
{
    const double sbh = double(m.seqLen) * double(b) * double(m.hidden), T = double(t);
    const double spDivisor = sp ? T : 1.0;
    if (recompute == Recompute::Full)
        return 2.0 * sbh / spDivisor; // only the layer's input is kept
    const ActivationTerms a = activationTerms(m, efficientNorm);
    double bytes = sbh * (a.replicated / spDivisor + a.split / T);
    if (attention == Attention::Materialized && recompute != Recompute::Selective)
        bytes += sbh * a.scores * double(m.heads) * double(m.seqLen) / (double(m.hidden) * T);
    return bytes;
}

std::string layerActivationFormula(
    const ModelSpec& m, bool sp, Attention attention, Recompute recompute, bool efficientNorm)
{
    if (recompute == Recompute::Full)
        return sp ? "2·s·b·h/t" : "2·s·b·h";
    const ActivationTerms a = activationTerms(m, efficientNorm);
    std::string f
        = "s·b·h·(" + text::fourDigits(a.replicated) + (sp ? "/t" : "") + " + " + text::fourDigits(a.split) + "/t";
    if (attention == Attention::Materialized && recompute != Recompute::Selective)
        f += " + " + text::fourDigits(a.scores) + "·a·s/(h·t)";
    return f + ")";
}

ModelStateBytes modelStateBytesPerParameter(Precision precision, int zero, std::int64_t dp)
{
    const bool mixed = precision != Precision::Fp32;
    const double d = double(dp > 0 ? dp : 1);
    ModelStateBytes b;
    b.params = (mixed ? 2.0 : 4.0) / (zero >= 3 ? d : 1.0);
    b.grads = (mixed ? 2.0 : 4.0) / (zero >= 2 ? d : 1.0);
    b.optimizer = (mixed ? 12.0 : 8.0) / (zero >= 1 ? d : 1.0);
    return b;
}

double fp8ScalingStateBytesPerLayer()
{
    return 4.0 * 5.0 * double(kFp8AmaxHistory + 2) * 4.0;
}

double gradientBytesPerValue(Precision precision, const OptimizerSpec& o)
{
    return o.mainGradsDtype ? bytesOf(*o.mainGradsDtype) : double(bytesPerElement(precision));
}

ModelStateBytes modelStateBytesPerParameter(Precision precision, const OptimizerSpec& o, int zero, std::int64_t dp)
{
    const double d = double(dp > 0 ? dp : 1);
    const double master = precision == Precision::Fp32 ? 0.0 : bytesOf(o.mainParamsDtype);
    ModelStateBytes b;
    b.params = double(bytesPerElement(precision)) / (zero >= 3 ? d : 1.0);
    b.grads = gradientBytesPerValue(precision, o) / (zero >= 2 ? d : 1.0);
    b.optimizer = (master + bytesOf(o.expAvgDtype) + bytesOf(o.expAvgSqDtype)) / (zero >= 1 ? d : 1.0);
    return b;
}

double ringAllReduceSeconds(double bytes, std::int64_t n, const LinkSpec& link)
{
    if (n <= 1 || bytes <= 0)
        return 0;
    const double alpha = link.latencyUs * 1e-6, beta = link.bandwidthGBs * 1e9;
    return 2.0 * double(n - 1) * alpha + 2.0 * double(n - 1) / double(n) * bytes / beta;
}

double ringAllGatherSeconds(double bytes, std::int64_t n, const LinkSpec& link)
{
    if (n <= 1 || bytes <= 0)
        return 0;
    const double alpha = link.latencyUs * 1e-6, beta = link.bandwidthGBs * 1e9;
    return double(n - 1) * alpha + double(n - 1) / double(n) * bytes / beta;
}

RingAttentionVolume ringAttentionVolume(
    const ModelSpec& m, std::int64_t microBatch, std::int64_t tp, std::int64_t cp, double bytesPerValue)
{
    RingAttentionVolume v;
    if (cp <= 1)
        return v;
    const double kvWidth = double(m.effectiveKvHeads() * m.headDim()) / double(tp);
    v.blockBytes = 2.0 * double(microBatch) * double(m.seqLen) / double(cp) * kvWidth * bytesPerValue;
    v.forwardBlocks = cp - 1;
    v.backwardBlocks = 2 * cp - 1;
    return v;
}

double ringExposedForward(std::int64_t cp, double step, double attention)
{
    if (cp <= 1)
        return 0;
    return double(cp - 1) * std::max(0.0, step - attention / double(cp));
}

double ringExposedBackward(std::int64_t cp, double step, double attention)
{
    if (cp <= 1)
        return 0;
    const double a = attention / double(cp);
    return 2.0 * std::max(0.0, step - a) + double(cp - 2) * std::max(0.0, 2.0 * step - a) + step;
}

} // namespace loom::plan
