// Faults end in a clear error within a bounded time, never a silent hang. Each scenario runs
// comm_fault_driver under mpirun with LOOM_COMM_TIMEOUT_S=2.
#include <QElapsedTimer>
#include <QProcess>
#include <QTest>

class TestCommFaults : public QObject {
    Q_OBJECT

    struct Run {
        int exitCode = -1;
        qint64 ms = 0;
        QString output;
    };

    Run mpirun(const QString& scenario, int ranks)
    {
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("LOOM_COMM_TIMEOUT_S"), QStringLiteral("2"));
        p.setProcessEnvironment(env);
        p.setProcessChannelMode(QProcess::MergedChannels);
        QElapsedTimer timer;
        timer.start();
        p.start(QStringLiteral(MPIEXEC),
            { QStringLiteral("--allow-run-as-root"), QStringLiteral("--oversubscribe"), QStringLiteral("-np"),
                QString::number(ranks), QStringLiteral(DRIVER), scenario });
        if (!p.waitForFinished(60000)) {
            p.kill();
            p.waitForFinished();
            return { -1, timer.elapsed(), QString::fromUtf8(p.readAll()) };
        }
        return { p.exitCode(), timer.elapsed(), QString::fromUtf8(p.readAll()) };
    }

private slots:
    void mismatchedCounts()
    {
        const Run r = mpirun(QStringLiteral("mismatch"), 3);
        QVERIFY2(r.exitCode != 0, qPrintable(r.output));
        // Every rank reports it, naming the operation, the group, and who called what.
        for (int rank = 0; rank < 3; ++rank)
            QVERIFY2(r.output.contains(QStringLiteral("rank %1: CommError: all-reduce #1 (").arg(rank)),
                qPrintable(r.output));
        QVERIFY2(r.output.contains(
                     QStringLiteral("on world [0, 1, 2]: the members disagree (rank [0] called all-reduce with 1000 "
                                    "fp32 elements; ranks [1, 2] called all-reduce with 1024 fp32 elements)")),
            qPrintable(r.output));
        QVERIFY(r.ms < 20000);
    }

    void mismatchedTypes()
    {
        const Run r = mpirun(QStringLiteral("type-mismatch"), 2);
        QVERIFY2(r.output.contains(QStringLiteral("512 fp16 elements"))
                && r.output.contains(QStringLiteral("512 fp32 elements")),
            qPrintable(r.output));
    }

    void silentPeerTimesOut()
    {
        const Run r = mpirun(QStringLiteral("silent-peer"), 2);
        QVERIFY2(r.exitCode != 0, qPrintable(r.output));
        QVERIFY2(r.output.contains(QStringLiteral(
                     "rank 0: CommError: all-reduce #1 (1024 fp32, library) on world [0, 1] timed out after 2 s")),
            qPrintable(r.output));
        QVERIFY2(r.ms < 20000, qPrintable(QString::number(r.ms)));
    }

    // A member that never arrives while the shared-memory segment is being made: the others time out, and
    // the segment's name does not stay behind in /dev/shm.
    void silentPeerLeavesNoSegment()
    {
        const Run r = mpirun(QStringLiteral("shm-silent-peer"), 2);
        QVERIFY2(r.exitCode != 0, qPrintable(r.output));
        QVERIFY2(r.output.contains(QStringLiteral("rank 0: CommError: all-reduce #1 (1024 fp32, shm) on world [0, 1]"))
                && r.output.contains(QStringLiteral("timed out after 2 s")),
            qPrintable(r.output));
        QVERIFY2(r.output.contains(QStringLiteral("rank 0: segments left in /dev/shm: 0")), qPrintable(r.output));
        QVERIFY2(r.ms < 20000, qPrintable(QString::number(r.ms)));
    }

    void silentSenderTimesOut()
    {
        const Run r = mpirun(QStringLiteral("silent-sender"), 2);
        QVERIFY2(r.output.contains(QStringLiteral(
                     "rank 0: CommError: receive of 1024 bytes from rank 1 on world [0, 1] timed out after 2 s")),
            qPrintable(r.output));
        QVERIFY2(r.ms < 20000, qPrintable(QString::number(r.ms)));
    }

    // A rank stuck in a receive says so in its flight record, naming the peer it waits for (the record held
    // collectives only: a pipeline stage waiting for its neighbour showed its last all-reduce, done).
    void stuckReceiveNamesItsPeer()
    {
        const Run r = mpirun(QStringLiteral("stuck-recv"), 2);
        QVERIFY2(r.exitCode != 0, qPrintable(r.output));
        QVERIFY2(r.output.contains(
                     QStringLiteral("rank 0: waiting: receive from rank 1 on world, 1024 bytes, running for ")),
            qPrintable(r.output));
        QVERIFY2(
            r.output.contains(QStringLiteral("rank 0: after: receive from rank 1 on world, 1024 bytes, failed after ")),
            qPrintable(r.output));
    }

    void timedOutReceiveIsWithdrawn()
    {
        // The abandoned receive must not swallow the peer's first late message.
        const Run r = mpirun(QStringLiteral("late-message"), 2);
        QVERIFY2(r.output.contains(QStringLiteral("rank 0: first receive timed out")), qPrintable(r.output));
        QVERIFY2(r.output.contains(QStringLiteral("rank 0: next receive got 111")), qPrintable(r.output));
    }

    void mismatchedCodecOptions()
    {
        const Run r = mpirun(QStringLiteral("block-mismatch"), 2);
        QVERIFY2(r.output.contains(QStringLiteral("the members disagree"))
                && r.output.contains(QStringLiteral("codec block")),
            qPrintable(r.output));
    }

    void deadPeerEndsTheJob()
    {
        const Run r = mpirun(QStringLiteral("peer-dies"), 3);
        QVERIFY2(r.exitCode != 0, qPrintable(r.output));
        // mpirun notices the death and ends the job; its message names the rank.
        QVERIFY2(r.output.contains(QStringLiteral("rank 1")), qPrintable(r.output));
        QVERIFY2(r.ms < 20000, qPrintable(QString::number(r.ms)));
    }
};

QTEST_GUILESS_MAIN(TestCommFaults)
#include "tst_comm_faults.moc"
