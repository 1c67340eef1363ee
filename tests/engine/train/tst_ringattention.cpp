// Ring attention (context parallelism) against full causal attention: every rank builds the same random
// sequences, computes full attention on them with the one-rank kernel (CpuKernels), and ring attention on
// its two chunks over the CP group (the world: cp = the number of ranks). Outputs and the gradients of Q, K
// and V must agree on every local row; grouped-query attention (fewer KV heads) is checked against the
// full kernel with the KV heads repeated (their gradients summed over each group). Run under mpirun with 2
// and 4 ranks (CMake registers both); also checks the one-rank path (no communicator) on every rank.
#include "engine/comm/GridGroups.h"
#include "engine/train/CpuKernels.h"
#include "engine/train/RingAttention.h"
#include "tests/engine/comm/MpiTest.h"

#include <cmath>
#include <random>

using namespace loom;

namespace {

struct Case {
    int B, chunk, heads, kvHeads, d;
};

struct Errors {
    double out = 0, dq = 0, dk = 0, dv = 0;
};

double relErr(float a, float b)
{
    return std::abs(double(a) - double(b)) / std::max(1.0, std::abs(double(b)));
}

// Full attention on [B, s] with `heads` query heads and KV heads repeated to match (reference), then ring
// attention of CP rank `rank` of `size` on its chunks; returns the largest differences.
Errors compare(comm::Communicator* cp, int rank, int size, const Case& k)
{
    const int s = 2 * size * k.chunk, H = k.heads, G = k.kvHeads, d = k.d, group = H / G;
    const int hd = H * d, kvd = G * d, width = 3 * hd;
    std::mt19937 gen(7);
    std::normal_distribution<float> n(0.0f, 1.0f);
    std::vector<float> q(std::size_t(k.B) * s * hd), kk(std::size_t(k.B) * s * kvd), v(kk.size()), dOut(q.size());
    for (auto* vec : { &q, &kk, &v, &dOut })
        for (auto& x : *vec)
            x = n(gen);
    // Reference: packed qkv with each KV head repeated for its query heads.
    std::vector<float> qkv(std::size_t(k.B) * s * width), ref(q.size()), probs(std::size_t(k.B) * H * s * s),
        dqkv(qkv.size());
    for (int r = 0; r < k.B * s; ++r)
        for (int h = 0; h < H; ++h)
            for (int x = 0; x < d; ++x) {
                const std::size_t row = std::size_t(r) * width;
                qkv[row + h * d + x] = q[std::size_t(r) * hd + h * d + x];
                qkv[row + hd + h * d + x] = kk[std::size_t(r) * kvd + (h / group) * d + x];
                qkv[row + 2 * hd + h * d + x] = v[std::size_t(r) * kvd + (h / group) * d + x];
            }
    train::CpuKernels kernels;
    kernels.attentionForward(ref.data(), probs.data(), qkv.data(), k.B, s, H, d);
    kernels.attentionBackward(dqkv.data(), dOut.data(), qkv.data(), probs.data(), k.B, s, H, d);

    // This rank's rows, in local order.
    const auto positions = train::RingAttention::localPositions(rank, size, s);
    const int L = static_cast<int>(positions.size());
    std::vector<float> lq(std::size_t(k.B) * L * hd), lk(std::size_t(k.B) * L * kvd), lv(lk.size()), ldo(lq.size());
    auto globalRow = [&](int b, int j) { return std::size_t(b) * s + std::size_t(positions[std::size_t(j)]); };
    for (int b = 0; b < k.B; ++b)
        for (int j = 0; j < L; ++j) {
            const std::size_t g = globalRow(b, j), l = std::size_t(b) * L + j;
            std::copy_n(q.begin() + g * hd, hd, lq.begin() + l * hd);
            std::copy_n(dOut.begin() + g * hd, hd, ldo.begin() + l * hd);
            std::copy_n(kk.begin() + g * kvd, kvd, lk.begin() + l * kvd);
            std::copy_n(v.begin() + g * kvd, kvd, lv.begin() + l * kvd);
        }
    train::RingAttention ring(cp, { k.B, k.chunk, H, G, d });
    std::vector<float> out(lq.size()), lse(std::size_t(k.B) * H * L), dq(lq.size()), dk(lk.size()), dv(lk.size());
    ring.forward(lq.data(), hd, lk.data(), lv.data(), kvd, out.data(), hd, lse.data());
    ring.backward(lq.data(), hd, lk.data(), lv.data(), kvd, out.data(), hd, ldo.data(), lse.data(), dq.data(),
        dk.data(), dv.data());

    Errors e;
    for (int b = 0; b < k.B; ++b)
        for (int j = 0; j < L; ++j) {
            const std::size_t g = globalRow(b, j), l = std::size_t(b) * L + j;
            for (int c = 0; c < hd; ++c) {
                e.out = std::max(e.out, relErr(out[l * hd + c], ref[g * hd + c]));
                e.dq = std::max(e.dq, relErr(dq[l * hd + c], dqkv[g * width + c]));
            }
            for (int gh = 0; gh < G; ++gh)
                for (int x = 0; x < d; ++x) {
                    float refK = 0, refV = 0; // summed over the query heads that share this KV head
                    for (int h = gh * group; h < (gh + 1) * group; ++h) {
                        refK += dqkv[g * width + hd + h * d + x];
                        refV += dqkv[g * width + 2 * hd + h * d + x];
                    }
                    e.dk = std::max(e.dk, relErr(dk[l * kvd + gh * d + x], refK));
                    e.dv = std::max(e.dv, relErr(dv[l * kvd + gh * d + x], refV));
                }
        }
    return e;
}

} // namespace

class TestRingAttention : public QObject {
    Q_OBJECT
private slots:
    void sameAsFullAttention_data()
    {
        QTest::addColumn<int>("B");
        QTest::addColumn<int>("chunk");
        QTest::addColumn<int>("heads");
        QTest::addColumn<int>("kvHeads");
        QTest::addColumn<int>("d");
        QTest::newRow("2 sequences, 2 heads") << 2 << 3 << 2 << 2 << 8;
        QTest::newRow("grouped KV heads (4 query, 2 KV)") << 1 << 4 << 4 << 2 << 8;
        QTest::newRow("chunks of one token") << 2 << 1 << 2 << 1 << 4;
    }

    void sameAsFullAttention()
    {
        QFETCH(int, B);
        QFETCH(int, chunk);
        QFETCH(int, heads);
        QFETCH(int, kvHeads);
        QFETCH(int, d);
        const int size = comm::testing::worldSize(), rank = comm::testing::worldRank();
        // The CP group of a grid with cp = every rank (tp = pp = dp = 1).
        const plan::RankGrid grid(1, 1, 1, size, plan::RankOrder::TpPpDp, size);
        QCOMPARE(comm::gridCommMembers(grid, plan::GroupKind::Context, rank).size(), std::size_t(size));
        auto comms = comm::makeMpiGridCommunicators(grid, nullptr);
        QCOMPARE(comms.context->size(), size);
        const Case k { B, chunk, heads, kvHeads, d };
        const Errors ring = compare(comms.context.get(), rank, size, k);
        const Errors one = compare(nullptr, 0, 1, { B, chunk * size, heads, kvHeads, d });
        double worst[4] = { std::max(ring.out, one.out), std::max(ring.dq, one.dq), std::max(ring.dk, one.dk),
            std::max(ring.dv, one.dv) };
        comms.world->allReduce(worst, 4, comm::DType::F64, comm::ReduceOp::Max)->wait();
        if (rank == 0)
            qInfo("cp=%d: largest relative error out %.2e, dQ %.2e, dK %.2e, dV %.2e", size, worst[0], worst[1],
                worst[2], worst[3]);
        for (double w : worst)
            QVERIFY2(w < 1e-4, qPrintable(QString("error %1 against full attention").arg(w)));
    }

    void sendVolume()
    {
        // One K/V block is B·2c rows of K and V (2·kv·d floats); forward sends cp-1 of them, backward cp-1
        // K/V blocks and cp dK/dV accumulators: 2 sequences, c = 3, 2 KV heads of 8 -> 2·6·32·4 = 1536 bytes.
        const int size = comm::testing::worldSize();
        const plan::RankGrid grid(1, 1, 1, size, plan::RankOrder::TpPpDp, size);
        auto comms = comm::makeMpiGridCommunicators(grid, nullptr);
        const train::RingAttention ring(comms.context.get(), { 2, 3, 4, 2, 8 });
        QCOMPARE(ring.forwardSendBytes(), std::uint64_t(size - 1) * 1536);
        QCOMPARE(ring.backwardSendBytes(), std::uint64_t(2 * size - 1) * 1536);
    }
};

int main(int argc, char** argv)
{
    return comm::testing::runOnEveryRank<TestRingAttention>(argc, argv);
}

#include "tst_ringattention.moc"
