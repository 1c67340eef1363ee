#include "engine/train/MoeLayer.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace loom::train {

MoeLayer::MoeLayer(const plan::ModelSpec& model, const std::string& prefix, ParamSet& params, int epRank, int epSize,
    comm::Communicator* ep, Kernels& kernels, float stddev, float projStddev)
    : m_h(model.hidden)
    , m_E(model.experts)
    , m_k(model.effectiveTopK())
    , m_f(model.expertFfn())
    , m_local(model.experts / std::max(epSize, 1))
    , m_sharedF(model.sharedExperts > 0 ? model.sharedExperts * model.sharedExpertFfn() : 0)
    , m_swiglu(model.mlp == plan::ModelSpec::Mlp::SwiGlu)
    , m_bias(model.bias)
    , m_normTopK(model.routerNormTopK)
    , m_auxCoeff(model.auxLossCoeff)
    , m_zCoeff(model.routerZLoss)
    , m_epRank(epRank)
    , m_epSize(epSize)
    , m_ep(ep)
    , m_kern(kernels)
    , m_params(params)
{
    if (m_E < 2 || m_k < 1 || m_k > m_E || epSize < 1 || m_E % epSize != 0)
        throw std::invalid_argument("MoE layer " + prefix + ": " + std::to_string(m_E) + " experts, top_k "
            + std::to_string(m_k) + " and ep " + std::to_string(epSize) + " do not fit (ep must divide experts)");
    if (projStddev <= 0) // GPT-2's residual scaling, as the dense MLP
        projStddev = stddev / std::sqrt(2.0f * static_cast<float>(model.layers));
    // Experts first (highest index first), the router last: backward finishes the experts before the router.
    for (std::int64_t j = m_local - 1; j >= 0; --j) {
        const Expert x
            = addMlp(prefix + "expert" + std::to_string(m_epRank * m_local + j) + ".", m_f, stddev, projStddev);
        m_experts.push_back(x);
        for (int i : { x.gatew, x.gateb, x.upw, x.upb, x.downw, x.downb })
            if (i >= 0) {
                m_expertParams.push_back(i);
                params.setExpert(i);
            }
    }
    std::reverse(m_experts.begin(), m_experts.end()); // m_experts[j] is local expert j
    if (m_sharedF > 0) // on every EP member: reduced over the whole DP group like the attention
        m_shared = addMlp(prefix + "shared.", m_sharedF, stddev, projStddev);
    m_router = params.add(prefix + "router.w", m_h, m_E, Shard::Replicated, Init::Normal, stddev, true);
}

MoeLayer::Expert MoeLayer::addMlp(const std::string& e, std::int64_t ffn, float stddev, float projStddev)
{
    Expert x;
    auto add = [&](const std::string& name, std::int64_t rows, std::int64_t cols, float sd, int& w, int& b) {
        w = m_params.add(e + name + ".w", rows, cols, Shard::Replicated, Init::Normal, sd, true);
        if (m_bias)
            b = m_params.add(e + name + ".b", 1, cols, Shard::Replicated, Init::Zeros, 0, false);
    };
    if (m_swiglu) {
        add("gate", m_h, ffn, stddev, x.gatew, x.gateb);
        add("up", m_h, ffn, stddev, x.upw, x.upb);
        add("down", ffn, m_h, projStddev, x.downw, x.downb);
    } else {
        add("fc", m_h, ffn, stddev, x.upw, x.upb);
        add("proj", ffn, m_h, projStddev, x.downw, x.downb);
    }
    return x;
}

std::vector<int> MoeLayer::params() const
{
    std::vector<int> out = m_expertParams;
    for (int i : { m_shared.gatew, m_shared.gateb, m_shared.upw, m_shared.upb, m_shared.downw, m_shared.downb })
        if (i >= 0)
            out.push_back(i);
    out.push_back(m_router);
    return out;
}

void MoeLayer::mlpForward(const Expert& p, const float* in, int R, int F, std::vector<float>& fc,
    std::vector<float>& up, std::vector<float>& act, float* y)
{
    const int H = static_cast<int>(m_h);
    const std::size_t n = static_cast<std::size_t>(R) * static_cast<std::size_t>(F);
    fc.resize(n);
    act.resize(n);
    auto project = [&](int w, int b, const float* x, float* out, int rows, int K, int N) {
        m_kern.gemm(false, false, rows, N, K, x, m_params.value(w), out, false);
        if (b >= 0)
            m_kern.addBias(out, m_params.value(b), rows, N);
    };
    if (m_swiglu) {
        up.resize(n);
        project(p.gatew, p.gateb, in, fc.data(), R, H, F);
        project(p.upw, p.upb, in, up.data(), R, H, F);
        m_kern.swigluForward(act.data(), fc.data(), up.data(), n);
    } else {
        project(p.upw, p.upb, in, fc.data(), R, H, F);
        m_kern.geluForward(act.data(), fc.data(), n);
    }
    project(p.downw, p.downb, act.data(), y, R, F, H);
}

void MoeLayer::weightGradient(int tensor, int K, int N, int T, const float* X, const float* dY)
{
    if (m_wgrad)
        m_wgrad->add(m_kern, m_params.grad(tensor), tensor, K, N, T, X, dY);
    else
        m_kern.gemm(true, false, K, N, T, X, dY, m_params.grad(tensor), true);
}

void MoeLayer::mlpBackward(const Expert& p, const float* in, int R, int F, const std::vector<float>& fc,
    const std::vector<float>& up, const std::vector<float>& act, const float* dY, float* dIn)
{
    const int H = static_cast<int>(m_h);
    const std::size_t n = fc.size();
    std::vector<float> dAct(n), dA(n), dB(m_swiglu ? n : 0);
    if (p.downb >= 0)
        m_kern.biasBackward(m_params.grad(p.downb), dY, R, H);
    weightGradient(p.downw, F, H, R, act.data(), dY);
    m_kern.gemm(false, true, R, F, H, dY, m_params.value(p.downw), dAct.data(), false);
    auto back = [&](int w, int b, const float* d, bool accumulate) {
        if (b >= 0)
            m_kern.biasBackward(m_params.grad(b), d, R, F);
        weightGradient(w, H, F, R, in, d);
        m_kern.gemm(false, true, R, H, F, d, m_params.value(w), dIn, accumulate);
    };
    if (m_swiglu) {
        m_kern.swigluBackward(dA.data(), dB.data(), dAct.data(), fc.data(), up.data(), n);
        back(p.gatew, p.gateb, dA.data(), false);
        back(p.upw, p.upb, dB.data(), true);
    } else {
        m_kern.geluBackward(dA.data(), dAct.data(), fc.data(), n);
        back(p.upw, p.upb, dA.data(), false);
    }
}

void MoeLayer::route(MoeCache& c, int T)
{
    const auto E = static_cast<std::size_t>(m_E), k = static_cast<std::size_t>(m_k);
    const auto n = static_cast<std::size_t>(T);
    c.probs.assign(n * E, 0.0f);
    if (T > 0)
        m_kern.gemm(false, false, T, static_cast<int>(E), static_cast<int>(m_h), c.x.data(), m_params.value(m_router),
            c.probs.data(), false);
    c.expert.assign(n * k, 0);
    c.gate.assign(n * k, 0.0f);
    c.logZ.assign(n, 0.0f);
    std::vector<std::int64_t> count(E, 0);
    for (std::size_t t = 0; t < n; ++t) {
        float* p = c.probs.data() + t * E;
        const float top = *std::max_element(p, p + E);
        float sum = 0;
        for (std::size_t e = 0; e < E; ++e)
            sum += (p[e] = std::exp(p[e] - top));
        for (std::size_t e = 0; e < E; ++e)
            p[e] /= sum;
        c.logZ[t] = top + std::log(sum);
        // Top-k by probability; a strict comparison keeps the lower index on ties.
        std::vector<bool> taken(E, false);
        for (std::size_t j = 0; j < k; ++j) {
            std::size_t best = E;
            for (std::size_t e = 0; e < E; ++e)
                if (!taken[e] && (best == E || p[e] > p[best]))
                    best = e;
            taken[best] = true;
            c.expert[t * k + j] = static_cast<int>(best);
            c.gate[t * k + j] = p[best];
            ++count[best];
        }
        if (m_normTopK) { // Mixtral: the chosen probabilities renormalised to sum to 1
            float chosen = 0;
            for (std::size_t j = 0; j < k; ++j)
                chosen += c.gate[t * k + j];
            for (std::size_t j = 0; j < k; ++j)
                c.gate[t * k + j] /= chosen;
        }
    }
    // Dispatch order: by expert (so by the member that holds it), then by token.
    std::vector<std::int64_t> next(E, 0);
    for (std::size_t e = 1; e < E; ++e)
        next[e] = next[e - 1] + count[e - 1];
    c.row.assign(n * k, 0);
    for (std::size_t a = 0; a < n * k; ++a)
        c.row[a] = static_cast<int>(next[static_cast<std::size_t>(c.expert[a])]++);
    c.fraction.assign(E, 0.0f);
    for (std::size_t e = 0; e < E; ++e)
        c.fraction[e] = n ? static_cast<float>(double(count[e]) / double(n * k)) : 0.0f;
    // What each member sends to and receives from each other member, per expert.
    const auto ep = static_cast<std::size_t>(m_epSize), local = static_cast<std::size_t>(m_local);
    const auto h = static_cast<std::size_t>(m_h);
    c.sendCounts.assign(ep, 0);
    for (std::size_t e = 0; e < E; ++e)
        c.sendCounts[e / local] += static_cast<std::size_t>(count[e]) * h;
    c.recvPerExpert.assign(ep * local, 0);
    if (ep == 1)
        c.recvPerExpert.assign(count.begin(), count.end());
    else
        m_ep->allToAll(count.data(), c.recvPerExpert.data(), local, comm::DType::I64)->wait();
    c.recvCounts.assign(ep, 0);
    for (std::size_t i = 0; i < ep; ++i)
        for (std::size_t j = 0; j < local; ++j)
            c.recvCounts[i] += static_cast<std::size_t>(c.recvPerExpert[i * local + j]) * h;
}

std::vector<float> MoeLayer::exchange(
    const std::vector<float>& rows, const std::vector<std::size_t>& outCounts, const std::vector<std::size_t>& inCounts)
{
    if (m_epSize == 1)
        return rows;
    std::size_t total = 0;
    for (auto n : inCounts)
        total += n;
    std::vector<float> in(std::max<std::size_t>(total, 1));
    m_ep->allToAllV(rows.data(), outCounts, in.data(), inCounts, comm::DType::F32)->wait();
    in.resize(total);
    return in;
}

std::vector<std::pair<std::size_t, std::size_t>> MoeLayer::segments(const MoeCache& c, int j) const
{
    // The received buffer is member-major; inside each member's block, local experts in order.
    std::vector<std::pair<std::size_t, std::size_t>> out; // (first row, rows)
    const auto local = static_cast<std::size_t>(m_local);
    std::size_t base = 0;
    for (std::size_t i = 0; i < static_cast<std::size_t>(m_epSize); ++i) {
        std::size_t at = base;
        for (std::size_t e = 0; e < static_cast<std::size_t>(j); ++e)
            at += static_cast<std::size_t>(c.recvPerExpert[i * local + e]);
        out.emplace_back(at, static_cast<std::size_t>(c.recvPerExpert[i * local + static_cast<std::size_t>(j)]));
        for (std::size_t e = 0; e < local; ++e)
            base += static_cast<std::size_t>(c.recvPerExpert[i * local + e]);
    }
    return out;
}

double MoeLayer::forward(MoeCache& c, const float* x, int T, float* out)
{
    const auto h = static_cast<std::size_t>(m_h), k = static_cast<std::size_t>(m_k), n = static_cast<std::size_t>(T);
    const int F = static_cast<int>(m_f);
    c.x.assign(x, x + n * h);
    route(c, T);
    std::vector<float> send(n * k * h);
    for (std::size_t a = 0; a < n * k; ++a)
        std::copy(x + a / k * h, x + (a / k + 1) * h, send.data() + static_cast<std::size_t>(c.row[a]) * h);
    const std::vector<float> recv = exchange(send, c.sendCounts, c.recvCounts);
    std::vector<float> back(recv.size());
    c.in.assign(static_cast<std::size_t>(m_local), {});
    c.fc.assign(c.in.size(), {});
    c.up.assign(c.in.size(), {});
    c.act.assign(c.in.size(), {});
    for (int j = 0; j < static_cast<int>(m_local); ++j) {
        const Expert& p = m_experts[static_cast<std::size_t>(j)];
        const auto segs = segments(c, j);
        auto& in = c.in[static_cast<std::size_t>(j)];
        for (auto [first, rows] : segs)
            in.insert(in.end(), recv.begin() + static_cast<std::ptrdiff_t>(first * h),
                recv.begin() + static_cast<std::ptrdiff_t>((first + rows) * h));
        const int R = static_cast<int>(in.size() / h);
        if (R == 0)
            continue;
        std::vector<float> y(static_cast<std::size_t>(R) * h);
        const auto js = static_cast<std::size_t>(j);
        mlpForward(p, in.data(), R, F, c.fc[js], c.up[js], c.act[js], y.data());
        std::size_t r = 0;
        for (auto [first, rows] : segs) {
            std::copy(y.begin() + static_cast<std::ptrdiff_t>(r * h),
                y.begin() + static_cast<std::ptrdiff_t>((r + rows) * h),
                back.begin() + static_cast<std::ptrdiff_t>(first * h));
            r += rows;
        }
    }
    c.returned = exchange(back, c.recvCounts, c.sendCounts);
    std::fill(out, out + n * h, 0.0f);
    for (std::size_t a = 0; a < n * k; ++a) {
        const float* y = c.returned.data() + static_cast<std::size_t>(c.row[a]) * h;
        float* o = out + a / k * h;
        for (std::size_t i = 0; i < h; ++i)
            o[i] += c.gate[a] * y[i];
    }
    if (m_sharedF > 0 && n > 0) {
        std::vector<float> y(n * h);
        mlpForward(m_shared, x, T, static_cast<int>(m_sharedF), c.sharedFc, c.sharedUp, c.sharedAct, y.data());
        for (std::size_t i = 0; i < n * h; ++i)
            out[i] += y[i];
    }
    double aux = 0, z = 0;
    for (std::size_t e = 0; e < static_cast<std::size_t>(m_E); ++e) {
        double P = 0;
        for (std::size_t t = 0; t < n; ++t)
            P += c.probs[t * static_cast<std::size_t>(m_E) + e];
        aux += double(c.fraction[e]) * (n ? P / double(n) : 0.0);
    }
    for (std::size_t t = 0; t < n; ++t)
        z += double(c.logZ[t]) * c.logZ[t];
    return m_auxCoeff * double(m_E) * aux + (n ? m_zCoeff * z / double(n) : 0.0);
}

void MoeLayer::backward(MoeCache& c, const float* dOut, float* dx, float lossScale)
{
    const float auxScale = lossScale * static_cast<float>(m_auxCoeff);
    const auto h = static_cast<std::size_t>(m_h), k = static_cast<std::size_t>(m_k), E = static_cast<std::size_t>(m_E);
    const std::size_t n = c.x.size() / h;
    const int H = static_cast<int>(m_h), F = static_cast<int>(m_f), T = static_cast<int>(n);
    // Combine's backward: each choice's row gets gate·dOut; the gate gets dOut·expert output.
    std::vector<float> dRows(n * k * h), dGate(n * k);
    for (std::size_t a = 0; a < n * k; ++a) {
        const float* g = dOut + a / k * h;
        const float* y = c.returned.data() + static_cast<std::size_t>(c.row[a]) * h;
        float* d = dRows.data() + static_cast<std::size_t>(c.row[a]) * h;
        double dot = 0;
        for (std::size_t i = 0; i < h; ++i) {
            d[i] = c.gate[a] * g[i];
            dot += double(g[i]) * y[i];
        }
        dGate[a] = static_cast<float>(dot);
    }
    const std::vector<float> dRecv = exchange(dRows, c.sendCounts, c.recvCounts);
    std::vector<float> dBack(dRecv.size());
    for (int j = 0; j < static_cast<int>(m_local); ++j) {
        const Expert& p = m_experts[static_cast<std::size_t>(j)];
        const auto segs = segments(c, j);
        std::vector<float> dY;
        for (auto [first, rows] : segs)
            dY.insert(dY.end(), dRecv.begin() + static_cast<std::ptrdiff_t>(first * h),
                dRecv.begin() + static_cast<std::ptrdiff_t>((first + rows) * h));
        const int R = static_cast<int>(dY.size() / h);
        if (R == 0)
            continue;
        const auto js = static_cast<std::size_t>(j);
        std::vector<float> dIn(static_cast<std::size_t>(R) * h);
        mlpBackward(p, c.in[js].data(), R, F, c.fc[js], c.up[js], c.act[js], dY.data(), dIn.data());
        std::size_t r = 0;
        for (auto [first, rows] : segs) {
            std::copy(dIn.begin() + static_cast<std::ptrdiff_t>(r * h),
                dIn.begin() + static_cast<std::ptrdiff_t>((r + rows) * h),
                dBack.begin() + static_cast<std::ptrdiff_t>(first * h));
            r += rows;
        }
    }
    const std::vector<float> dSent = exchange(dBack, c.recvCounts, c.sendCounts);
    std::fill(dx, dx + n * h, 0.0f);
    for (std::size_t a = 0; a < n * k; ++a) {
        const float* d = dSent.data() + static_cast<std::size_t>(c.row[a]) * h;
        float* o = dx + a / k * h;
        for (std::size_t i = 0; i < h; ++i)
            o[i] += d[i];
    }
    if (m_sharedF > 0 && n > 0) {
        std::vector<float> dShared(n * h);
        mlpBackward(m_shared, c.x.data(), T, static_cast<int>(m_sharedF), c.sharedFc, c.sharedUp, c.sharedAct, dOut,
            dShared.data());
        for (std::size_t i = 0; i < n * h; ++i)
            dx[i] += dShared[i];
    }
    // Router: d/dp from the gates and from the load-balancing loss (E·f_e/T per token), then the softmax.
    std::vector<float> dLogits(n * E);
    for (std::size_t t = 0; t < n; ++t) {
        const float* p = c.probs.data() + t * E;
        float* d = dLogits.data() + t * E;
        for (std::size_t e = 0; e < E; ++e)
            d[e] = auxScale * static_cast<float>(m_E) * c.fraction[e] / static_cast<float>(n);
        // Renormalised gates g_j = p_j/S: dp_j = (dg_j − Σ_i dg_i·g_i)/S over the chosen j.
        float chosen = 1, mixed = 0;
        if (m_normTopK) {
            chosen = 0;
            for (std::size_t j = 0; j < k; ++j) {
                chosen += p[static_cast<std::size_t>(c.expert[t * k + j])];
                mixed += dGate[t * k + j] * c.gate[t * k + j];
            }
        }
        for (std::size_t j = 0; j < k; ++j)
            d[static_cast<std::size_t>(c.expert[t * k + j])] += (dGate[t * k + j] - mixed) / chosen;
        double dot = 0;
        for (std::size_t e = 0; e < E; ++e)
            dot += double(p[e]) * d[e];
        // z-loss: d/dlogit_e of coeff·mean(logZ²) is coeff·2·logZ·p_e/T.
        const float z = lossScale * static_cast<float>(2 * m_zCoeff) * c.logZ[t] / static_cast<float>(n);
        for (std::size_t e = 0; e < E; ++e)
            d[e] = p[e] * (d[e] - static_cast<float>(dot)) + z * p[e];
    }
    if (n == 0)
        return;
    weightGradient(m_router, H, static_cast<int>(E), T, c.x.data(), dLogits.data());
    m_kern.gemm(false, true, T, H, static_cast<int>(E), dLogits.data(), m_params.value(m_router), dx, true);
}

} // namespace loom::train
