// Layout equivalence: gpt-tiny trained for 20 steps under each layout gives the single-process loss at
// every step (within 1e-4 relative). Runs loom-train under mpirun, as a user would. Built twice: with
// LAYOUT_BACKEND "mpi" (tst_layouts) and "gloo" (tst_layouts_gloo: every layout with comm.backend "gloo",
// and a 6-rank run that must match the MPI run's losses).
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include "TrainRun.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>

namespace {

constexpr int kSteps = 20;
#ifndef LAYOUT_BACKEND
#define LAYOUT_BACKEND "mpi"
#endif

// The layout with comm.backend set (kept beside any other comm fields the row sets).
QJsonObject withBackend(QJsonObject layout, const QString& backend)
{
    QJsonObject comm = layout.value("comm").toObject();
    comm.insert("backend", backend);
    layout.insert("comm", comm);
    return layout;
}

QJsonObject layout(const QString& name, int tp, int pp, int dp, const QString& schedule)
{
    return QJsonObject { { "loom_layout", 1 }, { "name", name }, { "model", "gpt-tiny" }, { "cluster", "local" },
        { "parallel",
            QJsonObject { { "tp", tp }, { "pp", pp }, { "dp", dp }, { "micro_batch", 2 }, { "global_batch", 12 },
                { "schedule", schedule } } } };
}

} // namespace

class TestLayouts : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    std::vector<double> m_baseline;

    // Runs loom-train on the layout; returns the loss of each step (empty on failure, with `log` set).
    std::vector<double> train(
        const QJsonObject& layoutIn, QString& log, const QString& backend = QStringLiteral(LAYOUT_BACKEND))
    {
        QJsonObject layoutJson = withBackend(layoutIn, backend);
        layoutJson.insert("name", layoutJson.value("name").toString() + "-" + backend);
        return loom::test::trainLosses(layoutJson, m_dir.path(), kSteps, log);
    }

private slots:
    void initTestCase()
    {
        QString log;
        m_baseline = train(layout("single", 1, 1, 1, "1f1b"), log);
        QVERIFY2(m_baseline.size() == kSteps, qPrintable(log));
        QVERIFY2(m_baseline.back() < m_baseline.front() - 0.3, "the loss must fall on the synthetic corpus");
    }

    void sameLossAsOneProcess_data()
    {
        QTest::addColumn<QJsonObject>("layout");
        for (int tp : { 1, 2 })
            for (int pp : { 1, 2, 4 })
                for (int dp : { 1, 2 })
                    for (const char* schedule : { "gpipe", "1f1b" }) {
                        if (tp * pp * dp == 1)
                            continue;
                        const QString name = QStringLiteral("tp%1-pp%2-dp%3-%4").arg(tp).arg(pp).arg(dp).arg(schedule);
                        QTest::newRow(qPrintable(name)) << layout(name, tp, pp, dp, schedule);
                    }
        QJsonObject interleaved = layout("interleaved-pp2-vpp2", 1, 2, 1, "interleaved");
        QJsonObject par = interleaved.value("parallel").toObject();
        par.insert("vpp", 2);
        interleaved.insert("parallel", par);
        QTest::newRow("interleaved pp2 vpp2") << interleaved;

        // Micro-batch groups of 4 on pp 2 (m = 6: a group of 4, then the last 2 through both chunks in turn).
        QJsonObject grouped = layout("interleaved-pp2-vpp2-group4", 1, 2, 1, "interleaved");
        par = grouped.value("parallel").toObject();
        par.insert("vpp", 2);
        par.insert("microbatch_group", 4);
        grouped.insert("parallel", par);
        QTest::newRow("interleaved pp2 vpp2 microbatch_group 4") << grouped;

        QJsonObject zero = layout("zero1-tp2-pp2-dp2", 2, 2, 2, "1f1b");
        zero.insert("memory", QJsonObject { { "zero", 1 }, { "recompute", "none" } });
        QTest::newRow("ZeRO-1") << zero;

        QJsonObject overlap = layout("overlap-small-buckets", 2, 2, 2, "1f1b");
        overlap.insert("comm",
            QJsonObject { { "overlap", true }, { "bucket_mb", 0.01 } }); // many buckets, reduced during backward
        QTest::newRow("overlap, 10 KB buckets") << overlap;

        QJsonObject recompute = layout("recompute-tp2-pp2", 2, 2, 1, "1f1b");
        recompute.insert("memory", QJsonObject { { "zero", 0 }, { "recompute", "full" } });
        QTest::newRow("full recompute") << recompute;

        QJsonObject uneven = layout("uneven-stages", 1, 2, 1, "1f1b");
        par = uneven.value("parallel").toObject();
        par.insert("stages", QJsonArray { QJsonArray { 0, 0 }, QJsonArray { 1, 3 } });
        uneven.insert("parallel", par);
        QTest::newRow("uneven stages") << uneven;

        // Llama 3's pipeline on 4 layers: pp 2, vpp 3, the first chunk only the embedding and the last only the
        // LM head ([]); the tied embedding then lives on both pipeline ranks.
        QJsonObject endChunks = layout("interleaved-pp2-vpp3-empty-ends", 1, 2, 1, "interleaved");
        par = endChunks.value("parallel").toObject();
        par.insert("vpp", 3);
        par.insert("stages",
            QJsonArray { QJsonArray {}, QJsonArray { 0, 0 }, QJsonArray { 1, 1 }, QJsonArray { 2, 2 },
                QJsonArray { 3, 3 }, QJsonArray {} });
        endChunks.insert("parallel", par);
        QTest::newRow("interleaved, embedding and head chunks alone") << endChunks;

        QTest::newRow("dp3") << layout("dp3-pp2", 1, 2, 3, "1f1b");

        QJsonObject ring = layout("ring-allreduce-dp2", 2, 1, 2, "1f1b");
        ring.insert("comm", QJsonObject { { "allreduce", "ring" }, { "bucket_mb", 0.01 } });
        QTest::newRow("ring all-reduce") << ring;

        // Loom's all-reduce through a shared-memory segment (every rank of the test is on this machine).
        QJsonObject shm = layout("shm-allreduce-dp3", 1, 2, 3, "1f1b");
        shm.insert("comm", QJsonObject { { "allreduce", "shm" }, { "bucket_mb", 0.01 } });
        QTest::newRow("shm all-reduce") << shm;
    }
    void sameLossAsOneProcess()
    {
        QFETCH(QJsonObject, layout);
        QString log;
        const auto losses = train(layout, log);
        QVERIFY2(losses.size() == kSteps, qPrintable(log));
        compare(losses, m_baseline, "one process");
    }

#ifdef LAYOUTS_GLOO // only the Gloo build compares with MPI and starts processes itself
    // mpirun -np 6 loom-train with comm.backend "gloo" trains and gives the MPI run's losses.
    void glooMatchesMpi()
    {
        const QJsonObject six = layout("six-ranks-tp2-pp1-dp3", 2, 1, 3, "1f1b");
        QString mpiLog, glooLog;
        const auto mpi = train(six, mpiLog, QStringLiteral("mpi"));
        QVERIFY2(mpi.size() == kSteps, qPrintable(mpiLog));
        const auto gloo = train(six, glooLog, QStringLiteral("gloo"));
        QVERIFY2(gloo.size() == kSteps, qPrintable(glooLog));
        QVERIFY2(glooLog.contains(QStringLiteral("gloo")), qPrintable(glooLog));
        compare(gloo, mpi, "the MPI run");
    }

    // Two processes started without mpirun (LOOM_RANK, LOOM_WORLD_SIZE, LOOM_RENDEZVOUS=127.0.0.1:port, a
    // TCP store that rank 0 serves) train like one process.
    void plainProcessStarter()
    {
        const QJsonObject dp2 = withBackend(layout("plain-start-dp2", 1, 1, 2, "1f1b"), QStringLiteral("gloo"));
        const QString file = m_dir.filePath("plain-start.json");
        QFile f(file);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(QJsonDocument(dp2).toJson());
        f.close();
        const int port = freePort();
        QVERIFY(port > 0);
        std::vector<std::unique_ptr<QProcess>> ranks;
        for (int r = 0; r < 2; ++r) {
            auto p = std::make_unique<QProcess>();
            QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
            for (const char* mpi : { "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS" })
                env.remove(QString::fromLatin1(mpi));
            env.insert("LOOM_RANK", QString::number(r));
            env.insert("LOOM_WORLD_SIZE", "2");
            env.insert("LOOM_RENDEZVOUS", QStringLiteral("127.0.0.1:%1").arg(port));
            p->setProcessEnvironment(env);
            p->setProcessChannelMode(QProcess::MergedChannels);
            QStringList args { "--layout", file, "--steps", QString::number(kSteps) };
            if (r == 0)
                args << "--metrics" << m_dir.filePath("plain-start.metrics");
            p->start(QStringLiteral(LOOM_TRAIN), args);
            ranks.push_back(std::move(p));
        }
        QString log;
        bool ok = true;
        for (auto& p : ranks) {
            ok = p->waitForFinished(240000) && p->exitCode() == 0 && ok;
            log += QString::fromUtf8(p->readAll());
        }
        QVERIFY2(ok, qPrintable(log));
        std::vector<double> losses;
        QFile m(m_dir.filePath("plain-start.metrics"));
        QVERIFY(m.open(QIODevice::ReadOnly));
        for (const QByteArray& line : m.readAll().split('\n'))
            if (!line.trimmed().isEmpty())
                losses.push_back(QJsonDocument::fromJson(line).object().value("loss").toDouble());
        QVERIFY2(losses.size() == kSteps, qPrintable(log));
        compare(losses, m_baseline, "one process");
    }
#endif // LAYOUTS_GLOO

private:
    // A TCP port nobody listens on now (the kernel's choice for port 0).
    static int freePort()
    {
        const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a {};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        int port = 0;
        if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0
            && ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
            port = ntohs(a.sin_port);
        if (fd >= 0)
            ::close(fd);
        return port;
    }

    static void compare(const std::vector<double>& losses, const std::vector<double>& reference, const char* what)
    {
        for (int s = 0; s < kSteps; ++s) {
            const double a = losses[static_cast<std::size_t>(s)], b = reference[static_cast<std::size_t>(s)];
            if (!(std::fabs(a - b) <= 1e-4 * std::fabs(b)))
                QFAIL(qPrintable(QStringLiteral("step %1: loss %2, %3 %4")
                                     .arg(s + 1)
                                     .arg(a, 0, 'g', 9)
                                     .arg(QString::fromLatin1(what))
                                     .arg(b, 0, 'g', 9)));
        }
    }
};

QTEST_GUILESS_MAIN(TestLayouts)
#include "tst_layouts.moc"
