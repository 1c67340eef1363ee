// The general transformer block of GptStage: what a model profile asks for beyond GPT-2, each field on its
// own. `norm: rmsnorm` (RMSNorm, a gain and no beta), `mlp: swiglu` (gate and up projections of ffn_hidden,
// silu(gate)·up, down), `position: rope` (rotary positions on each head of Q and K, no position embedding),
// `kv_heads` (grouped-query attention: query head i reads KV head i / (heads/kv_heads)), `bias: false` (no
// biases, and no LayerNorm beta). Tensor parallelism as Megatron-LM: Q, K, V, gate and up column-parallel
// (rank j holds query heads [j·H/tp, (j+1)·H/tp) and KV heads [j·KV/tp, (j+1)·KV/tp), so tp divides
// kv_heads), attention-output and down row-parallel.
#include "engine/train/GptStage.h"

#include <algorithm>
#include <stdexcept>

namespace loom::train {

namespace {

// qkv [T, 3·H·d] for the attention kernel from q [T, H·d], k and v [T, KV·d]: each query head's K and V
// are its group's KV head (the kernel then runs as multi-head attention).
void packQkv(float* qkv, const float* q, const float* k, const float* v, int T, int H, int KV, int d)
{
    const int group = H / KV, hd = H * d, kvd = KV * d;
    for (int t = 0; t < T; ++t) {
        float* row = qkv + static_cast<std::size_t>(t) * 3 * hd;
        const float* qt = q + static_cast<std::size_t>(t) * hd;
        std::copy(qt, qt + hd, row);
        for (int i = 0; i < H; ++i) {
            const float* kt = k + static_cast<std::size_t>(t) * kvd + (i / group) * d;
            const float* vt = v + static_cast<std::size_t>(t) * kvd + (i / group) * d;
            std::copy(kt, kt + d, row + hd + i * d);
            std::copy(vt, vt + d, row + 2 * hd + i * d);
        }
    }
}

// The transpose of packQkv: dk and dv sum the gradients of the query heads that share each KV head.
void unpackQkv(float* dq, float* dk, float* dv, const float* dqkv, int T, int H, int KV, int d)
{
    const int group = H / KV, hd = H * d, kvd = KV * d;
    std::fill(dk, dk + static_cast<std::size_t>(T) * kvd, 0.0f);
    std::fill(dv, dv + static_cast<std::size_t>(T) * kvd, 0.0f);
    for (int t = 0; t < T; ++t) {
        const float* row = dqkv + static_cast<std::size_t>(t) * 3 * hd;
        std::copy(row, row + hd, dq + static_cast<std::size_t>(t) * hd);
        for (int i = 0; i < H; ++i) {
            float* kt = dk + static_cast<std::size_t>(t) * kvd + (i / group) * d;
            float* vt = dv + static_cast<std::size_t>(t) * kvd + (i / group) * d;
            for (int c = 0; c < d; ++c) {
                kt[c] += row[hd + i * d + c];
                vt[c] += row[2 * hd + i * d + c];
            }
        }
    }
}

} // namespace

void GptStage::addLlamaBlock(std::int64_t l, float stddev, float projStddev, const Group& expert)
{
    const std::string p = "h" + std::to_string(l) + ".";
    const bool bias = m_model.bias, layerNorm = m_model.norm == plan::ModelSpec::Norm::LayerNorm;
    const std::int64_t kv = m_kvHeads * (m_h / m_heads);
    auto columns = [&](const std::string& name, std::int64_t cols, int& w, int& b) {
        w = m_params.add(p + name + ".w", m_h, cols, Shard::Columns, Init::Normal, stddev, true);
        if (bias)
            b = m_params.add(p + name + ".b", 1, cols, Shard::Columns, Init::Zeros, 0, false);
    };
    auto rows = [&](const std::string& name, std::int64_t rowCount, int& w, int& b) {
        w = m_params.add(p + name + ".w", rowCount, m_h, Shard::Rows, Init::Normal, projStddev, true);
        if (bias)
            b = m_params.add(p + name + ".b", 1, m_h, Shard::Replicated, Init::Zeros, 0, false);
    };
    auto norm = [&](const std::string& name, int& g, int& b) {
        g = m_params.add(p + name + ".g", 1, m_h, Shard::Replicated, Init::Ones, 0, false);
        if (layerNorm && bias)
            b = m_params.add(p + name + ".b", 1, m_h, Shard::Replicated, Init::Zeros, 0, false);
    };
    LlamaParams q;
    norm("ln1", q.ln1g, q.ln1b);
    columns("q", m_h, q.wq, q.bq);
    columns("k", kv, q.wk, q.bk);
    columns("v", kv, q.wv, q.bv);
    rows("proj", m_h, q.wo, q.bo);
    norm("ln2", q.ln2g, q.ln2b);
    if (m_model.moeLayer(l)) { // MoeLayer.h: experts of the model's MLP, whole on every TP rank
        m_moe[l] = std::make_unique<MoeLayer>(
            m_model, p, m_params, expert.rank, expert.size, expert.comm, m_k, stddev, projStddev);
    } else if (m_model.mlp == plan::ModelSpec::Mlp::SwiGlu) {
        columns("gate", m_ffn, q.wgate, q.bgate);
        columns("up", m_ffn, q.wup, q.bup);
        rows("down", m_ffn, q.wdown, q.bdown);
    } else {
        columns("fc", m_ffn, q.wup, q.bup);
        rows("fcproj", m_ffn, q.wdown, q.bdown);
    }
    m_llamaBlock[l] = q;
}

void GptStage::normForward(int gamma, int beta, float* out, float* mean, float* rstd, const float* in, int rows)
{
    const int h = static_cast<int>(m_h);
    if (m_model.norm == plan::ModelSpec::Norm::RmsNorm)
        m_k.rmsNormForward(out, rstd, in, m_params.value(gamma), rows, h, m_eps);
    else
        m_k.layerNormForward(out, mean, rstd, in, m_params.value(gamma),
            beta >= 0 ? m_params.value(beta) : m_zeros.data(), rows, h, m_eps);
}

void GptStage::normBackward(int gamma, int beta, float* dIn, const float* dOut, const float* in, const float* out,
    const float* mean, const float* rstd, int rows)
{
    const int h = static_cast<int>(m_h);
    std::vector<float> recovered;
    if (m_efficientNorm) {
        const float* g = m_params.value(gamma);
        if (const auto zero = std::find(g, g + h, 0.0f); zero != g + h)
            throw std::runtime_error("memory.efficient_norm: norm gain " + m_params.spec(gamma).name + " has a zero at "
                + std::to_string(zero - g) + ", so the norm's input cannot be recovered from its output; "
                + "train without memory.efficient_norm");
        const bool layerNorm = m_model.norm != plan::ModelSpec::Norm::RmsNorm;
        recovered.resize(static_cast<std::size_t>(rows) * static_cast<std::size_t>(h));
        m_k.normInputFromOutput(recovered.data(), out, layerNorm ? mean : nullptr, rstd, g,
            beta >= 0 ? m_params.value(beta) : nullptr, rows, h);
        in = recovered.data();
    }
    if (m_model.norm == plan::ModelSpec::Norm::RmsNorm)
        m_k.rmsNormBackward(dIn, m_params.grad(gamma), dOut, in, rstd, m_params.value(gamma), rows, h);
    else
        m_k.layerNormBackward(dIn, m_params.grad(gamma), beta >= 0 ? m_params.grad(beta) : m_scratch.data(), dOut, in,
            mean, rstd, m_params.value(gamma), rows, h);
}

std::vector<std::int32_t> GptStage::tokenPositions(int B) const
{
    std::vector<std::int32_t> positions(static_cast<std::size_t>(B * m_seq));
    for (std::size_t i = 0; i < positions.size(); ++i)
        positions[i] = static_cast<std::int32_t>(positionOf(static_cast<int>(static_cast<std::int64_t>(i) % m_seq)));
    return positions;
}

namespace {

// out [T, N] = in [T, K] · W (+ b)
void project(Kernels& k, ParamSet& params, const float* in, int w, int b, float* out, int T, int K, int N)
{
    k.gemm(false, false, T, N, K, in, params.value(w), out, false);
    if (b >= 0)
        k.addBias(out, params.value(b), T, N);
}

// The weight and bias gradients of project(), and dIn (+)= dOut · Wᵀ.
// The weight's product goes through `q` (deferred to W in zero-bubble schedules).
void projectBackward(Kernels& k, WeightGradQueue& q, ParamSet& params, const float* in, const float* dOut, int w, int b,
    float* dIn, int T, int K, int N, bool accumulate)
{
    if (b >= 0)
        k.biasBackward(params.grad(b), dOut, T, N);
    q.add(k, params.grad(w), w, K, N, T, in, dOut);
    k.gemm(false, true, T, K, N, dOut, params.value(w), dIn, accumulate);
}

} // namespace

void GptStage::llamaBlockForward(std::int64_t layer, BlockCache& c, int B, const float* in, float* out)
{
    const LlamaParams& p = m_llamaBlock.at(layer);
    const auto [s, T, h, Tl, d, Hl, KVl, hl, kvl, fl, n, nl] = blockDims(B);
    std::vector<float> full;
    c.x.assign(in, in + nl * h);
    c.ln1.resize(nl * h);
    c.ln1Mean.resize(nl);
    c.ln1Rstd.resize(nl);
    normForward(p.ln1g, p.ln1b, c.ln1.data(), c.ln1Mean.data(), c.ln1Rstd.data(), in, Tl);
    const float* ln1 = gatherTokens(c.ln1.data(), full, B);
    std::vector<float> q(n * hl), k(n * kvl), v(n * kvl);
    project(m_k, m_params, ln1, p.wq, p.bq, q.data(), T, h, hl);
    project(m_k, m_params, ln1, p.wk, p.bk, k.data(), T, h, kvl);
    project(m_k, m_params, ln1, p.wv, p.bv, v.data(), T, h, kvl);
    if (m_model.position == plan::ModelSpec::Position::Rope) {
        const auto positions = tokenPositions(B);
        m_k.ropeForward(q.data(), positions.data(), T, Hl, d, m_ropeFreq.data());
        m_k.ropeForward(k.data(), positions.data(), T, KVl, d, m_ropeFreq.data());
    }
    c.qkv.resize(n * 3 * hl);
    packQkv(c.qkv.data(), q.data(), k.data(), v.data(), T, Hl, KVl, d);
    c.probs.resize(static_cast<std::size_t>(B) * Hl * s * s);
    c.att.resize(n * hl);
    attentionForward(c, B, Hl, d);
    c.x2.resize(nl * h);
    float* proj = m_sp ? full.data() : c.x2.data();
    m_k.gemm(false, false, T, h, hl, c.att.data(), m_params.value(p.wo), proj, false);
    reduceTokens(proj, c.x2.data(), B);
    if (p.bo >= 0)
        m_k.addBias(c.x2.data(), m_params.value(p.bo), Tl, h);
    for (std::size_t i = 0; i < nl * h; ++i)
        c.x2[i] += in[i];
    c.ln2.resize(nl * h);
    c.ln2Mean.resize(nl);
    c.ln2Rstd.resize(nl);
    normForward(p.ln2g, p.ln2b, c.ln2.data(), c.ln2Mean.data(), c.ln2Rstd.data(), c.x2.data(), Tl);
    if (auto moe = m_moe.find(layer); moe != m_moe.end()) { // no sequence parallelism with MoE (the constructor)
        m_aux += moe->second->forward(c.moe, c.ln2.data(), Tl, out);
        for (std::size_t i = 0; i < nl * h; ++i)
            out[i] += c.x2[i];
        return;
    }
    const float* ln2 = gatherTokens(c.ln2.data(), full, B);
    c.fc.resize(n * fl);
    c.act.resize(n * fl);
    if (p.wgate >= 0) { // SwiGLU: fc holds the gate, up the up projection
        c.up.resize(n * fl);
        project(m_k, m_params, ln2, p.wgate, p.bgate, c.fc.data(), T, h, fl);
        project(m_k, m_params, ln2, p.wup, p.bup, c.up.data(), T, h, fl);
        m_k.swigluForward(c.act.data(), c.fc.data(), c.up.data(), n * fl);
    } else {
        project(m_k, m_params, ln2, p.wup, p.bup, c.fc.data(), T, h, fl);
        m_k.geluForward(c.act.data(), c.fc.data(), n * fl);
    }
    float* mlpOut = m_sp ? full.data() : out;
    m_k.gemm(false, false, T, h, fl, c.act.data(), m_params.value(p.wdown), mlpOut, false);
    reduceTokens(mlpOut, out, B);
    if (p.bdown >= 0)
        m_k.addBias(out, m_params.value(p.bdown), Tl, h);
    for (std::size_t i = 0; i < nl * h; ++i)
        out[i] += c.x2[i];
}

void GptStage::llamaBlockBackward(std::int64_t layer, BlockCache& c, int B, const float* dOut, float* dIn)
{
    const LlamaParams& p = m_llamaBlock.at(layer);
    const auto [s, T, h, Tl, d, Hl, KVl, hl, kvl, fl, n, nl] = blockDims(B);
    std::vector<float> full, dLocal(m_sp ? nl * h : 0);
    // MLP: out = x2 + down(act(ln2(x2)))
    std::vector<float> dAct(n * fl), dLn2(n * h), dX2(dOut, dOut + nl * h);
    if (auto moe = m_moe.find(layer); moe != m_moe.end()) {
        moe->second->backward(c.moe, dOut, dLn2.data(), m_lossScale);
        llamaAttentionBackward(p, c, B, dX2, dLn2, dIn);
        return;
    }
    if (p.bdown >= 0)
        m_k.biasBackward(m_params.grad(p.bdown), dOut, Tl, h);
    const float* dOutAll = gatherTokens(dOut, full, B);
    m_wgrad.add(m_k, m_params.grad(p.wdown), p.wdown, fl, h, T, c.act.data(), dOutAll);
    m_k.gemm(false, true, T, fl, h, dOutAll, m_params.value(p.wdown), dAct.data(), false);
    const float* ln2 = gatherTokens(c.ln2.data(), full, B);
    if (p.wgate >= 0) {
        std::vector<float> dGate(n * fl), dUp(n * fl);
        m_k.swigluBackward(dGate.data(), dUp.data(), dAct.data(), c.fc.data(), c.up.data(), n * fl);
        projectBackward(m_k, m_wgrad, m_params, ln2, dGate.data(), p.wgate, p.bgate, dLn2.data(), T, h, fl, false);
        projectBackward(m_k, m_wgrad, m_params, ln2, dUp.data(), p.wup, p.bup, dLn2.data(), T, h, fl, true);
    } else {
        std::vector<float> dFc(n * fl);
        m_k.geluBackward(dFc.data(), dAct.data(), c.fc.data(), n * fl);
        projectBackward(m_k, m_wgrad, m_params, ln2, dFc.data(), p.wup, p.bup, dLn2.data(), T, h, fl, false);
    }
    float* dLn2Local = m_sp ? dLocal.data() : dLn2.data();
    reduceTokens(dLn2.data(), dLn2Local, B);
    if (m_sp)
        std::copy(dLocal.begin(), dLocal.end(), dLn2.begin());
    llamaAttentionBackward(p, c, B, dX2, dLn2, dIn);
}

void GptStage::llamaAttentionBackward(
    const LlamaParams& p, BlockCache& c, int B, std::vector<float>& dX2, const std::vector<float>& dLn2, float* dIn)
{
    const auto [s, T, h, Tl, d, Hl, KVl, hl, kvl, fl, n, nl] = blockDims(B);
    std::vector<float> full, dLocal(m_sp ? nl * h : 0);
    normBackward(
        p.ln2g, p.ln2b, dX2.data(), dLn2.data(), c.x2.data(), c.ln2.data(), c.ln2Mean.data(), c.ln2Rstd.data(), Tl);
    // Attention: x2 = x + attn(ln1(x))·Wo
    if (p.bo >= 0)
        m_k.biasBackward(m_params.grad(p.bo), dX2.data(), Tl, h);
    const float* dX2All = gatherTokens(dX2.data(), full, B);
    std::vector<float> dAtt(n * hl), dQkv(n * 3 * hl);
    m_wgrad.add(m_k, m_params.grad(p.wo), p.wo, hl, h, T, c.att.data(), dX2All);
    m_k.gemm(false, true, T, hl, h, dX2All, m_params.value(p.wo), dAtt.data(), false);
    attentionBackward(c, dQkv.data(), dAtt.data(), B, Hl, d);
    std::vector<float> dq(n * hl), dk(n * kvl), dv(n * kvl), dLn1(n * h);
    unpackQkv(dq.data(), dk.data(), dv.data(), dQkv.data(), T, Hl, KVl, d);
    if (m_model.position == plan::ModelSpec::Position::Rope) {
        const auto positions = tokenPositions(B);
        m_k.ropeBackward(dq.data(), positions.data(), T, Hl, d, m_ropeFreq.data());
        m_k.ropeBackward(dk.data(), positions.data(), T, KVl, d, m_ropeFreq.data());
    }
    const float* ln1 = gatherTokens(c.ln1.data(), full, B);
    projectBackward(m_k, m_wgrad, m_params, ln1, dq.data(), p.wq, p.bq, dLn1.data(), T, h, hl, false);
    projectBackward(m_k, m_wgrad, m_params, ln1, dk.data(), p.wk, p.bk, dLn1.data(), T, h, kvl, true);
    projectBackward(m_k, m_wgrad, m_params, ln1, dv.data(), p.wv, p.bv, dLn1.data(), T, h, kvl, true);
    float* dLn1Local = m_sp ? dLocal.data() : dLn1.data();
    reduceTokens(dLn1.data(), dLn1Local, B);
    std::copy(dX2.begin(), dX2.end(), dIn);
    normBackward(p.ln1g, p.ln1b, dIn, dLn1Local, c.x.data(), c.ln1.data(), c.ln1Mean.data(), c.ln1Rstd.data(), Tl);
}

} // namespace loom::train
