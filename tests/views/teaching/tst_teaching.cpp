// The teaching views on their own: the all-reduce stepper (its groups, steps, table and arrows on the map),
// the Explain dock, the lesson highlight following its widget, and the Layers table's per-device memory.
#include "views/ExplainDock.h"
#include "views/LayerModel.h"
#include "views/TopologyScene.h"
#include "views/teaching/AllReduceStepper.h"
#include "views/teaching/LessonDock.h"

#include "tests/views/ViewsTest.h"

#include <QGraphicsObject>
#include <QLabel>
#include <QMainWindow>
#include <QPushButton>
#include <QTableWidget>
#include <QTextBrowser>

using namespace loom;
using namespace loom::views;

namespace {
QGraphicsObject* overlayOf(const TopologyScene& scene)
{
    for (QGraphicsItem* item : scene.items())
        if (auto* o = item->toGraphicsObject())
            return o;
    return nullptr;
}
} // namespace

class TestTeaching : public QObject {
    Q_OBJECT
private slots:
    void stepperOnTheExample()
    {
        // tiny-local: tp 2 · pp 2 · dp 2, order tp-pp-dp: DP group of rank 0 = {0, 4}, TP group = {0, 1}.
        const plan::Layout l = test::tinyLayout();
        TopologyScene scene;
        scene.show(l, nullptr);
        AllReduceStepper stepper(&scene);
        stepper.show();
        stepper.setLayout(l);
        QCOMPARE(stepper.groupKind(), QStringLiteral("dp"));
        QCOMPARE(stepper.ranks(), (std::vector<std::int64_t> { 0, 4 }));
        QCOMPARE(stepper.stepCount(), 2); // 2(n−1)
        QCOMPARE(stepper.step(), 0);
        // Pipeline rank 0 holds the embedding and blocks 0-1; a quarter... its parameters ÷ tp, 4 bytes each.
        const auto& m = l.model;
        const double expected = double(m.embeddingParameters() + 2 * m.blockParameters()) / 2.0 * 4.0;
        QCOMPARE(stepper.bufferBytes(), expected);
        QSignalSpy changed(&stepper, &AllReduceStepper::stepChanged);
        stepper.next();
        QCOMPARE(changed.count(), 1);
        QCOMPARE(stepper.table()->rowCount(), 2);
        QCOMPARE(stepper.table()->item(0, 0)->text(), QStringLiteral("0"));
        QCOMPARE(stepper.table()->item(0, 1)->text(), QStringLiteral("4"));
        QGraphicsObject* overlay = overlayOf(scene);
        QVERIFY(overlay);
        QVERIFY(overlay->isVisible());
        stepper.next();
        stepper.next(); // stays at the end
        QCOMPARE(stepper.step(), 2);
        // The TP group, and back to step 0.
        stepper.setGroupKind(QStringLiteral("tp"));
        QCOMPARE(stepper.ranks(), (std::vector<std::int64_t> { 0, 1 }));
        QCOMPARE(stepper.step(), 0);
        QCOMPARE(stepper.bufferBytes(), double(l.parallel.microBatch * m.seqLen * m.hidden) * 4.0);
        // A new shape rebuilds the scene (deleting its items); the stepper draws again.
        plan::Layout wide = l;
        wide.parallel.tp = 1;
        wide.parallel.dp = 4;
        scene.show(wide, nullptr);
        stepper.setLayout(wide);
        stepper.setGroupKind(QStringLiteral("dp"));
        QCOMPARE(stepper.ranks(), (std::vector<std::int64_t> { 0, 2, 4, 6 }));
        QCOMPARE(stepper.stepCount(), 6);
        stepper.setStep(3);
        QVERIFY(overlayOf(scene));
        QVERIFY(stepper.summary()->text().contains(QStringLiteral("6 steps")));
        stepper.hide();
        QVERIFY(!overlayOf(scene)->isVisible());
    }

    void stepperOnAnEmptyScene()
    {
        // Before any layout the scene has no rect of its own: asking for it must not recurse into the arrows.
        TopologyScene scene;
        AllReduceStepper stepper(&scene);
        stepper.show();
        stepper.setLayout(plan::Layout {});
        QCOMPARE(stepper.stepCount(), 0);
        QVERIFY(scene.sceneRect().isEmpty());
    }

    void stepperAcrossNodes()
    {
        // megatron-1t: a DP group has one member on each of 6 nodes: the hierarchical algorithm is a ring
        // across the nodes, every step on InfiniBand.
        const plan::Layout l = test::megatron1t();
        TopologyScene scene;
        scene.show(l, nullptr);
        AllReduceStepper stepper(&scene);
        stepper.setLayout(l);
        stepper.setAlgorithm(QStringLiteral("hierarchical"));
        QCOMPARE(stepper.ranks().size(), std::size_t(6));
        QCOMPARE(stepper.stepCount(), 10);
        QCOMPARE(stepper.interNodeBytes(), stepper.bufferBytes() * 10.0 / 6.0);
        // A TP group stays in its node: nothing crosses.
        stepper.setGroupKind(QStringLiteral("tp"));
        QCOMPARE(stepper.stepCount(), 14);
        QCOMPARE(stepper.interNodeBytes(), 0.0);
    }

    void explainDockShowsItsSource()
    {
        QString asked;
        ExplainDock dock([&asked](const QString& key) {
            asked = key;
            return key == QLatin1String("bubble") ? QStringLiteral("<b>bubble</b> = (p−1)/(m+p−1)") : QString();
        });
        QSignalSpy changed(&dock, &ExplainDock::topicChanged);
        QVERIFY(dock.showTopic(QStringLiteral("bubble")));
        QCOMPARE(dock.topic(), QStringLiteral("bubble"));
        QVERIFY(dock.text().contains(QStringLiteral("(p−1)/(m+p−1)")));
        QCOMPARE(changed.count(), 1);
        QVERIFY(dock.showTopic(QStringLiteral("measured.busbw")));
        QCOMPARE(asked, QStringLiteral("measured.busbw"));
        QVERIFY(dock.text().contains(QStringLiteral("No value yet")));
        QVERIFY(!dock.showTopic(QStringLiteral("bogus")));
        QCOMPARE(dock.topic(), QStringLiteral("measured.busbw"));
    }

    void highlightFollowsItsWidget()
    {
        QMainWindow window;
        auto* central = new QWidget;
        auto* button = new QPushButton(QStringLiteral("target"), central);
        button->setGeometry(100, 50, 80, 30);
        window.setCentralWidget(central);
        window.resize(400, 300);
        window.show();
        LessonHighlight highlight(&window);
        highlight.setTarget(button);
        QVERIFY(highlight.isVisible());
        const QPoint at = button->mapTo(&window, QPoint(0, 0));
        QCOMPARE(highlight.geometry(), QRect(at, button->size()).adjusted(-4, -4, 4, 4));
        button->move(200, 100);
        QCOMPARE(highlight.geometry().topLeft(), button->mapTo(&window, QPoint(0, 0)) - QPoint(4, 4));
        button->hide();
        QVERIFY(!highlight.isVisible());
        highlight.setTarget(nullptr);
        QVERIFY(!highlight.isVisible());
    }

    void layersShowWhatOneDeviceHolds()
    {
        // megatron-1t: a block is 125.83 GB whole; on a device of tp 8 in fp16 it is 1/8 of it.
        LayerModel model;
        model.setLayout(test::megatron1t());
        const QModelIndex block = model.index(model.rowOfBlock(0), LayerModel::Memory);
        const double whole = double(test::megatron1t().model.blockParameters()) * 16.0;
        QCOMPARE(model.data(block).toString(), QLocale().toString(whole / 8 / 1e9, 'f', 2) + QStringLiteral(" GB"));
        const QString tip = model.data(block, Qt::ToolTipRole).toString();
        QVERIFY2(tip.contains(QLocale().toString(whole / 1e9, 'f', 2) + QStringLiteral(" GB")), qPrintable(tip));
        QVERIFY(tip.contains(QStringLiteral("tp 8")));
        // ZeRO-1 divides the optimizer state by dp = 6: 2 + 2 + 12/6 = 6 bytes a parameter.
        plan::Layout zero = test::megatron1t();
        zero.memory.zero = 1;
        QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
        model.setLayout(zero);
        QCOMPARE(changed.count(), 1);
        const double params = double(zero.model.blockParameters());
        QCOMPARE(
            model.data(block).toString(), QLocale().toString(params / 8 * 6 / 1e9, 'f', 2) + QStringLiteral(" GB"));
        QVERIFY(model.data(block, Qt::ToolTipRole).toString().contains(QStringLiteral("ZeRO-1")));
    }
};

QTEST_MAIN(TestTeaching)
#include "tst_teaching.moc"
