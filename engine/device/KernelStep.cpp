#include "engine/device/KernelStep.h"

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

namespace loom::device {

namespace {

// Where one block's tensors lie in the flat parameter (and gradient) buffer. Weights are [in, out] row-major.
struct BlockParams {
    std::size_t g1, b1, wqkv, bqkv, wproj, bproj, g2, b2, wfc, bfc, wout, bout;
};

// One block's activations, kept from the forward for the backward.
struct BlockActs {
    Buffer<float> ln1, mean1, rstd1, qkv, probs, att, proj, ln2, mean2, rstd2, fc, gelu, out;
};

} // namespace

struct KernelStep::Buffers {
    std::vector<BlockParams> blocks;
    std::size_t wte = 0, gf = 0, bf = 0, count = 0;
    Buffer<float> params, grads, x0, lnf, meanf, rstdf, logits;
    Buffer<float> dA, dB, dLn, d3h, d4h; // backward scratch
    Buffer<std::int32_t> targets;
    std::vector<BlockActs> acts;
};

KernelStep::KernelStep(Device& device, train::Kernels& kernels, StepShape shape, Loss loss, std::uint64_t seed)
    : m_device(device)
    , m_kernels(kernels)
    , m_shape(shape)
    , m_loss(std::move(loss))
    , m_b(std::make_unique<Buffers>())
{
    const std::size_t h = std::size_t(shape.hidden), T = std::size_t(shape.rows()), V = std::size_t(shape.vocab);
    Buffers& b = *m_b;
    std::size_t at = 0;
    auto take = [&](std::size_t n) { return std::exchange(at, at + n); };
    for (int l = 0; l < shape.layers; ++l)
        b.blocks.push_back({ take(h), take(h), take(h * 3 * h), take(3 * h), take(h * h), take(h), take(h), take(h),
            take(h * 4 * h), take(4 * h), take(4 * h * h), take(h) });
    b.wte = take(V * h);
    b.gf = take(h);
    b.bf = take(h);
    b.count = at;

    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    std::vector<float> host(b.count);
    for (float& x : host)
        x = normal(rng);
    auto ones = [&](std::size_t from, std::size_t n) { std::fill_n(host.begin() + std::ptrdiff_t(from), n, 1.0f); };
    for (const BlockParams& p : b.blocks) {
        ones(p.g1, h);
        ones(p.g2, h);
    }
    ones(b.gf, h);
    b.params = Buffer<float>(device, b.count);
    b.params.upload(host);
    b.grads = Buffer<float>(device, b.count);

    std::vector<float> x(T * h);
    std::normal_distribution<float> unit(0.0f, 1.0f);
    for (float& v : x)
        v = unit(rng);
    b.x0 = Buffer<float>(device, x.size());
    b.x0.upload(x);
    std::vector<std::int32_t> targets(T);
    std::uniform_int_distribution<std::int32_t> word(0, shape.vocab - 1);
    for (auto& t : targets)
        t = word(rng);
    b.targets = Buffer<std::int32_t>(device, T);
    b.targets.upload(targets);

    const std::size_t probs = std::size_t(shape.batch) * shape.heads * shape.seq * shape.seq;
    for (int l = 0; l < shape.layers; ++l) {
        auto f = [&](std::size_t n) { return Buffer<float>(device, n); };
        b.acts.push_back({ f(T * h), f(T), f(T), f(T * 3 * h), f(probs), f(T * h), f(T * h), f(T * h), f(T), f(T),
            f(T * 4 * h), f(T * 4 * h), f(T * h) });
    }
    b.lnf = Buffer<float>(device, T * h);
    b.meanf = Buffer<float>(device, T);
    b.rstdf = Buffer<float>(device, T);
    b.logits = Buffer<float>(device, T * V);
    b.dA = Buffer<float>(device, T * h);
    b.dB = Buffer<float>(device, T * h);
    b.dLn = Buffer<float>(device, T * h);
    b.d3h = Buffer<float>(device, T * 3 * h);
    b.d4h = Buffer<float>(device, T * 4 * h);
}

KernelStep::~KernelStep() = default;

const float* KernelStep::parameters() const
{
    return m_b->params.data();
}

float* KernelStep::parameters()
{
    return m_b->params.data();
}

const float* KernelStep::gradients() const
{
    return m_b->grads.data();
}

float* KernelStep::gradients()
{
    return m_b->grads.data();
}

std::size_t KernelStep::parameterCount() const
{
    return m_b->count;
}

void KernelStep::run()
{
    m_device.fillBytes(m_b->grads.data(), 0, m_b->grads.bytes());
    forward();
    m_loss(m_b->logits.data(), m_b->targets.data(), m_shape.rows(), m_shape.vocab);
    backward();
}

void KernelStep::forward()
{
    auto& k = m_kernels;
    Buffers& b = *m_b;
    const int T = m_shape.rows(), h = m_shape.hidden, H = m_shape.heads;
    float* P = b.params.data();
    const float* x = b.x0.data();
    for (std::size_t l = 0; l < b.blocks.size(); ++l) {
        const BlockParams& p = b.blocks[l];
        BlockActs& a = b.acts[l];
        k.layerNormForward(a.ln1.data(), a.mean1.data(), a.rstd1.data(), x, P + p.g1, P + p.b1, T, h, 1e-5f);
        k.gemm(false, false, T, 3 * h, h, a.ln1.data(), P + p.wqkv, a.qkv.data(), false);
        k.addBias(a.qkv.data(), P + p.bqkv, T, 3 * h);
        k.attentionForward(a.att.data(), a.probs.data(), a.qkv.data(), m_shape.batch, m_shape.seq, H, h / H);
        k.gemm(false, false, T, h, h, a.att.data(), P + p.wproj, a.proj.data(), false);
        k.addBias(a.proj.data(), P + p.bproj, T, h);
        k.layerNormForward(
            a.ln2.data(), a.mean2.data(), a.rstd2.data(), a.proj.data(), P + p.g2, P + p.b2, T, h, 1e-5f);
        k.gemm(false, false, T, 4 * h, h, a.ln2.data(), P + p.wfc, a.fc.data(), false);
        k.addBias(a.fc.data(), P + p.bfc, T, 4 * h);
        k.geluForward(a.gelu.data(), a.fc.data(), std::size_t(T) * 4 * h);
        k.gemm(false, false, T, h, 4 * h, a.gelu.data(), P + p.wout, a.out.data(), false);
        k.addBias(a.out.data(), P + p.bout, T, h);
        x = a.out.data();
    }
    k.layerNormForward(b.lnf.data(), b.meanf.data(), b.rstdf.data(), x, P + b.gf, P + b.bf, T, h, 1e-5f);
    k.gemm(false, true, T, m_shape.vocab, h, b.lnf.data(), P + b.wte, b.logits.data(), false); // tied head
}

void KernelStep::backward()
{
    auto& k = m_kernels;
    Buffers& b = *m_b;
    const int T = m_shape.rows(), h = m_shape.hidden, H = m_shape.heads, V = m_shape.vocab;
    const float* P = b.params.data();
    float* G = b.grads.data();
    const std::size_t th = std::size_t(T) * h;
    // logits = lnf·wteᵀ: d lnf = dlogits·wte, d wte += dlogitsᵀ·lnf
    k.gemm(false, false, T, h, V, b.logits.data(), P + b.wte, b.dLn.data(), false);
    k.gemm(true, false, V, h, T, b.logits.data(), b.lnf.data(), G + b.wte, true);
    const float* lastOut = b.acts.empty() ? b.x0.data() : b.acts.back().out.data();
    m_device.fillFloats(b.dA.data(), 0.0f, th);
    k.layerNormBackward(
        b.dA.data(), G + b.gf, G + b.bf, b.dLn.data(), lastOut, b.meanf.data(), b.rstdf.data(), P + b.gf, T, h);
    float* dOut = b.dA.data(); // d of the block's output; the block's input gradient goes to the other buffer
    float* dIn = b.dB.data();
    for (std::size_t l = b.blocks.size(); l-- > 0;) {
        const BlockParams& p = b.blocks[l];
        BlockActs& a = b.acts[l];
        const float* x = l == 0 ? b.x0.data() : b.acts[l - 1].out.data();
        float* d4 = b.d4h.data();
        k.gemm(false, true, T, 4 * h, h, dOut, P + p.wout, d4, false);
        k.gemm(true, false, 4 * h, h, T, a.gelu.data(), dOut, G + p.wout, true);
        k.biasBackward(G + p.bout, dOut, T, h);
        k.geluBackward(d4, d4, a.fc.data(), std::size_t(T) * 4 * h);
        k.gemm(false, true, T, h, 4 * h, d4, P + p.wfc, b.dLn.data(), false);
        k.gemm(true, false, h, 4 * h, T, a.ln2.data(), d4, G + p.wfc, true);
        k.biasBackward(G + p.bfc, d4, T, 4 * h);
        m_device.fillFloats(dIn, 0.0f, th); // d proj (layerNormBackward accumulates)
        k.layerNormBackward(
            dIn, G + p.g2, G + p.b2, b.dLn.data(), a.proj.data(), a.mean2.data(), a.rstd2.data(), P + p.g2, T, h);
        k.gemm(false, true, T, h, h, dIn, P + p.wproj, b.dLn.data(), false); // d att
        k.gemm(true, false, h, h, T, a.att.data(), dIn, G + p.wproj, true);
        k.biasBackward(G + p.bproj, dIn, T, h);
        k.attentionBackward(
            b.d3h.data(), b.dLn.data(), a.qkv.data(), a.probs.data(), m_shape.batch, m_shape.seq, H, h / H);
        k.gemm(false, true, T, h, 3 * h, b.d3h.data(), P + p.wqkv, b.dLn.data(), false); // d ln1
        k.gemm(true, false, h, 3 * h, T, a.ln1.data(), b.d3h.data(), G + p.wqkv, true);
        k.biasBackward(G + p.bqkv, b.d3h.data(), T, 3 * h);
        m_device.fillFloats(dIn, 0.0f, th); // d x (the block's input)
        k.layerNormBackward(dIn, G + p.g1, G + p.b1, b.dLn.data(), x, a.mean1.data(), a.rstd1.data(), P + p.g1, T, h);
        std::swap(dOut, dIn);
    }
}

} // namespace loom::device
