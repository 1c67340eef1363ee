// pollUntil's waits: a condition that becomes true ends the wait, a timeout ends it with false, and a long
// wait sleeps instead of spinning, so a rank waiting for its pipeline input leaves its core to the rank
// that computes when there are more ranks than cores. Counted in polls, not seconds: the bound on polls
// holds however busy the machine is (a busier machine only means longer sleeps and fewer polls).

#include "engine/comm/PollUntil.h"

#include <QTest>

using namespace loom::comm;
using namespace std::chrono;

class TestPollUntil : public QObject {
    Q_OBJECT

private slots:
    void trueEndsTheWait()
    {
        int polls = 0;
        QVERIFY(pollUntil([&] { return ++polls == 5; }, duration<double>(60)));
        QCOMPARE(polls, 5);
    }

    void timeoutReturnsFalse()
    {
        int polls = 0;
        QVERIFY(!pollUntil([&] { return ++polls < 0; }, duration<double>(0.05)));
        QVERIFY(polls > 0);
    }

    void hugeTimeoutDoesNotOverflow()
    {
        int polls = 0;
        QVERIFY(pollUntil([&] { return ++polls == 200; }, duration<double>(1e300)));
    }

    // A wait of at least 0.3 s polls a few hundred times: the spins, the yields, then sleeps of an eighth of
    // the time waited (10 µs to 1 ms). Spinning (with or without sched_yield) polls millions of times a
    // second on a free core and thousands even at 1 % of one.
    void longWaitSleeps()
    {
        const auto start = steady_clock::now();
        long polls = 0;
        QVERIFY(pollUntil(
            [&] {
                ++polls;
                return steady_clock::now() - start >= milliseconds(300);
            },
            duration<double>(60)));
        const long bound = PollBackoff::kSpins + PollBackoff::kYields + 100 + 300000 / PollBackoff::kMaxSleep.count();
        QVERIFY2(polls <= bound, qPrintable(QStringLiteral("%1 polls in 0.3 s, at most %2").arg(polls).arg(bound)));
    }

    void backoffSchedule_data()
    {
        QTest::addColumn<unsigned>("poll");
        QTest::addColumn<int>("waitedUs");
        QTest::addColumn<int>("sleepUs");
        QTest::newRow("spinning") << 0u << 0 << 0;
        QTest::newRow("yielding") << (PollBackoff::kSpins + PollBackoff::kYields - 1) << 5000 << 0;
        QTest::newRow("first sleep") << (PollBackoff::kSpins + PollBackoff::kYields) << 20 << 10;
        QTest::newRow("an eighth of the wait") << 1000u << 1600 << 200;
        QTest::newRow("at most 250 us") << 1000u << 1000000 << 250;
    }

    void backoffSchedule()
    {
        QFETCH(unsigned, poll);
        QFETCH(int, waitedUs);
        QFETCH(int, sleepUs);
        QCOMPARE(PollBackoff::sleepAfter(poll, microseconds(waitedUs)).count(), sleepUs);
    }
};

QTEST_MAIN(TestPollUntil)
#include "tst_polluntil.moc"
