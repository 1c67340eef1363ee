#include "tests/bench/ReferenceGpt2.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>

namespace loom::bench {

namespace {

// fn(begin, end) over `threads` equal parts of [0, n).
template <typename Fn> void split(int n, int threads, Fn&& fn)
{
    const int parts = std::clamp(threads, 1, std::max(n, 1));
    const int per = (n + parts - 1) / parts;
    std::vector<std::thread> workers;
    for (int t = 1; t < parts; ++t)
        workers.emplace_back([&fn, t, per, n] { fn(std::min(n, t * per), std::min(n, (t + 1) * per)); });
    fn(0, std::min(n, per));
    for (auto& w : workers)
        w.join();
}

void encoderForward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe, int n, int t, int c)
{
    for (int i = 0; i < n; ++i)
        for (int k = 0; k < c; ++k)
            out[i * c + k] = wte[std::size_t(tokens[i]) * c + k] + wpe[(i % t) * c + k];
}

void encoderBackward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens, int n, int t, int c)
{
    for (int i = 0; i < n; ++i)
        for (int k = 0; k < c; ++k) {
            dwte[std::size_t(tokens[i]) * c + k] += dout[i * c + k];
            dwpe[(i % t) * c + k] += dout[i * c + k];
        }
}

void layernormForward(
    float* out, float* mean, float* rstd, const float* in, const float* w, const float* b, int n, int c)
{
    for (int i = 0; i < n; ++i) {
        const float* x = in + i * c;
        float m = 0;
        for (int k = 0; k < c; ++k)
            m += x[k];
        m /= float(c);
        float var = 0;
        for (int k = 0; k < c; ++k)
            var += (x[k] - m) * (x[k] - m);
        const float s = 1.0f / std::sqrt(var / float(c) + 1e-5f);
        for (int k = 0; k < c; ++k)
            out[i * c + k] = (x[k] - m) * s * w[k] + b[k];
        mean[i] = m;
        rstd[i] = s;
    }
}

void layernormBackward(float* din, float* dw, float* db, const float* dout, const float* in, const float* w,
    const float* mean, const float* rstd, int n, int c)
{
    for (int i = 0; i < n; ++i) {
        const float* x = in + i * c;
        const float* dy = dout + i * c;
        float dnorm = 0, dnormNorm = 0;
        for (int k = 0; k < c; ++k) {
            const float norm = (x[k] - mean[i]) * rstd[i];
            dnorm += w[k] * dy[k];
            dnormNorm += w[k] * dy[k] * norm;
        }
        dnorm /= float(c);
        dnormNorm /= float(c);
        for (int k = 0; k < c; ++k) {
            const float norm = (x[k] - mean[i]) * rstd[i];
            db[k] += dy[k];
            dw[k] += norm * dy[k];
            din[i * c + k] += (w[k] * dy[k] - dnorm - norm * dnormNorm) * rstd[i];
        }
    }
}

// out (n, oc) = in (n, c) · w (oc, c)ᵀ + bias
void matmulForward(float* out, const float* in, const float* w, const float* bias, int n, int c, int oc, int threads)
{
    split(n, threads, [&](int b, int e) {
        for (int i = b; i < e; ++i)
            for (int o = 0; o < oc; ++o) {
                float v = bias ? bias[o] : 0.0f;
                const float* x = in + std::size_t(i) * c;
                const float* wo = w + std::size_t(o) * c;
                for (int k = 0; k < c; ++k)
                    v += x[k] * wo[k];
                out[std::size_t(i) * oc + o] = v;
            }
    });
}

void matmulBackward(float* din, float* dw, float* dbias, const float* dout, const float* in, const float* w, int n,
    int c, int oc, int threads)
{
    split(n, threads, [&](int b, int e) { // din (n, c) += dout · w
        for (int i = b; i < e; ++i)
            for (int o = 0; o < oc; ++o) {
                const float dy = dout[std::size_t(i) * oc + o];
                const float* wo = w + std::size_t(o) * c;
                float* dx = din + std::size_t(i) * c;
                for (int k = 0; k < c; ++k)
                    dx[k] += wo[k] * dy;
            }
    });
    split(oc, threads, [&](int b, int e) { // dw (oc, c) += doutᵀ · in, each thread its own rows
        for (int o = b; o < e; ++o)
            for (int i = 0; i < n; ++i) {
                const float dy = dout[std::size_t(i) * oc + o];
                const float* x = in + std::size_t(i) * c;
                float* dwo = dw + std::size_t(o) * c;
                for (int k = 0; k < c; ++k)
                    dwo[k] += x[k] * dy;
                if (dbias)
                    dbias[o] += dy;
            }
    });
}

// Causal self-attention over qkv (n, 3c) laid out [q | k | v], heads of c / nh.
void attentionForward(float* out, float* preatt, float* att, const float* qkv, int b, int t, int c, int nh, int threads)
{
    const int hs = c / nh;
    const float scale = 1.0f / std::sqrt(float(hs));
    split(b * nh, threads, [&](int from, int to) {
        for (int bh = from; bh < to; ++bh) {
            const int bb = bh / nh, h = bh % nh;
            for (int i = 0; i < t; ++i) {
                const float* q = qkv + std::size_t(bb * t + i) * 3 * c + h * hs;
                float* pre = preatt + (std::size_t(bh) * t + i) * t;
                float* a = att + (std::size_t(bh) * t + i) * t;
                float maxv = -1e30f;
                for (int j = 0; j <= i; ++j) {
                    const float* k = qkv + std::size_t(bb * t + j) * 3 * c + c + h * hs;
                    float v = 0;
                    for (int x = 0; x < hs; ++x)
                        v += q[x] * k[x];
                    pre[j] = v * scale;
                    maxv = std::max(maxv, pre[j]);
                }
                float sum = 0;
                for (int j = 0; j <= i; ++j) {
                    a[j] = std::exp(pre[j] - maxv);
                    sum += a[j];
                }
                for (int j = 0; j < t; ++j)
                    a[j] = j <= i ? a[j] / sum : 0.0f;
                float* o = out + std::size_t(bb * t + i) * c + h * hs;
                std::fill(o, o + hs, 0.0f);
                for (int j = 0; j <= i; ++j) {
                    const float* v = qkv + std::size_t(bb * t + j) * 3 * c + 2 * c + h * hs;
                    for (int x = 0; x < hs; ++x)
                        o[x] += a[j] * v[x];
                }
            }
        }
    });
}

void attentionBackward(float* dqkv, float* dpreatt, float* datt, const float* dout, const float* qkv, const float* att,
    int b, int t, int c, int nh, int threads)
{
    const int hs = c / nh;
    const float scale = 1.0f / std::sqrt(float(hs));
    split(b * nh, threads, [&](int from, int to) {
        for (int bh = from; bh < to; ++bh) {
            const int bb = bh / nh, h = bh % nh;
            for (int i = 0; i < t; ++i) {
                const float* a = att + (std::size_t(bh) * t + i) * t;
                float* da = datt + (std::size_t(bh) * t + i) * t;
                float* dpre = dpreatt + (std::size_t(bh) * t + i) * t;
                const float* dy = dout + std::size_t(bb * t + i) * c + h * hs;
                for (int j = 0; j <= i; ++j) {
                    const float* v = qkv + std::size_t(bb * t + j) * 3 * c + 2 * c + h * hs;
                    float* dv = dqkv + std::size_t(bb * t + j) * 3 * c + 2 * c + h * hs;
                    for (int x = 0; x < hs; ++x) {
                        da[j] += v[x] * dy[x];
                        dv[x] += a[j] * dy[x];
                    }
                }
                for (int j = 0; j <= i; ++j) // softmax: dpre_k = a_k (da_k - Σ_j a_j da_j)
                    for (int k = 0; k <= i; ++k)
                        dpre[k] += a[j] * ((j == k ? 1.0f : 0.0f) - a[k]) * da[j];
                const float* q = qkv + std::size_t(bb * t + i) * 3 * c + h * hs;
                float* dq = dqkv + std::size_t(bb * t + i) * 3 * c + h * hs;
                for (int j = 0; j <= i; ++j) {
                    const float* k = qkv + std::size_t(bb * t + j) * 3 * c + c + h * hs;
                    float* dk = dqkv + std::size_t(bb * t + j) * 3 * c + c + h * hs;
                    for (int x = 0; x < hs; ++x) {
                        dq[x] += k[x] * dpre[j] * scale;
                        dk[x] += q[x] * dpre[j] * scale;
                    }
                }
            }
        }
    });
}

constexpr float kGelu = 0.7978845608f; // sqrt(2/pi)

void geluForward(float* out, const float* in, std::size_t n)
{
    for (std::size_t i = 0; i < n; ++i) {
        const float x = in[i];
        out[i] = 0.5f * x * (1.0f + std::tanh(kGelu * (x + 0.044715f * x * x * x)));
    }
}

void geluBackward(float* din, const float* in, const float* dout, std::size_t n)
{
    for (std::size_t i = 0; i < n; ++i) {
        const float x = in[i];
        const float u = kGelu * (x + 0.044715f * x * x * x);
        const float th = std::tanh(u);
        const float sech2 = 1.0f - th * th;
        din[i] += (0.5f * (1.0f + th) + 0.5f * x * sech2 * kGelu * (1.0f + 3.0f * 0.044715f * x * x)) * dout[i];
    }
}

} // namespace

ReferenceGpt2::ReferenceGpt2(ReferenceShape shape, int batch, std::uint64_t seed, int threads)
    : m_s(shape)
    , m_b(batch)
    , m_threads(std::max(1, threads))
{
    const std::size_t V = m_s.vocab, T = m_s.seqLen, C = m_s.hidden, L = m_s.layers, N = std::size_t(batch) * T,
                      NH = m_s.heads;
    std::size_t o = 0;
    auto take = [&o](std::size_t n) {
        const std::size_t at = o;
        o += n;
        return at;
    };
    m_p = { take(V * C), take(T * C), take(L * C), take(L * C), take(L * 3 * C * C), take(L * 3 * C), take(L * C * C),
        take(L * C), take(L * C), take(L * C), take(L * 4 * C * C), take(L * 4 * C), take(L * C * 4 * C), take(L * C),
        take(C), take(C), 0 };
    m_p.total = o;
    o = 0;
    m_a = { take(N * C), take(L * N * C), take(L * N), take(L * N), take(L * N * 3 * C), take(L * N * C),
        take(L * batch * NH * T * T), take(L * batch * NH * T * T), take(L * N * C), take(L * N * C), take(L * N * C),
        take(L * N), take(L * N), take(L * N * 4 * C), take(L * N * 4 * C), take(L * N * C), take(L * N * C),
        take(N * C), take(N), take(N), take(N * V), take(N * V), take(N), 0 };
    m_a.total = o;
    m_params.assign(m_p.total, 0.0f);
    m_grads.assign(m_p.total, 0.0f);
    m_m.assign(m_p.total, 0.0f);
    m_v.assign(m_p.total, 0.0f);
    m_acts.assign(m_a.total, 0.0f);
    m_dacts.assign(m_a.total, 0.0f);
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    for (float& x : m_params)
        x = normal(rng);
    for (std::size_t w : { m_p.ln1w, m_p.ln2w })
        std::fill(p(w), p(w) + L * C, 1.0f);
    for (std::size_t b : { m_p.ln1b, m_p.ln2b, m_p.qkvb, m_p.attb, m_p.fcb, m_p.projb })
        std::fill(p(b), p(b) + L * C * (b == m_p.qkvb ? 3 : b == m_p.fcb ? 4 : 1), 0.0f);
    std::fill(p(m_p.lnfw), p(m_p.lnfw) + C, 1.0f);
    std::fill(p(m_p.lnfb), p(m_p.lnfb) + C, 0.0f);
}

void ReferenceGpt2::forward(const std::int32_t* tokens, const std::int32_t* targets)
{
    const int V = m_s.vocab, T = m_s.seqLen, C = m_s.hidden, NH = m_s.heads, B = m_b, N = B * T;
    encoderForward(a(m_a.encoded), tokens, p(m_p.wte), p(m_p.wpe), N, T, C);
    for (int l = 0; l < m_s.layers; ++l) {
        const std::size_t nc = std::size_t(l) * N * C, n1 = std::size_t(l) * N, att = std::size_t(l) * B * NH * T * T;
        const float* in = l == 0 ? a(m_a.encoded) : a(m_a.res3) + nc - std::size_t(N) * C;
        layernormForward(a(m_a.ln1) + nc, a(m_a.ln1Mean) + n1, a(m_a.ln1Rstd) + n1, in, p(m_p.ln1w) + l * C,
            p(m_p.ln1b) + l * C, N, C);
        matmulForward(a(m_a.qkv) + 3 * nc, a(m_a.ln1) + nc, p(m_p.qkvw) + std::size_t(l) * 3 * C * C,
            p(m_p.qkvb) + l * 3 * C, N, C, 3 * C, m_threads);
        attentionForward(
            a(m_a.atty) + nc, a(m_a.preatt) + att, a(m_a.att) + att, a(m_a.qkv) + 3 * nc, B, T, C, NH, m_threads);
        matmulForward(a(m_a.attproj) + nc, a(m_a.atty) + nc, p(m_p.attw) + std::size_t(l) * C * C, p(m_p.attb) + l * C,
            N, C, C, m_threads);
        for (std::size_t i = 0; i < std::size_t(N) * C; ++i)
            a(m_a.res2)[nc + i] = in[i] + a(m_a.attproj)[nc + i];
        layernormForward(a(m_a.ln2) + nc, a(m_a.ln2Mean) + n1, a(m_a.ln2Rstd) + n1, a(m_a.res2) + nc,
            p(m_p.ln2w) + l * C, p(m_p.ln2b) + l * C, N, C);
        matmulForward(a(m_a.fch) + 4 * nc, a(m_a.ln2) + nc, p(m_p.fcw) + std::size_t(l) * 4 * C * C,
            p(m_p.fcb) + l * 4 * C, N, C, 4 * C, m_threads);
        geluForward(a(m_a.fchGelu) + 4 * nc, a(m_a.fch) + 4 * nc, std::size_t(N) * 4 * C);
        matmulForward(a(m_a.fcproj) + nc, a(m_a.fchGelu) + 4 * nc, p(m_p.projw) + std::size_t(l) * 4 * C * C,
            p(m_p.projb) + l * C, N, 4 * C, C, m_threads);
        for (std::size_t i = 0; i < std::size_t(N) * C; ++i)
            a(m_a.res3)[nc + i] = a(m_a.res2)[nc + i] + a(m_a.fcproj)[nc + i];
    }
    const float* last = a(m_a.res3) + std::size_t(m_s.layers - 1) * N * C;
    layernormForward(a(m_a.lnf), a(m_a.lnfMean), a(m_a.lnfRstd), last, p(m_p.lnfw), p(m_p.lnfb), N, C);
    matmulForward(a(m_a.logits), a(m_a.lnf), p(m_p.wte), nullptr, N, C, V, m_threads);
    for (int i = 0; i < N; ++i) {
        const float* z = a(m_a.logits) + std::size_t(i) * V;
        float* pr = a(m_a.probs) + std::size_t(i) * V;
        const float maxv = *std::max_element(z, z + V);
        float sum = 0;
        for (int k = 0; k < V; ++k) {
            pr[k] = std::exp(z[k] - maxv);
            sum += pr[k];
        }
        for (int k = 0; k < V; ++k)
            pr[k] /= sum;
        a(m_a.losses)[i] = -std::log(pr[targets[i]]);
    }
}

void ReferenceGpt2::backward(const std::int32_t* tokens, const std::int32_t* targets)
{
    const int V = m_s.vocab, T = m_s.seqLen, C = m_s.hidden, NH = m_s.heads, B = m_b, N = B * T;
    std::fill(m_grads.begin(), m_grads.end(), 0.0f);
    std::fill(m_dacts.begin(), m_dacts.end(), 0.0f);
    for (int i = 0; i < N; ++i) { // softmax + cross-entropy, mean over the batch
        const float* pr = a(m_a.probs) + std::size_t(i) * V;
        float* dz = d(m_a.logits) + std::size_t(i) * V;
        for (int k = 0; k < V; ++k)
            dz[k] = (pr[k] - (k == targets[i] ? 1.0f : 0.0f)) / float(N);
    }
    matmulBackward(d(m_a.lnf), g(m_p.wte), nullptr, d(m_a.logits), a(m_a.lnf), p(m_p.wte), N, C, V, m_threads);
    const std::size_t lastOff = std::size_t(m_s.layers - 1) * N * C;
    layernormBackward(d(m_a.res3) + lastOff, g(m_p.lnfw), g(m_p.lnfb), d(m_a.lnf), a(m_a.res3) + lastOff, p(m_p.lnfw),
        a(m_a.lnfMean), a(m_a.lnfRstd), N, C);
    for (int l = m_s.layers - 1; l >= 0; --l) {
        const std::size_t nc = std::size_t(l) * N * C, n1 = std::size_t(l) * N, att = std::size_t(l) * B * NH * T * T;
        const float* in = l == 0 ? a(m_a.encoded) : a(m_a.res3) + nc - std::size_t(N) * C;
        float* din = l == 0 ? d(m_a.encoded) : d(m_a.res3) + nc - std::size_t(N) * C;
        float* dres3 = d(m_a.res3) + nc;
        for (std::size_t i = 0; i < std::size_t(N) * C; ++i) { // res3 = res2 + fcproj
            d(m_a.res2)[nc + i] += dres3[i];
            d(m_a.fcproj)[nc + i] += dres3[i];
        }
        matmulBackward(d(m_a.fchGelu) + 4 * nc, g(m_p.projw) + std::size_t(l) * 4 * C * C, g(m_p.projb) + l * C,
            d(m_a.fcproj) + nc, a(m_a.fchGelu) + 4 * nc, p(m_p.projw) + std::size_t(l) * 4 * C * C, N, 4 * C, C,
            m_threads);
        geluBackward(d(m_a.fch) + 4 * nc, a(m_a.fch) + 4 * nc, d(m_a.fchGelu) + 4 * nc, std::size_t(N) * 4 * C);
        matmulBackward(d(m_a.ln2) + nc, g(m_p.fcw) + std::size_t(l) * 4 * C * C, g(m_p.fcb) + l * 4 * C,
            d(m_a.fch) + 4 * nc, a(m_a.ln2) + nc, p(m_p.fcw) + std::size_t(l) * 4 * C * C, N, C, 4 * C, m_threads);
        layernormBackward(d(m_a.res2) + nc, g(m_p.ln2w) + l * C, g(m_p.ln2b) + l * C, d(m_a.ln2) + nc, a(m_a.res2) + nc,
            p(m_p.ln2w) + l * C, a(m_a.ln2Mean) + n1, a(m_a.ln2Rstd) + n1, N, C);
        for (std::size_t i = 0; i < std::size_t(N) * C; ++i) { // res2 = in + attproj
            din[i] += d(m_a.res2)[nc + i];
            d(m_a.attproj)[nc + i] += d(m_a.res2)[nc + i];
        }
        matmulBackward(d(m_a.atty) + nc, g(m_p.attw) + std::size_t(l) * C * C, g(m_p.attb) + l * C, d(m_a.attproj) + nc,
            a(m_a.atty) + nc, p(m_p.attw) + std::size_t(l) * C * C, N, C, C, m_threads);
        attentionBackward(d(m_a.qkv) + 3 * nc, d(m_a.preatt) + att, d(m_a.att) + att, d(m_a.atty) + nc,
            a(m_a.qkv) + 3 * nc, a(m_a.att) + att, B, T, C, NH, m_threads);
        matmulBackward(d(m_a.ln1) + nc, g(m_p.qkvw) + std::size_t(l) * 3 * C * C, g(m_p.qkvb) + l * 3 * C,
            d(m_a.qkv) + 3 * nc, a(m_a.ln1) + nc, p(m_p.qkvw) + std::size_t(l) * 3 * C * C, N, C, 3 * C, m_threads);
        layernormBackward(din, g(m_p.ln1w) + l * C, g(m_p.ln1b) + l * C, d(m_a.ln1) + nc, in, p(m_p.ln1w) + l * C,
            a(m_a.ln1Mean) + n1, a(m_a.ln1Rstd) + n1, N, C);
    }
    encoderBackward(g(m_p.wte), g(m_p.wpe), d(m_a.encoded), tokens, N, T, C);
}

float ReferenceGpt2::step(const std::int32_t* tokens, const std::int32_t* targets, float lr)
{
    forward(tokens, targets);
    float loss = 0;
    const int n = m_b * m_s.seqLen;
    for (int i = 0; i < n; ++i)
        loss += a(m_a.losses)[i];
    loss /= float(n);
    backward(tokens, targets);

    // Global-norm clipping at 1 and AdamW (0.9, 0.95, 1e-8, weight decay 0.1 on every tensor): plain loops.
    const auto t0 = std::chrono::steady_clock::now();
    double norm2 = 0;
    for (float x : m_grads)
        norm2 += double(x) * double(x);
    const float norm = float(std::sqrt(norm2));
    const float clip = norm > 1.0f ? 1.0f / (norm + 1e-6f) : 1.0f;
    ++m_t;
    const float c1 = 1.0f - std::pow(0.9f, float(m_t)), c2 = 1.0f - std::pow(0.95f, float(m_t));
    for (std::size_t i = 0; i < m_params.size(); ++i) {
        const float gr = m_grads[i] * clip;
        m_m[i] = 0.9f * m_m[i] + 0.1f * gr;
        m_v[i] = 0.95f * m_v[i] + 0.05f * gr * gr;
        m_params[i] -= lr * ((m_m[i] / c1) / (std::sqrt(m_v[i] / c2) + 1e-8f) + 0.1f * m_params[i]);
    }
    m_optimizerSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return loss;
}

} // namespace loom::bench
