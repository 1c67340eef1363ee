// The cases of loom-device-check: each uploads random inputs, runs the CUDA kernel and CpuKernels (or the
// CPU's vocab softmax, AdamW, sum of squares), and compares per element against a bound (DeviceCheck.cpp).
#include "engine/tools/DeviceCheckCases.h"

#include "engine/device/KernelMath.h"
#include "engine/train/CpuKernels.h"
#include "engine/train/Optimizer.h"
#include "engine/train/VocabSoftmax.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace loom::tools {

namespace {

using device::Buffer;
using device::GemmPrecision;
using Vec = std::vector<float>;

Vec randomVec(std::size_t n, std::uint64_t seed, float scale = 1.0f, float shift = 0.0f)
{
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    Vec v(n);
    for (float& x : v)
        x = shift + scale * normal(rng);
    return v;
}

double unitRoundoff(GemmPrecision p)
{
    return p == GemmPrecision::Bf16 ? std::ldexp(1.0, -9) : p == GemmPrecision::Fp16 ? std::ldexp(1.0, -11) : 0.0;
}

struct Checker {
    device::Device& gpu;
    device::CudaKernels k;
    train::CpuKernels cpu;
    GemmPrecision precision;
    int failures = 0;

    template <class T> Buffer<T> up(const std::vector<T>& host)
    {
        Buffer<T> b(gpu, host.size());
        b.upload(host);
        return b;
    }
    template <class T> std::vector<T> down(const Buffer<T>& b)
    {
        gpu.synchronize(k.stream());
        return b.download();
    }

    // Per element |got − want| ≤ bound[i] (or, with no bound, 1e-5·|want| + 1e-6).
    void expect(const char* name, const Vec& got, const Vec& want, const std::vector<double>* bound = nullptr)
    {
        double worst = 0, worstRatio = 0;
        std::size_t at = 0;
        for (std::size_t i = 0; i < want.size(); ++i) {
            const double err = std::abs(double(got[i]) - double(want[i]));
            const double allowed = bound ? (*bound)[i] + 1e-6 : 1e-5 * std::abs(double(want[i])) + 1e-6;
            const double ratio = std::isnan(err) ? INFINITY : err / allowed;
            if (ratio > worstRatio) {
                worstRatio = ratio;
                worst = err;
                at = i;
            }
        }
        const bool ok = worstRatio <= 1.0 && got.size() == want.size();
        failures += ok ? 0 : 1;
        std::printf("  %-4s %-28s %s  max |err| %.3g at %zu (%.2f of its bound)\n",
            device::gemmPrecisionName(precision), name, ok ? "ok  " : "FAIL", worst, at, worstRatio);
    }

    // The 16-bit GEMM bound per element from |A|·|B| (DeviceCheck.cpp).
    std::vector<double> gemmBound(bool tA, bool tB, int M, int N, int K, const Vec& A, const Vec& B)
    {
        Vec absA(A.size()), absB(B.size()), absC(std::size_t(M) * N);
        std::transform(A.begin(), A.end(), absA.begin(), [](float x) { return std::abs(x); });
        std::transform(B.begin(), B.end(), absB.begin(), [](float x) { return std::abs(x); });
        cpu.gemm(tA, tB, M, N, K, absA.data(), absB.data(), absC.data(), false);
        const double u = unitRoundoff(precision);
        const double factor = 2 * u + u * u + 2.0 * K * std::ldexp(1.0, -24);
        std::vector<double> bound(absC.size());
        for (std::size_t i = 0; i < absC.size(); ++i)
            bound[i] = precision == GemmPrecision::Fp32 ? 1e-5 * absC[i] : factor * absC[i];
        return bound;
    }

    void gemms();
    void epilogues(int M, int N, int K);
    void norms();
    void elementwise();
    void attention();
    void loss();
    void optimizer();
};

void Checker::gemms()
{
    const int M = 129, N = 67, K = 301;
    for (int t = 0; t < 4; ++t) {
        const bool tA = t & 1, tB = t & 2;
        const Vec A = randomVec(std::size_t(M) * K, 1 + t), B = randomVec(std::size_t(K) * N, 5 + t);
        const Vec C0 = randomVec(std::size_t(M) * N, 9);
        for (bool acc : { false, true }) {
            Vec want = C0;
            cpu.gemm(tA, tB, M, N, K, A.data(), B.data(), want.data(), acc);
            auto a = up(A), b = up(B), c = up(C0);
            k.gemm(tA, tB, M, N, K, a.data(), b.data(), c.data(), acc);
            const auto bound = gemmBound(tA, tB, M, N, K, A, B);
            const std::string name = std::string("gemm ") + (tA ? "T" : "N") + (tB ? "T" : "N") + (acc ? " +=" : "");
            expect(name.c_str(), down(c), want, &bound);
        }
    }
    // Epilogues: bias, and GELU(· + bias) with the pre-activation kept, whose leading dimension cuBLASLt wants
    // a multiple of 8: N = 72 here.
    epilogues(M, 72, K);
}

void Checker::epilogues(int M, int N, int K)
{
    const Vec A = randomVec(std::size_t(M) * K, 20), B = randomVec(std::size_t(K) * N, 21), bias = randomVec(N, 22);
    Vec pre(std::size_t(M) * N), want(pre.size());
    cpu.gemm(false, false, M, N, K, A.data(), B.data(), pre.data(), false);
    cpu.addBias(pre.data(), bias.data(), M, N);
    cpu.geluForward(want.data(), pre.data(), want.size());
    auto a = up(A), b = up(B), bb = up(bias);
    Buffer<float> c(gpu, want.size()), aux(gpu, want.size());
    const auto bound = gemmBound(false, false, M, N, K, A, B);
    k.gemmEpilogue(false, false, M, N, K, a.data(), b.data(), c.data(), device::Epilogue::Bias, bb.data(), nullptr);
    expect("gemm + bias epilogue", down(c), pre, &bound);
    k.gemmEpilogue(
        false, false, M, N, K, a.data(), b.data(), c.data(), device::Epilogue::BiasGelu, bb.data(), aux.data());
    std::vector<double> geluBound(bound.size()); // GELU's slope is below 1.13: the bound passes on scaled
    for (std::size_t i = 0; i < bound.size(); ++i)
        geluBound[i] = 1.13 * bound[i] + 1e-5 * std::abs(want[i]); // + cuBLASLt's own tanh
    expect("gemm + bias + GELU epilogue", down(c), want, &geluBound);
    expect("  its pre-activation (aux)", down(aux), pre, &bound);
}

void Checker::norms()
{
    const int rows = 67, cols = 769;
    const std::size_t n = std::size_t(rows) * cols;
    const Vec x = randomVec(n, 30, 1.0f, 3.0f), dy = randomVec(n, 31), g = randomVec(cols, 32, 0.2f, 1.0f),
              be = randomVec(cols, 33);
    Vec out(n), mean(rows), rstd(rows), dx(n, 0.0f), dg(cols, 0.0f), db(cols, 0.0f);
    cpu.layerNormForward(out.data(), mean.data(), rstd.data(), x.data(), g.data(), be.data(), rows, cols, 1e-5f);
    cpu.layerNormBackward(
        dx.data(), dg.data(), db.data(), dy.data(), x.data(), mean.data(), rstd.data(), g.data(), rows, cols);
    auto X = up(x), DY = up(dy), G = up(g), BE = up(be);
    Buffer<float> O(gpu, n), MEAN(gpu, rows), RSTD(gpu, rows);
    auto DX = up(Vec(n, 0.0f)), DG = up(Vec(cols, 0.0f)), DB = up(Vec(cols, 0.0f));
    k.layerNormForward(O.data(), MEAN.data(), RSTD.data(), X.data(), G.data(), BE.data(), rows, cols, 1e-5f);
    k.layerNormBackward(
        DX.data(), DG.data(), DB.data(), DY.data(), X.data(), MEAN.data(), RSTD.data(), G.data(), rows, cols);
    expect("layernorm forward", down(O), out);
    expect("layernorm backward dx", down(DX), dx);
    expect("layernorm backward dgamma", down(DG), dg);
    expect("layernorm backward dbeta", down(DB), db);
    Buffer<float> IN(gpu, n);
    k.normInputFromOutput(IN.data(), O.data(), MEAN.data(), RSTD.data(), G.data(), BE.data(), rows, cols);
    Vec back(n);
    cpu.normInputFromOutput(back.data(), out.data(), mean.data(), rstd.data(), g.data(), be.data(), rows, cols);
    expect("norm input from output", down(IN), back);

    Vec rout(n), rr(rows), rdx(n, 0.0f), rdg(cols, 0.0f);
    cpu.rmsNormForward(rout.data(), rr.data(), x.data(), g.data(), rows, cols, 1e-6f);
    cpu.rmsNormBackward(rdx.data(), rdg.data(), dy.data(), x.data(), rr.data(), g.data(), rows, cols);
    auto RDX = up(Vec(n, 0.0f)), RDG = up(Vec(cols, 0.0f));
    k.rmsNormForward(O.data(), RSTD.data(), X.data(), G.data(), rows, cols, 1e-6f);
    k.rmsNormBackward(RDX.data(), RDG.data(), DY.data(), X.data(), RSTD.data(), G.data(), rows, cols);
    expect("rmsnorm forward", down(O), rout);
    expect("rmsnorm backward dx", down(RDX), rdx);
    expect("rmsnorm backward dgamma", down(RDG), rdg);
}

void Checker::elementwise()
{
    const std::size_t n = 100003;
    const Vec x = randomVec(n, 40, 2.0f), u = randomVec(n, 41), dy = randomVec(n, 42);
    auto X = up(x), U = up(u), DY = up(dy);
    Buffer<float> O(gpu, n), O2(gpu, n);
    Vec want(n), want2(n);
    cpu.geluForward(want.data(), x.data(), n);
    k.geluForward(O.data(), X.data(), n);
    expect("gelu forward", down(O), want);
    cpu.geluBackward(want.data(), dy.data(), x.data(), n);
    k.geluBackward(O.data(), DY.data(), X.data(), n);
    expect("gelu backward", down(O), want);
    cpu.swigluForward(want.data(), x.data(), u.data(), n);
    k.swigluForward(O.data(), X.data(), U.data(), n);
    expect("swiglu forward", down(O), want);
    cpu.swigluBackward(want.data(), want2.data(), dy.data(), x.data(), u.data(), n);
    k.swigluBackward(O.data(), O2.data(), DY.data(), X.data(), U.data(), n);
    expect("swiglu backward dgate", down(O), want);
    expect("swiglu backward dup", down(O2), want2);

    const int rows = 37, heads = 4, d = 64, cols = 96;
    std::vector<std::int32_t> pos(rows);
    for (int r = 0; r < rows; ++r)
        pos[std::size_t(r)] = r * 29;
    std::vector<double> freq(d / 2);
    for (int i = 0; i < d / 2; ++i)
        freq[std::size_t(i)] = std::pow(10000.0, -2.0 * i / d);
    const Vec q = randomVec(std::size_t(rows) * heads * d, 43);
    auto Q = up(q);
    auto P = up(pos);
    auto F = up(freq);
    Vec rq = q;
    cpu.ropeForward(rq.data(), pos.data(), rows, heads, d, freq.data());
    k.ropeForward(Q.data(), P.data(), rows, heads, d, F.data());
    expect("rope forward", down(Q), rq);
    cpu.ropeBackward(rq.data(), pos.data(), rows, heads, d, freq.data());
    k.ropeBackward(Q.data(), P.data(), rows, heads, d, F.data());
    expect("rope backward (round trip)", down(Q), rq);

    const Vec m = randomVec(std::size_t(rows) * cols, 44), bias = randomVec(cols, 45);
    Vec bm = m, db(cols, 0.5f);
    cpu.addBias(bm.data(), bias.data(), rows, cols);
    cpu.biasBackward(db.data(), m.data(), rows, cols);
    auto BM = up(m), MM = up(m), B = up(bias), DB = up(Vec(cols, 0.5f));
    k.addBias(BM.data(), B.data(), rows, cols);
    k.biasBackward(DB.data(), MM.data(), rows, cols);
    expect("add bias", down(BM), bm);
    expect("bias backward", down(DB), db);
}

void Checker::attention()
{
    const int B = 2, s = 97, H = 3, d = 32;
    const Vec qkv = randomVec(std::size_t(B) * s * 3 * H * d, 50), dout = randomVec(std::size_t(B) * s * H * d, 51);
    Vec out(std::size_t(B) * s * H * d), probs(std::size_t(B) * H * s * s), dqkv(qkv.size());
    cpu.attentionForward(out.data(), probs.data(), qkv.data(), B, s, H, d);
    cpu.attentionBackward(dqkv.data(), dout.data(), qkv.data(), probs.data(), B, s, H, d);
    auto QKV = up(qkv), DOUT = up(dout);
    Buffer<float> OUT(gpu, out.size()), PROBS(gpu, probs.size()), DQKV(gpu, dqkv.size());
    k.attentionForward(OUT.data(), PROBS.data(), QKV.data(), B, s, H, d);
    k.attentionBackward(DQKV.data(), DOUT.data(), QKV.data(), PROBS.data(), B, s, H, d);
    if (precision == GemmPrecision::Fp32) {
        expect("attention probabilities", down(PROBS), probs);
        expect("attention forward", down(OUT), out);
        expect("attention backward", down(DQKV), dqkv);
        return;
    }
    // 16 bits: the bound of DeviceCheck.cpp from the scores' bound per row.
    const double u = unitRoundoff(precision), scale = 1.0 / std::sqrt(double(d));
    const int width = 3 * H * d;
    std::vector<double> bound(out.size());
    for (int b = 0; b < B; ++b)
        for (int h = 0; h < H; ++h)
            for (int i = 0; i < s; ++i) {
                double maxDs = 0;
                for (int j = 0; j <= i; ++j) {
                    double qk = 0;
                    for (int c = 0; c < d; ++c)
                        qk += std::abs(qkv[std::size_t(b * s + i) * width + h * d + c])
                            * std::abs(qkv[std::size_t(b * s + j) * width + H * d + h * d + c]);
                    maxDs = std::max(maxDs, (2 * u + u * u + 2.0 * d * std::ldexp(1.0, -24)) * scale * qk);
                }
                const float* p = probs.data() + ((std::size_t(b) * H + h) * s + i) * s;
                for (int c = 0; c < d; ++c) {
                    double e = 0;
                    for (int j = 0; j <= i; ++j)
                        e += (2 * p[j] * maxDs + 2 * u * p[j])
                            * std::abs(qkv[std::size_t(b * s + j) * width + 2 * H * d + h * d + c]);
                    bound[std::size_t(b * s + i) * H * d + h * d + c] = 2 * e;
                }
            }
    expect("attention forward", down(OUT), out, &bound);
    const Vec got = down(DQKV);
    double worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
        worst = std::max(worst, double(std::abs(got[i] - dqkv[i])) / (std::abs(dqkv[i]) + 1e-2));
    std::printf("  %-4s %-28s      max relative difference %.3g (reported; no bound derived)\n",
        device::gemmPrecisionName(precision), "attention backward", worst);
}

void Checker::loss()
{
    const int T = 19, Vl = 5003;
    const std::int64_t first = 5003, vocab = 9000; // the second slice, padded past 9000
    Vec z = randomVec(std::size_t(T) * Vl, 60, 4.0f);
    std::vector<std::int32_t> targets(T);
    for (int t = 0; t < T; ++t)
        targets[std::size_t(t)] = std::int32_t(t * 470); // some in this slice, some in the other
    Vec max(T), sum(T), shift(T, 0.0f), zc = z;
    train::vocab::rowMax(zc.data(), T, Vl, first, vocab, max.data(), 1);
    train::vocab::expSums(zc.data(), T, Vl, max.data(), targets.data(), first, sum.data(), shift.data(), 1);
    train::vocab::gradient(zc.data(), T, Vl, sum.data(), targets.data(), first, 0.25f, 1);
    auto Z = up(z);
    auto TG = up(targets);
    Buffer<float> MAX(gpu, T), SUM(gpu, T);
    auto SHIFT = up(Vec(T, 0.0f));
    k.crossEntropyStats(Z.data(), T, Vl, first, vocab, TG.data(), MAX.data(), SUM.data(), SHIFT.data());
    k.crossEntropyGradient(Z.data(), T, Vl, first, vocab, MAX.data(), SUM.data(), TG.data(), 0.25f);
    expect("cross-entropy row max", down(MAX), max);
    expect("cross-entropy row sum", down(SUM), sum);
    expect("cross-entropy target shift", down(SHIFT), shift);
    expect("cross-entropy gradient", down(Z), zc);
}

void Checker::optimizer()
{
    const std::size_t n = 300007;
    Vec params = randomVec(n, 70, 0.02f);
    const Vec grads = randomVec(n, 71);
    std::vector<std::uint8_t> mask(n);
    for (std::size_t i = 0; i < n; ++i)
        mask[i] = std::uint8_t(i % 5 != 0);
    auto P = up(params), G = up(grads), M = up(Vec(n, 0.0f)), V = up(Vec(n, 0.0f));
    auto MASK = up(mask);
    train::AdamW adam(0, n, 0.9, 0.95, 1e-8, 0.1);
    for (int step = 1; step <= 3; ++step) {
        const double lr = 1e-3 * step, c1 = 1 - std::pow(0.9, step), c2 = 1 - std::pow(0.95, step);
        adam.step(params.data(), grads.data(), mask, lr, 0.5f);
        const device::math::AdamStep ks { 0.9f, 0.95f, float(1.0 - 0.9), float(1.0 - 0.95), float(1 / c1),
            float(1 / c2), float(lr), float(lr * 0.1), 1e-8f, 0.5f };
        k.adamw(P.data(), G.data(), M.data(), V.data(), MASK.data(), n, ks);
    }
    expect("adamw parameters", down(P), params);
    expect("adamw first moment", down(M), adam.firstMoment().toHost());
    expect("adamw second moment", down(V), adam.secondMoment().toHost());
    const double want = train::sumOfSquares(grads.data(), n, 1), got = k.sumOfSquares(G.data(), n);
    expect("sum of squares", Vec { float(got) }, Vec { float(want) });
    Vec scaled = grads;
    scaled[17] = INFINITY;
    auto S = up(scaled);
    const bool overflow = k.unscaleAndCheck(S.data(), n, 0.5f);
    auto clean = up(grads);
    const bool clear = k.unscaleAndCheck(clean.data(), n, 0.5f);
    Vec half = grads;
    for (float& g : half)
        g *= 0.5f;
    expect("loss-scale unscale", down(clean), half);
    const bool flagsOk = overflow && !clear;
    failures += flagsOk ? 0 : 1;
    std::printf("  %-4s %-28s %s  (inf seen: %d, clean seen as clean: %d)\n", device::gemmPrecisionName(precision),
        "loss-scale overflow check", flagsOk ? "ok  " : "FAIL", int(overflow), int(!clear));
}

} // namespace

int checkKernels(device::Device& gpu, GemmPrecision precision)
{
    Checker c { gpu, device::CudaKernels(gpu, precision), {}, precision };
    std::printf("item 1: CUDA kernels against CpuKernels, GEMM inputs %s\n", device::gemmPrecisionName(precision));
    c.gemms();
    c.attention();
    if (precision == GemmPrecision::Fp32) { // the rest does not depend on the GEMM precision
        c.norms();
        c.elementwise();
        c.loss();
        c.optimizer();
    }
    return c.failures;
}

} // namespace loom::tools
