// comm.allreduce "auto": the measured table resolves every query to a concrete algorithm.
#include "engine/comm/AlgorithmTuner.h"

#include <QTest>

using namespace loom::comm;

Q_DECLARE_METATYPE(CollectiveAlgorithm)

class TstAlgorithmTuner : public QObject {
    Q_OBJECT
private slots:
    void choice_data()
    {
        QTest::addColumn<QString>("backend");
        QTest::addColumn<qulonglong>("bytes");
        QTest::addColumn<int>("ranks");
        QTest::addColumn<int>("nodes");
        QTest::addColumn<CollectiveAlgorithm>("expected");
        const auto lib = CollectiveAlgorithm::Library, ring = CollectiveAlgorithm::Ring,
                   hier = CollectiveAlgorithm::Hierarchical, shm = CollectiveAlgorithm::SharedMemory;
        QTest::newRow("mpi one node, 8 B: latency, the library") << "mpi" << 8ull << 4 << 1 << lib;
        QTest::newRow("mpi one node, 64 KiB") << "mpi" << 65536ull << 4 << 1 << lib;
        QTest::newRow("mpi one node, 4 MiB") << "mpi" << qulonglong(4 << 20) << 4 << 1 << lib;
        QTest::newRow("mpi one node, at the crossing") << "mpi" << qulonglong(16 << 20) << 4 << 1 << shm;
        QTest::newRow("mpi one node, 64 MiB, 4 ranks") << "mpi" << qulonglong(64 << 20) << 4 << 1 << shm;
        QTest::newRow("mpi one node, 25 MiB bucket, 2 ranks") << "mpi" << qulonglong(25 << 20) << 2 << 1 << shm;
        QTest::newRow("mpi two nodes, 64 MiB: two levels") << "mpi" << qulonglong(64 << 20) << 16 << 2 << hier;
        QTest::newRow("mpi two nodes, one rank each: flat ring") << "mpi" << qulonglong(64 << 20) << 2 << 2 << ring;
        QTest::newRow("mpi two nodes, 1 KiB") << "mpi" << 1024ull << 16 << 2 << lib;
        QTest::newRow("one rank: nothing to choose") << "mpi" << qulonglong(64 << 20) << 1 << 1 << lib;
        QTest::newRow("nccl chooses for itself") << "nccl" << qulonglong(64 << 20) << 8 << 1 << lib;
        QTest::newRow("nccl across nodes") << "nccl" << qulonglong(64 << 20) << 16 << 2 << lib;
        QTest::newRow("gloo") << "gloo" << qulonglong(64 << 20) << 4 << 1 << lib;
        QTest::newRow("unknown backend: the library") << "ucc" << qulonglong(64 << 20) << 4 << 1 << lib;
    }
    void choice()
    {
        QFETCH(QString, backend);
        QFETCH(qulonglong, bytes);
        QFETCH(int, ranks);
        QFETCH(int, nodes);
        QFETCH(CollectiveAlgorithm, expected);
        const std::string name = backend.toStdString();
        const auto chosen = chooseAllreduce({ name, std::size_t(bytes), ranks, nodes });
        QCOMPARE(toString(chosen), toString(expected));
    }

    void tableIsOrderedAndConcrete()
    {
        const auto& table = allreduceTuningTable();
        QVERIFY(!table.empty());
        for (std::size_t i = 1; i < table.size(); ++i)
            if (table[i].backend == table[i - 1].backend && table[i].multiNode == table[i - 1].multiNode)
                QVERIFY(table[i].minBytes > table[i - 1].minBytes);
        for (const auto& rule : table) // every backend and locality starts at 0 bytes: no query falls through
            QVERIFY(std::any_of(table.begin(), table.end(), [&](const TuningRule& r) {
                return r.backend == rule.backend && r.multiNode == rule.multiNode && r.minBytes == 0;
            }));
    }

    void aTableOfItsOwn()
    {
        const std::vector<TuningRule> table = { { "mpi", false, 0, CollectiveAlgorithm::Ring },
            { "mpi", false, 1 << 20, CollectiveAlgorithm::ChunkedRing } };
        QCOMPARE(toString(chooseAllreduce({ "mpi", 100, 4, 1 }, table)), toString(CollectiveAlgorithm::Ring));
        QCOMPARE(
            toString(chooseAllreduce({ "mpi", 2 << 20, 4, 1 }, table)), toString(CollectiveAlgorithm::ChunkedRing));
        QCOMPARE(toString(chooseAllreduce({ "mpi", 2 << 20, 4, 2 }, table)), toString(CollectiveAlgorithm::Library));
    }

    // ZeRO's reduce-scatters and all-gathers follow the all-reduce's crossing: on one node through the
    // shared-memory segment from 16 MiB; the two-level algorithm is all-reduce only, so its row (and a
    // layout's choice of it) gives the ring.
    void shardCollectives()
    {
        CollectiveTuning tuning;
        QCOMPARE(toString(tuning.shardOptions(1 << 20, 2).algorithm), toString(CollectiveAlgorithm::Library));
        QCOMPARE(toString(tuning.shardOptions(64 << 20, 2).algorithm), toString(CollectiveAlgorithm::SharedMemory));
        QCOMPARE(toString(tuning.shardOptions(16 << 20, 2).algorithm), toString(CollectiveAlgorithm::SharedMemory));
        QCOMPARE(toString(tuning.shardOptions((16 << 20) - 4, 2).algorithm), toString(CollectiveAlgorithm::Library));
        tuning.nodes = 2;
        QCOMPARE(toString(tuning.shardOptions(64 << 20, 4).algorithm), toString(CollectiveAlgorithm::Ring));
        QCOMPARE(toString(chooseAllreduce({ "mpi", 64 << 20, 4, 2 })), toString(CollectiveAlgorithm::Hierarchical));
        tuning.backend = "nccl";
        QCOMPARE(toString(tuning.shardOptions(64 << 20, 4).algorithm), toString(CollectiveAlgorithm::Library));
        tuning.chunkBytes = 4096;
        for (auto [fixed, expected] : { std::pair { CollectiveAlgorithm::Library, CollectiveAlgorithm::Library },
                 std::pair { CollectiveAlgorithm::Ring, CollectiveAlgorithm::Ring },
                 std::pair { CollectiveAlgorithm::ChunkedRing, CollectiveAlgorithm::ChunkedRing },
                 std::pair { CollectiveAlgorithm::Hierarchical, CollectiveAlgorithm::Ring },
                 std::pair { CollectiveAlgorithm::SharedMemory, CollectiveAlgorithm::SharedMemory } }) {
            tuning.algorithm = fixed;
            const CollectiveOptions o = tuning.shardOptions(100, 4);
            QCOMPARE(toString(o.algorithm), toString(expected));
            QCOMPARE(o.chunkBytes, std::size_t(4096));
        }
    }

    void nodesOfAGroup()
    {
        QCOMPARE(nodesSpanned({ 0, 1, 2, 3 }, 8), 1);
        QCOMPARE(nodesSpanned({ 0, 8 }, 8), 2);
        QCOMPARE(nodesSpanned({ 1, 9, 17 }, 8), 3);
        QCOMPARE(nodesSpanned({}, 8), 1);
        QCOMPARE(nodesSpanned({ 0, 5 }, 0), 2); // a nonsense node size is treated as one rank per node
    }
};

QTEST_GUILESS_MAIN(TstAlgorithmTuner)
#include "tst_algorithmtuner.moc"
