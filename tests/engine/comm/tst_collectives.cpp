// Collectives under mpirun (CTest runs this at 2, 3, 4 and 8 ranks). Every lossless path must equal
// MPI_Allreduce exactly on integer-valued data; lossy codecs must stay inside their documented bounds;
// error feedback must keep the accumulated error bounded where its absence lets it grow.
#include "engine/comm/GradientCodec.h"
#include "engine/comm/MpiCommunicator.h"

#include "MpiTest.h"

#include <QTest>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>

using namespace loom;
using namespace loom::comm;
using namespace loom::comm::testing;

namespace {

float fractional(int rank, std::size_t i)
{
    return std::sin(0.37f * static_cast<float>(i) + 1.3f * static_cast<float>(rank));
}

std::vector<std::uint8_t> encode(const std::vector<float>& v, DType t)
{
    std::vector<std::uint8_t> out(v.size() * sizeOf(t));
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (t == DType::F32)
            std::memcpy(out.data() + 4 * i, &v[i], 4);
        else {
            const std::uint16_t h = t == DType::F16 ? floatToHalf(v[i]) : floatToBf16(v[i]);
            std::memcpy(out.data() + 2 * i, &h, 2);
        }
    }
    return out;
}

// The reference: MPI_Allreduce on fp32, converted to the type afterwards (exact for these values).
std::vector<std::uint8_t> reference(const std::vector<float>& mine, DType t, MPI_Op op)
{
    std::vector<float> r(mine);
    MPI_Allreduce(MPI_IN_PLACE, r.data(), static_cast<int>(r.size()), MPI_FLOAT, op, MPI_COMM_WORLD);
    return encode(r, t);
}

std::vector<int> pairsAsNodes()
{
    std::vector<int> nodes;
    for (int r = 0; r < worldSize(); ++r)
        nodes.push_back(r / 2);
    return nodes;
}

} // namespace

class TestCollectives : public QObject {
    Q_OBJECT
    std::unique_ptr<MpiCommunicator> m_world; // nodes detected (one node here)
    std::unique_ptr<MpiCommunicator> m_pairs; // every two ranks form a "node" (uneven at odd sizes)
    trace::TraceRecorder m_recorder { worldRank() };

private slots:
    void initTestCase()
    {
        m_world = std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, trace::GroupKind::World, "world", &m_recorder);
        m_pairs = std::make_unique<MpiCommunicator>(
            MPI_COMM_WORLD, trace::GroupKind::Other, "pairs", nullptr, CommConfig::fromEnvironment(), pairsAsNodes());
    }
    void cleanupTestCase()
    {
        m_world.reset();
        m_pairs.reset();
    }

    void allReduce_data()
    {
        QTest::addColumn<int>("algorithm");
        QTest::addColumn<int>("type");
        QTest::addColumn<int>("count");
        QTest::addColumn<int>("op");
        QTest::addColumn<bool>("pairs");
        const int n = worldSize();
        for (auto a : { CollectiveAlgorithm::Library, CollectiveAlgorithm::Ring, CollectiveAlgorithm::ChunkedRing,
                 CollectiveAlgorithm::Hierarchical, CollectiveAlgorithm::SharedMemory })
            for (auto t : { DType::F32, DType::F16, DType::BF16 })
                for (int count : { 0, 1, n - 1, n + 1, 1000, 4099 })
                    for (auto op : { ReduceOp::Sum, ReduceOp::Max })
                        QTest::newRow(qPrintable(
                            QStringLiteral("%1 %2 x%3 %4")
                                .arg(QString::fromLatin1(toString(a).data()), QString::fromLatin1(toString(t).data()))
                                .arg(count)
                                .arg(QString::fromLatin1(toString(op).data()))))
                            << int(a) << int(t) << count << int(op) << (a == CollectiveAlgorithm::Hierarchical);
        // Several pieces of the shared-memory segment's slots (1 to 8 MiB), the last one short.
        QTest::newRow("shm f32 x5000003 sum")
            << int(CollectiveAlgorithm::SharedMemory) << int(DType::F32) << 5000003 << int(ReduceOp::Sum) << false;
    }
    void allReduce()
    {
        QFETCH(int, algorithm);
        QFETCH(int, type);
        QFETCH(int, count);
        QFETCH(int, op);
        QFETCH(bool, pairs);
        const auto t = DType(type);
        std::vector<float> mine(static_cast<std::size_t>(count));
        for (std::size_t i = 0; i < mine.size(); ++i)
            mine[i] = value(worldRank(), i);
        auto data = encode(mine, t);
        const auto expected = reference(mine, t, ReduceOp(op) == ReduceOp::Sum ? MPI_SUM : MPI_MAX);
        CollectiveOptions options;
        options.algorithm = CollectiveAlgorithm(algorithm);
        options.chunkBytes = 64; // several chunks per segment even at these sizes
        auto work = (pairs ? *m_pairs : *m_world).allReduce(data.data(), mine.size(), t, ReduceOp(op), options);
        work->wait();
        QVERIFY(work->isCompleted());
        QVERIFY(!work->error());
        QVERIFY(data == expected);
        if (options.algorithm == CollectiveAlgorithm::SharedMemory && worldSize() > 1 && !pairs) {
            // Every rank of this test runs on one machine: the segment is made and used, not the ring.
            QCOMPARE(toString(work->stats().algorithm), toString(CollectiveAlgorithm::SharedMemory));
        } else if (options.algorithm != CollectiveAlgorithm::Library && count > 0 && worldSize() > 1 && !pairs) {
            // Loom's ring sends exactly 2(n-1)/n of the buffer (up to uneven segments).
            const double n = worldSize(), bytes = double(data.size());
            const double wire = double(work->stats().wireBytes);
            QVERIFY2(std::fabs(wire - 2 * (n - 1) / n * bytes) <= 2 * sizeOf(t) * n, qPrintable(QString::number(wire)));
        }
    }

    void hierarchicalReportsWhatRan()
    {
        std::vector<float> v(64, 1.0f);
        CollectiveOptions o;
        o.algorithm = CollectiveAlgorithm::Hierarchical;
        auto w = m_pairs->allReduce(v.data(), v.size(), DType::F32, ReduceOp::Sum, o);
        w->wait();
        // Pairs are even only at even sizes; otherwise the communicator falls back to the ring, and says so.
        const auto expected = worldSize() % 2 == 0 ? trace::Algorithm::Hierarchical : trace::Algorithm::Ring;
        QVERIFY(w->stats().algorithm == expected);
        QCOMPARE(v[0], float(worldSize()));
    }

    void reduceScatterAndAllGather_data()
    {
        QTest::addColumn<int>("algorithm");
        QTest::addColumn<int>("count");
        QTest::addColumn<bool>("inPlace");
        for (auto a : { CollectiveAlgorithm::Library, CollectiveAlgorithm::Ring, CollectiveAlgorithm::ChunkedRing,
                 CollectiveAlgorithm::SharedMemory })
            for (int count : { 0, 1, 7, 1001 })
                QTest::newRow(
                    qPrintable(QStringLiteral("%1 x%2").arg(QString::fromLatin1(toString(a).data())).arg(count)))
                    << int(a) << count << false;
        // The segment's: several pieces of a slot (1 to 8 MiB), the last one short; and in place (the
        // reduce-scatter's result in this rank's own block of its input, the all-gather's input there).
        QTest::newRow("shm x2500003") << int(CollectiveAlgorithm::SharedMemory) << 2500003 << false;
        QTest::newRow("shm x2500003 in place") << int(CollectiveAlgorithm::SharedMemory) << 2500003 << true;
        QTest::newRow("shm x1001 in place") << int(CollectiveAlgorithm::SharedMemory) << 1001 << true;
    }
    // Against MPI_Reduce_scatter and MPI_Allgather, bit for bit (integer-valued data: every order of the
    // additions gives the same sums).
    void reduceScatterAndAllGather()
    {
        QFETCH(int, algorithm);
        QFETCH(int, count);
        QFETCH(bool, inPlace);
        const int n = worldSize(), r = worldRank();
        const auto c = static_cast<std::size_t>(count);
        CollectiveOptions o;
        o.algorithm = CollectiveAlgorithm(algorithm);
        o.chunkBytes = 16;
        std::vector<float> send(c * static_cast<std::size_t>(n)), got(c), expected(c);
        for (std::size_t i = 0; i < send.size(); ++i)
            send[i] = value(r, i);
        std::vector<int> counts(static_cast<std::size_t>(n), count);
        MPI_Reduce_scatter(send.data(), expected.data(), counts.data(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        const bool shm = o.algorithm == CollectiveAlgorithm::SharedMemory && n > 1;
        float* ownBlock = send.data() + c * static_cast<std::size_t>(r);
        auto rs = m_world->reduceScatter(send.data(), inPlace ? ownBlock : got.data(), c, DType::F32, ReduceOp::Sum, o);
        rs->wait();
        if (inPlace)
            got.assign(ownBlock, ownBlock + c);
        QVERIFY(got == expected);
        if (shm) // every rank of this test runs on one machine: the segment is used, not the ring
            QCOMPARE(toString(rs->stats().algorithm), toString(CollectiveAlgorithm::SharedMemory));

        std::vector<float> mine(c), all(c * static_cast<std::size_t>(n)), allExpected(all.size());
        for (std::size_t i = 0; i < c; ++i)
            mine[i] = value(r, i);
        MPI_Allgather(mine.data(), count, MPI_FLOAT, allExpected.data(), count, MPI_FLOAT, MPI_COMM_WORLD);
        if (inPlace)
            std::copy(mine.begin(), mine.end(), all.begin() + static_cast<std::ptrdiff_t>(c) * r);
        auto ag = m_world->allGather(
            inPlace ? all.data() + c * static_cast<std::size_t>(r) : mine.data(), all.data(), c, DType::F32, o);
        ag->wait();
        QVERIFY(all == allExpected);
        if (shm)
            QCOMPARE(toString(ag->stats().algorithm), toString(CollectiveAlgorithm::SharedMemory));
    }

    void allToAll_data()
    {
        QTest::addColumn<int>("count");
        QTest::addColumn<bool>("variable");
        QTest::addColumn<bool>("ring");
        for (int count : { 0, 1, 7, 1001 })
            for (bool variable : { false, true })
                for (bool ring : { false, true })
                    QTest::newRow(qPrintable(QStringLiteral("x%1 %2 %3")
                                                 .arg(count)
                                                 .arg(variable ? "variable" : "equal")
                                                 .arg(ring ? "pairwise" : "library")))
                        << count << variable << ring;
    }
    // Equal and variable splits against MPI_Alltoallv, with the trace event's kind and bytes.
    void allToAll()
    {
        QFETCH(int, count);
        QFETCH(bool, variable);
        QFETCH(bool, ring);
        CollectiveOptions options;
        options.algorithm = ring ? CollectiveAlgorithm::Ring : CollectiveAlgorithm::Library;
        const int n = worldSize(), r = worldRank();
        // Rank s sends (s + d) % 3 · count elements to rank d when variable (some blocks empty), else count.
        auto sent = [&](int s, int d) {
            return variable ? std::size_t((s + d) % 3) * std::size_t(count) : std::size_t(count);
        };
        std::vector<std::size_t> sendCounts, recvCounts;
        std::vector<int> sc, sd, rc, rd;
        std::size_t sendTotal = 0, recvTotal = 0;
        for (int j = 0; j < n; ++j) {
            sendCounts.push_back(sent(r, j));
            recvCounts.push_back(sent(j, r));
            sc.push_back(int(sendCounts.back()));
            sd.push_back(int(sendTotal));
            rc.push_back(int(recvCounts.back()));
            rd.push_back(int(recvTotal));
            sendTotal += sendCounts.back();
            recvTotal += recvCounts.back();
        }
        std::vector<float> send(sendTotal), got(recvTotal, -1), expected(recvTotal);
        for (std::size_t i = 0; i < send.size(); ++i)
            send[i] = value(r, i);
        MPI_Alltoallv(send.data(), sc.data(), sd.data(), MPI_FLOAT, expected.data(), rc.data(), rd.data(), MPI_FLOAT,
            MPI_COMM_WORLD);
        WorkPtr w = variable ? m_world->allToAllV(send.data(), sendCounts, got.data(), recvCounts, DType::F32, options)
                             : m_world->allToAll(send.data(), got.data(), std::size_t(count), DType::F32, options);
        w->wait();
        QCOMPARE(got, expected);
        QCOMPARE(w->stats().bytes, std::uint64_t(sendTotal * 4));
        if (ring) // the pairwise exchange sends everything but its own block
            QCOMPARE(w->stats().wireBytes, std::uint64_t((sendTotal - sendCounts[std::size_t(r)]) * 4));
        bool traced = false;
        for (const auto& e : m_recorder.snapshot())
            traced = traced || (e.kind == trace::EventKind::AllToAll && e.bytes == sendTotal * 4);
        QVERIFY(traced);
        QCOMPARE(trace::busBandwidthFactor(trace::EventKind::AllToAll, n), n > 1 ? double(n - 1) / n : 1.0);
    }

    void broadcastSendRecvBarrier()
    {
        const int n = worldSize(), r = worldRank();
        std::vector<float> b(333, float(r));
        m_world->broadcast(b.data(), b.size(), DType::F32, n - 1)->wait();
        QCOMPARE(b[332], float(n - 1));

        std::vector<float> out(1000, float(r)), in(1000, -1);
        auto recv = m_world->recv(in.data(), in.size(), DType::F32, (r + n - 1) % n);
        auto send = m_world->send(out.data(), out.size(), DType::F32, (r + 1) % n);
        send->wait();
        recv->wait();
        QCOMPARE(in[999], float((r + n - 1) % n));
        m_world->barrier()->wait();

        // Every operation left a trace event with its group, bytes and (for the send) its peer.
        const auto events = m_recorder.snapshot();
        bool sawSend = false;
        for (const auto& e : events)
            if (e.kind == trace::EventKind::Send && e.bytes == 4000 && e.peer == (r + 1) % n)
                sawSend = e.group == m_world->group().id && e.endNs >= e.startNs;
        QVERIFY(sawSend);
    }

    // Memory every member maps (the ranks here are on one machine): each member's writes are read by the
    // others after a barrier; the members of "pairs" (two per node) are on several nodes and get none.
    void sharedMemoryIsOneCopy()
    {
        const int n = worldSize(), r = worldRank();
        std::string why;
        auto memory = m_world->sharedMemory(std::size_t(n) * 1000 * sizeof(float), why);
        QVERIFY2(memory != nullptr, why.c_str());
        QCOMPARE(reinterpret_cast<std::uintptr_t>(memory.get()) % 64, std::uintptr_t(0));
        auto* f = static_cast<float*>(memory.get());
        QCOMPARE(f[std::size_t(r) * 1000 + 999], 0.0f); // zero-filled
        m_world->barrier()->wait(); // nobody writes before everyone has read its zeros
        for (int i = 0; i < 1000; ++i)
            f[std::size_t(r) * 1000 + std::size_t(i)] = float(r * 1000 + i);
        m_world->barrier()->wait();
        for (int j = 0; j < n; ++j)
            QCOMPARE(f[std::size_t(j) * 1000 + 999], float(j * 1000 + 999));
        m_world->barrier()->wait(); // the memory is unmapped only after every member read it
        memory.reset();
        std::string pairsWhy;
        QCOMPARE(m_pairs->sharedMemory(64, pairsWhy) == nullptr, n > 2);
        if (n > 2)
            QCOMPARE(pairsWhy, std::string(kMembersOnSeveralNodes));
    }

    void overlapsWithCompute()
    {
        // allReduce returns before the reduction finishes; the caller computes meanwhile.
        std::vector<float> v(1 << 18, 1.0f);
        CollectiveOptions o;
        o.algorithm = CollectiveAlgorithm::Ring;
        auto w = m_world->allReduce(v.data(), v.size(), DType::F32, ReduceOp::Sum, o);
        double busy = 0;
        for (int i = 0; i < 1000; ++i)
            busy += std::sqrt(double(i));
        w->wait();
        QVERIFY(busy > 0);
        QCOMPARE(v.back(), float(worldSize()));
    }

    void codecs_data()
    {
        QTest::addColumn<QString>("codec");
        QTest::addColumn<int>("count");
        for (const char* c : { "fp16", "bf16", "int8", "int4", "topk:0.1", "lz4" })
            for (int count : { 1, 5, 1000, 3001 })
                QTest::newRow(qPrintable(QStringLiteral("%1 x%2").arg(c).arg(count)))
                    << QString::fromLatin1(c) << count;
    }
    void codecs()
    {
        QFETCH(QString, codec);
        QFETCH(int, count);
        const int n = worldSize(), r = worldRank();
        const auto c = static_cast<std::size_t>(count);
        const auto spec = *plan::Codec::parse(codec.toStdString());
        const bool lossless = !spec.lossy();
        std::vector<float> mine(c);
        for (std::size_t i = 0; i < c; ++i)
            mine[i] = lossless ? value(r, i) : fractional(r, i);
        std::vector<float> all(c * static_cast<std::size_t>(n));
        MPI_Allgather(mine.data(), count, MPI_FLOAT, all.data(), count, MPI_FLOAT, MPI_COMM_WORLD);
        CollectiveOptions o;
        o.codec = spec;
        o.codecBlock = 64;
        std::vector<float> data = mine;
        auto w = m_world->allReduce(data.data(), c, DType::F32, ReduceOp::Sum, o);
        w->wait();
        if (lossless) {
            QVERIFY(encode(data, DType::F32) == reference(mine, DType::F32, MPI_SUM));
            return;
        }
        auto codecImpl = makeCodec(spec, o.codecBlock);
        std::vector<float> exact(c, 0.0f);
        for (int p = 0; p < n; ++p)
            for (std::size_t i = 0; i < c; ++i)
                exact[i] += all[static_cast<std::size_t>(p) * c + i];
        if (spec.kind == plan::Codec::Kind::TopK) {
            // Exactly the sum of what each rank kept.
            std::vector<float> kept(c), sum(c, 0.0f);
            std::vector<std::uint8_t> enc(codecImpl->maxEncodedBytes(c));
            for (int p = 0; p < n; ++p) {
                codecImpl->decode(enc.data(),
                    codecImpl->encode(all.data() + static_cast<std::size_t>(p) * c, c, enc.data()), kept.data(), c);
                for (std::size_t i = 0; i < c; ++i)
                    sum[i] += kept[i];
            }
            QCOMPARE(data, n == 1 ? mine : sum);
            return;
        }
        // Two-phase bound: each input compressed once, the sum compressed once (block maxima bounded by the
        // tensor's maxima).
        float sumMax = 0;
        std::vector<float> rankMax(static_cast<std::size_t>(n), 0.0f);
        for (std::size_t i = 0; i < c; ++i) {
            sumMax = std::max(sumMax, std::fabs(exact[i]));
            for (int p = 0; p < n; ++p)
                rankMax[static_cast<std::size_t>(p)] = std::max(
                    rankMax[static_cast<std::size_t>(p)], std::fabs(all[static_cast<std::size_t>(p) * c + i]));
        }
        for (std::size_t i = 0; i < c; ++i) {
            double bound = codecImpl->errorBound(exact[i], sumMax) + 1e-5;
            for (int p = 0; p < n; ++p)
                bound += codecImpl->errorBound(
                    all[static_cast<std::size_t>(p) * c + i], rankMax[static_cast<std::size_t>(p)]);
            if (n > 1 && !(std::fabs(double(data[i]) - exact[i]) <= bound))
                QFAIL(qPrintable(QStringLiteral("element %1: %2 vs exact %3, bound %4")
                                     .arg(i)
                                     .arg(data[i])
                                     .arg(exact[i])
                                     .arg(bound)));
        }
        // Compressed bytes on the wire: less than the fp32 ring would send.
        if (n > 1 && c >= 1000)
            QVERIFY(double(w->stats().wireBytes) < 2.0 * (n - 1) / n * 4.0 * double(c));
    }

    void errorFeedbackKeepsErrorBounded_data()
    {
        QTest::addColumn<QString>("codec");
        QTest::newRow("topk") << "topk:0.05";
        QTest::newRow("int4") << "int4";
    }
    void errorFeedbackKeepsErrorBounded()
    {
        // The same gradient every step: without error feedback the same information is lost every step, so
        // the summed error grows linearly; with it, what was lost comes back and the sum stays close.
        if (worldSize() < 2)
            QSKIP("needs two ranks");
        QFETCH(QString, codec);
        const std::size_t c = 512;
        const int r = worldRank(), n = worldSize();
        std::vector<float> g(c), exact(c);
        for (std::size_t i = 0; i < c; ++i)
            g[i] = fractional(r, i) * (i % 5 == 0 ? 1.0f : 0.05f);
        exact = g;
        MPI_Allreduce(MPI_IN_PLACE, exact.data(), static_cast<int>(c), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        auto drift = [&](bool feedback, int steps) {
            ErrorFeedback state;
            CollectiveOptions o;
            o.codec = *plan::Codec::parse(codec.toStdString());
            o.codecBlock = 64;
            o.feedback = feedback ? &state : nullptr;
            std::vector<double> total(c, 0.0);
            for (int s = 0; s < steps; ++s) {
                std::vector<float> v = g;
                m_world->allReduce(v.data(), c, DType::F32, ReduceOp::Sum, o)->wait();
                for (std::size_t i = 0; i < c; ++i)
                    total[i] += v[i];
            }
            double err = 0; // max over elements of |sum of results - steps * exact sum|
            for (std::size_t i = 0; i < c; ++i)
                err = std::max(err, std::fabs(total[i] - steps * double(exact[i])));
            return err;
        };
        const double with10 = drift(true, 10), with100 = drift(true, 100);
        const double without10 = drift(false, 10), without100 = drift(false, 100);
        if (r == 0)
            qInfo("%s, %d ranks: summed error with feedback %.4f (10 steps) %.4f (100 steps); without %.4f / %.4f",
                qPrintable(codec), n, with10, with100, without10, without100);
        QVERIFY(without100 > 8 * without10 * 0.99); // grows linearly
        QVERIFY(with100 < 2 * with10 + 1e-3); // stays bounded
        QVERIFY(with100 < without100 / 5);
    }
};

int main(int argc, char** argv)
{
    return loom::comm::testing::runOnEveryRank<TestCollectives>(argc, argv);
}

#include "tst_collectives.moc"
