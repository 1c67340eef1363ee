// The simulated schedule with interleaving (issue 36): events carry the virtual stage, rows the rank's pipeline
// stage; an event's tooltip names both, so the row "rank 0 · stage 0" is not contradicted by a bare "stage 2".

#include "ViewsTest.h"
#include "engine/plan/CostModel.h"
#include "engine/plan/LayoutValidator.h"
#include "views/TimelineData.h"
#include "views/TimelineView.h"

using namespace loom;
using namespace loom::views;

class TestScheduleStages : public QObject {
    Q_OBJECT

    static plan::Layout interleaved(std::int64_t vpp)
    {
        plan::Layout l = test::tinyLayout(); // tp 2, pp 2, dp 2, four blocks
        l.parallel.schedule = plan::ScheduleKind::Interleaved;
        l.parallel.vpp = vpp;
        l.parallel.stages.clear();
        return l;
    }

private slots:
    void tooltipNamesThePhysicalAndTheVirtualStage_data()
    {
        QTest::addColumn<qint64>("vpp");
        QTest::addColumn<int>("chunk");
        QTest::addColumn<QString>("expected");
        // Rank 0 (pipeline stage 0 of 2) holds virtual stage 0 (chunk 0) and virtual stage 2 (chunk 1).
        QTest::newRow("chunk 0") << qint64(2) << 0 << QStringLiteral(", stage 0,");
        QTest::newRow("chunk 1") << qint64(2) << 1 << QStringLiteral(", stage 0 (virtual stage 2)");
    }
    void tooltipNamesThePhysicalAndTheVirtualStage()
    {
        QFETCH(qint64, vpp);
        QFETCH(int, chunk);
        QFETCH(QString, expected);
        const plan::Layout l = interleaved(vpp);
        const auto problems = plan::validateLayout(l);
        QVERIFY2(problems.errors().empty(), problems.format().c_str());
        const plan::Prediction p = plan::predict(l);
        TimelineData data;
        data.setEvents(p.events);
        std::int64_t index = -1;
        for (std::size_t i = 0; i < data.events().size() && index < 0; ++i) {
            const auto& e = data.events()[i];
            if (e.rank == 0 && e.chunk == chunk && e.kind == trace::EventKind::Forward)
                index = std::int64_t(i);
        }
        QVERIFY(index >= 0);
        const int row = data.rowOf(data.events()[std::size_t(index)]);
        QVERIFY(row >= 0);
        QCOMPARE(data.rows()[std::size_t(row)].stage, 0); // the row reads "rank 0 · stage 0"
        TimelineView view;
        view.setTimeline(data);
        const QString tip = view.eventDescription(index);
        QVERIFY2(tip.contains(expected), qPrintable(tip));
        QVERIFY2(!tip.contains(QStringLiteral(", stage 2")), qPrintable(tip));
    }
};

QTEST_MAIN(TestScheduleStages)
#include "tst_schedulestages.moc"
