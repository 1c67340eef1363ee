// The flight record of a rank's last collectives (FlightRecorder): newest first, at most kSlots, each with
// operation, group, sequence number, bytes and state, so a hung rank can say where it waits.
#include "engine/comm/FlightRecorder.h"

#include <QRegularExpression>
#include <QTest>

using loom::comm::FlightRecorder;

class TestFlightRecorder : public QObject {
    Q_OBJECT
private slots:
    void lastCollectivesNewestFirst()
    {
        FlightRecorder& r = FlightRecorder::instance();
        QCOMPARE(QString::fromStdString(r.text()), QStringLiteral("none"));
        std::uint64_t last = 0;
        for (std::uint64_t seq = 1; seq <= 10; ++seq) {
            last = r.start("all-reduce", "DP group of tp=0 pp=0", seq, 4096 * seq);
            if (seq < 10)
                r.finish(last, seq != 9);
        }
        const QString text = QString::fromStdString(r.text());
        const QStringList entries = text.split(QStringLiteral("; "));
        QCOMPARE(int(entries.size()), int(FlightRecorder::kSlots));
        QVERIFY2(
            entries[0].startsWith(QStringLiteral("all-reduce #10 on DP group of tp=0 pp=0, 40960 bytes, running for")),
            qPrintable(text));
        QVERIFY2(
            entries[1].startsWith(QStringLiteral("all-reduce #9 on DP group of tp=0 pp=0, 36864 bytes, failed after")),
            qPrintable(text));
        QVERIFY2(entries[2].contains(QStringLiteral("#8 ")) && entries[2].contains(QStringLiteral("done in")),
            qPrintable(text));
        QVERIFY2(entries.last().contains(QStringLiteral("#3 ")), qPrintable(text)); // #1 and #2 have gone
        r.finish(last, true);
        QVERIFY(QString::fromStdString(r.text()).startsWith(QStringLiteral("all-reduce #10 on DP group of tp=0 pp=0, "
                                                                           "40960 bytes, done in")));
        r.finish(1, true); // a ticket long overwritten changes nothing
        QVERIFY(!QString::fromStdString(r.text()).contains(QStringLiteral("#1 ")));
    }

    // Sends and receives enter the record too, by the peer's global rank and without a sequence number.
    void pointToPointNamesThePeer()
    {
        FlightRecorder& r = FlightRecorder::instance();
        const std::uint64_t send = r.startPointToPoint(true, 5, "PP group of tp=0 dp=1", 65536);
        r.finish(send, true);
        const std::uint64_t recv = r.startPointToPoint(false, 3, "PP group of tp=0 dp=0", 4096);
        QString text = QString::fromStdString(r.text());
        QVERIFY2(
            text.startsWith(QStringLiteral("receive from rank 3 on PP group of tp=0 dp=0, 4096 bytes, running for ")),
            qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("; send to rank 5 on PP group of tp=0 dp=1, 65536 bytes, done in ")),
            qPrintable(text));
        r.finish(recv, false);
        text = QString::fromStdString(r.text());
        QVERIFY2(
            text.startsWith(QStringLiteral("receive from rank 3 on PP group of tp=0 dp=0, 4096 bytes, failed after")),
            qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("all-reduce #10 on DP group")), qPrintable(text)); // still there
    }
};

QTEST_GUILESS_MAIN(TestFlightRecorder)
#include "tst_flightrecorder.moc"
