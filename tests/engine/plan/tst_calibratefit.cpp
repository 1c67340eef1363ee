// The least squares under plan::calibrate, on rows whose answer is known: two separable columns give both
// parameters back; proportional columns move only the one carrying more of the time; a joint fit that would
// go negative moves one alone; figures keep four significant digits; the residual counts each row's events.
#include "engine/plan/CalibrateFit.h"

#include <QTest>

using namespace loom::plan::fit;

namespace {

// Rows measured exactly as a0·x0 + a1·x1, weighted count / measured with one event each.
std::vector<Row> exactRows(const std::vector<std::pair<double, double>>& terms, double x0, double x1)
{
    std::vector<Row> rows;
    for (const auto& [a0, a1] : terms) {
        const double measured = a0 * x0 + a1 * x1;
        rows.push_back({ a0, a1, measured, 1.0 / measured });
    }
    return rows;
}

} // namespace

class TestCalibrateFit : public QObject {
    Q_OBJECT
private slots:
    void separableColumnsGiveBoth_data()
    {
        QTest::addColumn<double>("x0");
        QTest::addColumn<double>("x1");
        QTest::addColumn<double>("scale0"); // of the first column's terms
        // Links: α and 1/β against 2(n-1) and 2(n-1)/n · bytes. Compute: 1/(peak·max) and 1/bandwidth
        // against FLOPs and bytes of passes of different shapes.
        QTest::newRow("latency and bandwidth") << 2e-5 << 1e-10 << 1.0;
        QTest::newRow("flops and bytes") << 5e-14 << 3e-12 << 1e11;
    }
    void separableColumnsGiveBoth()
    {
        QFETCH(double, x0);
        QFETCH(double, x1);
        QFETCH(double, scale0);
        const auto rows = exactRows(
            { { 2 * scale0, 1e6 }, { 2 * scale0, 1e8 }, { 6 * scale0, 1.5e7 }, { 6 * scale0, 1.5e9 } }, x0, x1);
        double y0 = x0 * 3, y1 = x1 / 2;
        QVERIFY(residualRms(rows, y0, y1) > 0.1);
        const Moved moved = fitTwo(rows, y0, y1);
        QVERIFY(moved.first && moved.second && !moved.proportional);
        QVERIFY2(qAbs(y0 / x0 - 1) < 1e-6, qPrintable(QString::number(y0 / x0 - 1)));
        QVERIFY2(qAbs(y1 / x1 - 1) < 1e-6, qPrintable(QString::number(y1 / x1 - 1)));
        QVERIFY(residualRms(rows, y0, y1) < 1e-6);
    }

    // One message size only: the columns are proportional; the bandwidth term carries the time and moves.
    void proportionalColumnsMoveTheLargerShare()
    {
        const auto rows = exactRows({ { 2, 1e8 }, { 4, 2e8 } }, 1e-5, 1e-10);
        double x0 = 1e-5, x1 = 2e-10;
        const Moved moved = fitTwo(rows, x0, x1);
        QVERIFY(moved.proportional);
        QVERIFY(!moved.first);
        QVERIFY(moved.second);
        QCOMPARE(x0, 1e-5);
        // With x0 held, the weighted least squares of x1 alone gives back the x1 that made the rows.
        QVERIFY(qAbs(x1 / 1e-10 - 1) < 1e-9);
    }

    // The measurements fall as the second column grows: the joint fit would make x1 negative, so x0 moves alone.
    void negativeJointFitMovesOne()
    {
        std::vector<Row> rows { { 1, 1, 10, 0.1 }, { 1, 2, 9, 1.0 / 9 }, { 1, 3, 8, 0.125 } };
        double x0 = 1, x1 = 1;
        const Moved moved = fitTwo(rows, x0, x1);
        QVERIFY(!moved.proportional);
        QVERIFY(moved.first != moved.second);
        QVERIFY(x0 > 0 && x1 > 0);
        QVERIFY(residualRms(rows, x0, x1) < residualRms(rows, 1, 1));
    }

    void fitSecondHoldsTheFirst()
    {
        const auto rows = exactRows({ { 1, 10 }, { 2, 30 } }, 0.5, 0.25);
        double x1 = 1;
        QVERIFY(fitSecond(rows, 0.5, x1));
        QVERIFY(qAbs(x1 / 0.25 - 1) < 1e-12);
        // A fixed first term that already exceeds every measurement leaves no positive x1.
        double kept = 1;
        QVERIFY(!fitSecond(rows, 100, kept));
        QCOMPARE(kept, 1.0);
    }

    void roundsToFourDigits_data()
    {
        QTest::addColumn<double>("value");
        QTest::addColumn<double>("expected");
        QTest::newRow("large") << 123456.0 << 123500.0;
        QTest::newRow("small") << 0.000123456 << 0.0001235;
        QTest::newRow("negative") << -98.7654 << -98.77;
        QTest::newRow("zero") << 0.0 << 0.0;
    }
    void roundsToFourDigits()
    {
        QFETCH(double, value);
        QFETCH(double, expected);
        QVERIFY2(qAbs(rounded(value) - expected) <= 1e-12 * qMax(1.0, qAbs(expected)),
            qPrintable(QString::number(rounded(value), 'g', 17)));
    }

    // Each row counts as weight · measured events: a row of three events outweighs one of one.
    void residualCountsEvents()
    {
        const std::vector<Row> rows { { 1, 0, 1, 3.0 }, { 1, 0, 2, 0.5 } }; // 3 events at 1 s, 1 at 2 s
        // x0 = 1: the first is exact, the second 50 % short: sqrt((3·0 + 1·0.25) / 4).
        QCOMPARE(residualRms(rows, 1, 0), 0.25);
        QCOMPARE(residualRms({}, 1, 1), 0.0);
    }
};

QTEST_MAIN(TestCalibrateFit)
#include "tst_calibratefit.moc"
