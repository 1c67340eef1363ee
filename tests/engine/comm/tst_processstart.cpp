// comm::processStartFrom: rank, world size, local rank and rendezvous from mpirun's, Slurm's or Loom's
// environment variables, and clear messages for bad values.
#include "engine/comm/ProcessStart.h"

#include <QTest>

#include <map>
#include <stdexcept>
#include <string>

using loom::comm::ProcessStart;
using loom::comm::Rendezvous;
using Env = std::map<std::string, std::string>;
Q_DECLARE_METATYPE(Env)

namespace {

ProcessStart startFrom(const Env& env)
{
    return loom::comm::processStartFrom([&](const char* name) -> const char* {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
    });
}

} // namespace

class TestProcessStart : public QObject {
    Q_OBJECT
private slots:
    void starters_data()
    {
        QTest::addColumn<Env>("env");
        QTest::addColumn<int>("rank");
        QTest::addColumn<int>("size");
        QTest::addColumn<int>("local");
        QTest::addColumn<QString>("source");
        QTest::addColumn<QString>("job");
        QTest::newRow("nothing: one process") << Env {} << 0 << 1 << 0 << "one process"
                                              << "";
        QTest::newRow("mpirun") << Env { { "OMPI_COMM_WORLD_RANK", "3" }, { "OMPI_COMM_WORLD_SIZE", "6" },
            { "OMPI_COMM_WORLD_LOCAL_RANK", "1" }, { "OMPI_MCA_ess_base_jobid", "912261121" } }
                                << 3 << 6 << 1 << "mpirun"
                                << "mpirun-912261121";
        QTest::newRow("slurm") << Env { { "SLURM_PROCID", "5" }, { "SLURM_NTASKS", "8" }, { "SLURM_LOCALID", "1" },
            { "SLURM_JOB_ID", "4242" }, { "SLURM_STEP_ID", "2" } }
                               << 5 << 8 << 1 << "slurm"
                               << "slurm-4242.2";
        QTest::newRow("loom, local rank defaults to the rank")
            << Env { { "LOOM_RANK", "2" }, { "LOOM_WORLD_SIZE", "4" } } << 2 << 4 << 2 << "LOOM_RANK"
            << "";
        QTest::newRow("LOOM_RANK wins over mpirun's")
            << Env { { "LOOM_RANK", "1" }, { "LOOM_WORLD_SIZE", "2" }, { "LOOM_LOCAL_RANK", "0" },
                   { "OMPI_COMM_WORLD_RANK", "0" }, { "OMPI_COMM_WORLD_SIZE", "6" }, { "LOOM_JOB_ID", "run-7" } }
            << 1 << 2 << 0 << "LOOM_RANK"
            << "run-7";
        QTest::newRow("mpirun wins over slurm (mpirun inside an allocation)") << Env { { "OMPI_COMM_WORLD_RANK", "1" },
            { "OMPI_COMM_WORLD_SIZE", "2" }, { "SLURM_PROCID", "0" }, { "SLURM_NTASKS", "1" } }
                                                                              << 1 << 2 << 1 << "mpirun"
                                                                              << "";
    }
    void starters()
    {
        QFETCH(Env, env);
        QFETCH(int, rank);
        QFETCH(int, size);
        QFETCH(int, local);
        QFETCH(QString, source);
        QFETCH(QString, job);
        const ProcessStart s = startFrom(env);
        QCOMPARE(s.rank, rank);
        QCOMPARE(s.size, size);
        QCOMPARE(s.localRank, local);
        QCOMPARE(QString::fromStdString(s.source), source);
        QCOMPARE(QString::fromStdString(s.jobId), job);
        QVERIFY(s.rendezvous.kind == Rendezvous::Kind::None);
    }

    void rendezvous()
    {
        const ProcessStart tcp
            = startFrom({ { "LOOM_RANK", "0" }, { "LOOM_WORLD_SIZE", "2" }, { "LOOM_RENDEZVOUS", "node7:29500" } });
        QVERIFY(tcp.rendezvous.kind == Rendezvous::Kind::Tcp);
        QCOMPARE(QString::fromStdString(tcp.rendezvous.host), QStringLiteral("node7"));
        QCOMPARE(tcp.rendezvous.port, 29500);
        const ProcessStart folder = startFrom({ { "LOOM_RENDEZVOUS", "/shared/runs/7/rendezvous" } });
        QVERIFY(folder.rendezvous.kind == Rendezvous::Kind::Folder);
        QCOMPARE(QString::fromStdString(folder.rendezvous.folder), QStringLiteral("/shared/runs/7/rendezvous"));
    }

    void badValues_data()
    {
        QTest::addColumn<Env>("env");
        QTest::addColumn<QString>("message");
        QTest::newRow("rank not a number") << Env { { "LOOM_RANK", "one" }, { "LOOM_WORLD_SIZE", "2" } }
                                           << "LOOM_RANK=\"one\" is not a non-negative whole number";
        QTest::newRow("rank outside the world")
            << Env { { "OMPI_COMM_WORLD_RANK", "4" }, { "OMPI_COMM_WORLD_SIZE", "4" } }
            << "OMPI_COMM_WORLD_RANK=4 is outside the world of OMPI_COMM_WORLD_SIZE=4";
        QTest::newRow("size missing") << Env { { "LOOM_RANK", "0" } } << "LOOM_WORLD_SIZE is not set";
        QTest::newRow("rendezvous without a port")
            << Env { { "LOOM_RENDEZVOUS", "node7" } } << "LOOM_RENDEZVOUS=\"node7\" is neither host:port";
        QTest::newRow("rendezvous port out of range")
            << Env { { "LOOM_RENDEZVOUS", "node7:70000" } } << "LOOM_RENDEZVOUS=\"node7:70000\" is neither host:port";
    }
    void badValues()
    {
        QFETCH(Env, env);
        QFETCH(QString, message);
        try {
            startFrom(env);
            QFAIL("accepted");
        } catch (const std::invalid_argument& e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(message), e.what());
        }
    }
};

QTEST_GUILESS_MAIN(TestProcessStart)
#include "tst_processstart.moc"
