// The NCCL backend on real GPUs, under mpirun (label "gpu"). Without a GPU every rank skips with the reason.
#include "engine/comm/MpiCommunicator.h"
#include "engine/comm/NcclCommunicator.h"

#include "MpiTest.h"

#include <QTest>

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <memory>

using namespace loom;
using namespace loom::comm;
using namespace loom::comm::testing;

namespace {

struct DeviceVector {
    explicit DeviceVector(std::size_t n)
        : size(n)
    {
        cudaMalloc(&ptr, std::max<std::size_t>(n, 1) * 4);
    }
    ~DeviceVector() { cudaFree(ptr); }
    void put(const std::vector<float>& v) { cudaMemcpy(ptr, v.data(), v.size() * 4, cudaMemcpyHostToDevice); }
    std::vector<float> get() const
    {
        std::vector<float> v(size);
        cudaMemcpy(v.data(), ptr, size * 4, cudaMemcpyDeviceToHost);
        return v;
    }
    float* f() { return static_cast<float*>(ptr); }
    void* ptr = nullptr;
    std::size_t size;
};

} // namespace

class TestNccl : public QObject {
    Q_OBJECT
    std::unique_ptr<NcclCommunicator> m_comm;

private slots:
    void initTestCase()
    {
        const std::string problem = NcclCommunicator::deviceProblem();
        int ok = problem.empty() ? 1 : 0;
        MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!ok)
            QSKIP(problem.empty() ? "another rank has no GPU" : problem.c_str());
        // Bootstrapped over an MPI host communicator of the same ranks, as CommRuntime does under mpirun.
        int local = 0;
        if (const char* v = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK"))
            local = std::atoi(v);
        m_comm = std::make_unique<NcclCommunicator>(
            std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, trace::GroupKind::World, "world", nullptr), local,
            nullptr);
    }
    void cleanupTestCase() { m_comm.reset(); }

    void allReduce_data()
    {
        QTest::addColumn<int>("algorithm");
        QTest::addColumn<int>("count");
        for (auto a : { CollectiveAlgorithm::Library, CollectiveAlgorithm::Ring, CollectiveAlgorithm::ChunkedRing,
                 CollectiveAlgorithm::Hierarchical })
            for (int count : { 0, 1, 5, 100003 })
                QTest::newRow(
                    qPrintable(QStringLiteral("%1 x%2").arg(QString::fromLatin1(toString(a).data())).arg(count)))
                    << int(a) << count;
    }
    void allReduce()
    {
        QFETCH(int, algorithm);
        QFETCH(int, count);
        const auto c = static_cast<std::size_t>(count);
        std::vector<float> mine(c), expected(c);
        for (std::size_t i = 0; i < c; ++i)
            mine[i] = value(worldRank(), i);
        MPI_Allreduce(mine.data(), expected.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        DeviceVector d(c);
        d.put(mine);
        CollectiveOptions o;
        o.algorithm = CollectiveAlgorithm(algorithm);
        o.chunkBytes = 4096;
        m_comm->allReduce(d.ptr, c, DType::F32, ReduceOp::Sum, o)->wait();
        QCOMPARE(d.get(), expected);
    }

    void gatherScatterBroadcastSendRecv()
    {
        const int n = worldSize(), r = worldRank();
        const std::size_t c = 1001;
        std::vector<float> mine(c), all(c * static_cast<std::size_t>(n));
        for (std::size_t i = 0; i < c; ++i)
            mine[i] = value(r, i);
        MPI_Allgather(mine.data(), int(c), MPI_FLOAT, all.data(), int(c), MPI_FLOAT, MPI_COMM_WORLD);
        for (auto a : { CollectiveAlgorithm::Library, CollectiveAlgorithm::Ring }) {
            CollectiveOptions o;
            o.algorithm = a;
            DeviceVector in(c), out(all.size());
            in.put(mine);
            m_comm->allGather(in.ptr, out.ptr, c, DType::F32, o)->wait();
            QCOMPARE(out.get(), all);
        }
        DeviceVector b(c);
        b.put(mine);
        m_comm->broadcast(b.ptr, c, DType::F32, n - 1)->wait();
        std::vector<float> fromLast(c);
        for (std::size_t i = 0; i < c; ++i)
            fromLast[i] = value(n - 1, i);
        QCOMPARE(b.get(), fromLast);
        DeviceVector s(c), rv(c);
        s.put(mine);
        m_comm->sendRecv(s.ptr, (r + 1) % n, rv.ptr, (r + n - 1) % n, c, DType::F32)->wait();
        std::vector<float> fromPrev(c);
        for (std::size_t i = 0; i < c; ++i)
            fromPrev[i] = value((r + n - 1) % n, i);
        QCOMPARE(rv.get(), fromPrev);
        m_comm->barrier()->wait();
    }

    void codecStagesThroughHost()
    {
        const std::size_t c = 4096;
        std::vector<float> mine(c), expected(c);
        for (std::size_t i = 0; i < c; ++i)
            mine[i] = value(worldRank(), i);
        MPI_Allreduce(mine.data(), expected.data(), int(c), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        DeviceVector d(c);
        d.put(mine);
        CollectiveOptions o;
        o.codec = *plan::Codec::parse("lz4");
        m_comm->allReduce(d.ptr, c, DType::F32, ReduceOp::Sum, o)->wait();
        QCOMPARE(d.get(), expected);
    }
};

int main(int argc, char** argv)
{
    return loom::comm::testing::runOnEveryRank<TestNccl>(argc, argv);
}

#include "tst_nccl.moc"
