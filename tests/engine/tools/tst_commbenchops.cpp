// loom-commbench's collectives come from one descriptor table (engine/tools/CommBenchOptions.h, as nccl-tests
// keeps one file per collective): every --op word parses to its descriptor, an unknown word is refused with
// the table's words, and each descriptor's buffers and bus bandwidth are nccl-tests' for that collective.
#include "engine/tools/CommBenchOptions.h"

#include <QTest>

using namespace loom;
using namespace loom::tools;

class TestCommBenchOps : public QObject {
    Q_OBJECT
private slots:
    void everyOpParses_data()
    {
        QTest::addColumn<int>("index");
        for (std::size_t i = 0; i < std::size(kCollectives); ++i)
            QTest::newRow(kCollectives[i].name.data()) << int(i);
    }

    void everyOpParses()
    {
        QFETCH(int, index);
        const CollectiveDescriptor& d = kCollectives[index];
        std::string error;
        bool help = false;
        const auto o = parseCommBenchOptions({ "--op", std::string(d.name) }, error, help);
        QVERIFY2(o, error.c_str());
        QCOMPARE(o->op, std::string(d.name));
        QCOMPARE(findCollective(o->op), &d);
        QVERIFY(collectiveNames().find(d.name) != std::string::npos);
        // Gathered sizes hold one block per rank on the gathered side; in-place ones have no output buffer.
        QCOMPARE(d.perRank, d.op == BenchOp::AllGather || d.op == BenchOp::ReduceScatter || d.op == BenchOp::AllToAll);
        QCOMPARE(d.outputBlocks < 0, d.op == BenchOp::AllReduce || d.op == BenchOp::Broadcast);
    }

    void unknownOpListsTheTable()
    {
        std::string error;
        bool help = false;
        QVERIFY(!parseCommBenchOptions({ "--op", "allreduc" }, error, help));
        QVERIFY2(error.find(collectiveNames()) != std::string::npos, error.c_str());
        QCOMPARE(
            collectiveNames(), std::string("allreduce, allgather, reducescatter, broadcast, sendrecv or alltoall"));
        QVERIFY(!findCollective("allreduc"));
    }

    // nccl-tests' bus bandwidth factors at 4 ranks: all-reduce 2(n-1)/n, gathers (n-1)/n, point-to-point 1.
    void busBandwidth()
    {
        QCOMPARE(trace::busBandwidthFactor(findCollective("allreduce")->busKind, 4), 1.5);
        QCOMPARE(trace::busBandwidthFactor(findCollective("allgather")->busKind, 4), 0.75);
        QCOMPARE(trace::busBandwidthFactor(findCollective("reducescatter")->busKind, 4), 0.75);
        QCOMPARE(trace::busBandwidthFactor(findCollective("sendrecv")->busKind, 4), 1.0);
        QCOMPARE(trace::busBandwidthFactor(findCollective("broadcast")->busKind, 4), 1.0);
    }
};

QTEST_GUILESS_MAIN(TestCommBenchOps)
#include "tst_commbenchops.moc"
