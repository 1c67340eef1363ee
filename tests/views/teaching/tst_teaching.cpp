// The teaching views on their own: the all-reduce stepper (its groups, steps, table and arrows on the map),
// the Explain dock, the lesson highlight following its widget, and the Layers table's per-device memory.
#include "engine/plan/CollectiveCost.h"
#include "views/Colors.h"
#include "views/Explain.h"
#include "views/ExplainDock.h"
#include "views/LayerModel.h"
#include "views/LayoutAnalysis.h"
#include "views/PredictionPanel.h"
#include "views/TopologyScene.h"
#include "views/Units.h"
#include "views/teaching/AllReduceStepper.h"
#include "views/teaching/LessonDock.h"

#include "tests/views/ViewsTest.h"
#include "tests/views/teaching/LessonTest.h"

#include <QComboBox>
#include <QDockWidget>
#include <QGraphicsObject>
#include <QLabel>
#include <QMainWindow>
#include <QPushButton>
#include <QRadioButton>
#include <QStandardPaths>
#include <QTableWidget>
#include <QTextBrowser>
#include <QTextDocument>

using namespace loom;
using namespace loom::views;
using loom::views::test::satisfy;

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

    // Issue 36: the stepper has a speed, back and forward, and To end, all through clicks; it shows what
    // NCCL's tuner would pick (the planner's plan::ncclCollective) for the group on the layout's cluster, and
    // lesson 10's text names the same choice.
    void stepperControlsAndNccl()
    {
        std::vector<Lesson> all = loadLessons(profiles::BuiltinProfiles::instance(), nullptr);
        const auto lesson = std::find_if(all.begin(), all.end(), [](const Lesson& l) { return l.id == "topology"; });
        QVERIFY(lesson != all.end());
        const plan::Layout l = lesson->layout;
        TopologyScene scene;
        scene.show(l, nullptr);
        AllReduceStepper stepper(&scene);
        stepper.resize(1200, 400);
        stepper.show();
        QVERIFY(QTest::qWaitForWindowExposed(&stepper));
        stepper.setLayout(l);
        const int count = stepper.stepCount();
        QVERIFY(count > 20);
        QTest::mouseClick(stepper.endButton(), Qt::LeftButton);
        QCOMPARE(stepper.step(), count);
        QVERIFY(!stepper.endButton()->isEnabled());
        QTest::mouseClick(stepper.backButton(), Qt::LeftButton);
        QCOMPARE(stepper.step(), count - 1);
        QTest::mouseClick(stepper.nextButton(), Qt::LeftButton);
        QCOMPARE(stepper.step(), count);
        // Faster: the speed box by keyboard, as a learner would pick it.
        QCOMPARE(stepper.speed(), 2);
        stepper.speedBox()->setFocus();
        QTest::keyClick(stepper.speedBox(), Qt::Key_End);
        QCOMPARE(stepper.speed(), 20);
        // Play from the end starts again and runs to the end on its own, then stops.
        QTest::mouseClick(stepper.playButton(), Qt::LeftButton);
        QVERIFY(stepper.playing());
        QVERIFY(stepper.step() < count);
        QTRY_VERIFY_WITH_TIMEOUT(stepper.step() == count && !stepper.playButton()->isChecked(), 120000);
        // To end while playing stops the play.
        QTest::mouseClick(stepper.playButton(), Qt::LeftButton);
        QVERIFY(stepper.playing());
        QTest::mouseClick(stepper.endButton(), Qt::LeftButton);
        QVERIFY(!stepper.playing());
        QCOMPARE(stepper.step(), count);

        // NCCL's choice for this group, from the planner's model of its tuner.
        const plan::CollectiveTime t = plan::ncclCollective(l.cluster, plan::Collective::AllReduce,
            stepper.bufferBytes(), { stepper.members(), stepper.nodesSpanned() });
        const QString algorithm = QString::fromLatin1(plan::toString(t.algorithm).data());
        QCOMPARE(stepper.ncclAlgorithm(), algorithm);
        QVERIFY(stepper.nodesSpanned() > 1);
        const QString nccl = stepper.ncclLabel()->text();
        QVERIFY2(nccl.contains(QStringLiteral("<b>%1</b>").arg(algorithm)) && nccl.contains(QStringLiteral("NIC")),
            qPrintable(nccl));
        Facts facts;
        facts["stepper.ncclAlgorithm"] = algorithm.toStdString();
        QVERIFY(fillLessonText(lesson->text, { &facts, &facts, &facts, nullptr }).contains(algorithm));
        // On the local cluster NCCL is not used: the stepper says so and names no algorithm.
        const plan::Layout local = test::tinyLayout();
        stepper.setLayout(local);
        QVERIFY(stepper.ncclAlgorithm().isEmpty());
        QVERIFY(stepper.ncclLabel()->text().contains(QStringLiteral("NCCL does not run")));
    }

    // Issue 36: lesson 1 prints the activation formula the Explain dock prints for the same layout (both
    // plan::layerActivationFormula), with the layout's coefficients.
    void lessonFormulaIsExplains()
    {
        std::vector<Lesson> all = loadLessons(profiles::BuiltinProfiles::instance(), nullptr);
        QVERIFY(!all.empty());
        const Lesson& one = all.front();
        for (const plan::Recompute r : { plan::Recompute::None, plan::Recompute::Full }) {
            plan::Layout l = one.layout;
            l.memory.recompute = r;
            const plan::Prediction p = plan::predict(l, false);
            Facts facts;
            addLayoutFacts(l, true, &p, &facts);
            const QString formula = QString::fromStdString(std::get<std::string>(facts.at("formula.activations")));
            QVERIFY(fillLessonText(one.text, { &facts, &facts, &facts, nullptr }).contains(formula));
            QTextDocument doc;
            doc.setHtml(explain::memory(l, p, QStringLiteral("activations")));
            QVERIFY2(doc.toPlainText().contains(formula), qPrintable(doc.toPlainText()));
            QVERIFY(!formula.contains(QStringLiteral("34"))); // Llama's SwiGLU form, not GPT's 34 + 5·a·s/h
        }
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

    // Issue 36: a passed step stays passed when the facts move on; Done at the last step leads to the next
    // lesson, and after the last lesson back to the list with the frame taken away.
    void passedStepsStayAndDoneLeadsOn()
    {
        QStandardPaths::setTestModeEnabled(true); // lesson progress goes to the test's settings, not the user's
        QStringList errors;
        std::vector<Lesson> all = loadLessons(profiles::BuiltinProfiles::instance(), &errors);
        QVERIFY2(all.size() >= 2, qPrintable(errors.join(QLatin1Char('\n'))));
        std::vector<Lesson> two(all.begin(), all.begin() + 2);
        Facts facts;
        QMainWindow window;
        auto* target = new QLabel(QStringLiteral("figure"));
        window.setCentralWidget(target);
        LessonDock::Hooks hooks;
        hooks.facts = [&facts] { return facts; };
        hooks.widget = [target](const QString&) { return target; };
        auto* dock = new LessonDock(two, hooks);
        auto* d = new QDockWidget;
        d->setWidget(dock);
        window.addDockWidget(Qt::LeftDockWidgetArea, d);
        window.show();
        QVERIFY(dock->startLesson(two[0].id));
        for (int lesson = 0; lesson < 2; ++lesson) {
            const Lesson& l = two[std::size_t(lesson)];
            QCOMPARE(dock->current()->id, l.id);
            for (std::size_t i = 0; i < l.steps.size(); ++i) {
                facts.clear();
                QVERIFY(!dock->refresh().pass);
                QVERIFY(!dock->nextButton()->isEnabled());
                satisfy(l.steps[i].check, facts);
                QVERIFY2(dock->refresh().pass, qPrintable(dock->statusText()));
                facts.clear(); // the learner looks at another figure
                QVERIFY(!dock->refresh().pass);
                QVERIFY2(dock->passed() && dock->nextButton()->isEnabled(), qPrintable(dock->statusText()));
                QVERIFY2(dock->statusText().startsWith(QStringLiteral("✓")), qPrintable(dock->statusText()));
                // The frame stays on the step's widget while the lesson goes on, and goes when it is over.
                QCOMPARE(dock->highlight()->target(), i + 1 < l.steps.size() ? target : nullptr);
                if (i + 1 == l.steps.size() && lesson == 0)
                    QVERIFY2(dock->nextButton()->text().contains(QStringLiteral("next lesson")),
                        qPrintable(dock->nextButton()->text()));
                QVERIFY(dock->next());
            }
        }
        QVERIFY(!dock->current());
        QVERIFY(!dock->highlight()->target());
    }

    // Issue 36: Explain for memory breaks the gigabytes down by kind (every kind the estimate holds: ZeRO-3's
    // gathered parameters, FP8 state, a codec's residual) and by pipeline stage; the kinds add up to the total
    // the Prediction panel shows.
    void memoryBreakdownAddsUp_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<QStringList>("kinds");
        QTest::newRow("tiny") << "tiny" << QStringList { "params", "grads", "optimizer", "activations" };
        QTest::newRow("megatron-1t") << "megatron-1t" << QStringList { "params", "optimizer", "activations" };
        QTest::newRow("zero-3") << "zero-3" << QStringList { "gathered", "reserve" };
        QTest::newRow("top-k, fp8") << "top-k" << QStringList { "residual", "fp8" };
    }

    void memoryBreakdownAddsUp()
    {
        QFETCH(QString, name);
        QFETCH(QStringList, kinds);
        plan::Layout layout = name == QLatin1String("tiny") ? test::tinyLayout()
            : name == QLatin1String("megatron-1t")          ? test::megatron1t()
                                                            : test::exampleLayout("llama3-405b-8192-h100.json");
        if (name == QLatin1String("zero-3"))
            layout.memory.zero = 3;
        if (name == QLatin1String("top-k")) { // FP8 on the H100s
            layout.memory.zero = 1;
            layout.comm.dpCodec = *plan::Codec::parse("topk:0.01");
            layout.comm.errorFeedback = true;
            layout.fp8 = plan::Fp8Recipe::Delayed;
            layout.precision = plan::Precision::Bf16;
        }
        const LayoutAnalysis a = analyzeLayout(layout);
        QVERIFY2(a.prediction, a.diagnostics.format().c_str());
        const plan::Prediction& p = *a.prediction;
        const auto parts = explain::memoryParts(p.memory);
        double sum = 0;
        QStringList keys;
        for (const auto& part : parts) {
            sum += part.gb;
            keys << part.key;
        }
        QCOMPARE(sum, p.memory.total());
        for (const QString& k : kinds)
            QVERIFY2(keys.contains(k), qPrintable(keys.join(QLatin1Char(' '))));
        PredictionPanel panel;
        panel.setAnalysis(a);
        const QString shown = panel.label(QStringLiteral("memory"))->text();
        QTextDocument doc;
        doc.setHtml(explain::memoryBreakdown(a.layout, p));
        const QString text = doc.toPlainText();
        // The total as the Prediction panel prints it, and each part's figure.
        QVERIFY2(shown.startsWith(gigabytesText(p.memory.total())), qPrintable(shown));
        QVERIFY2(text.contains(QStringLiteral("total\n") + gigabytesText(p.memory.total()))
                || text.contains(QStringLiteral("total\t") + gigabytesText(p.memory.total())),
            qPrintable(text));
        for (const auto& part : parts)
            QVERIFY2(text.contains(part.caption) && text.contains(gigabytesText(part.gb)), qPrintable(part.caption));
        // One row per pipeline stage, the most loaded marked.
        if (layout.parallel.pp > 1) {
            QVERIFY2(text.contains(QStringLiteral("By pipeline stage")), qPrintable(text));
            QCOMPARE(text.count(QStringLiteral("(most loaded)")), 1);
            QVERIFY(text.contains(QStringLiteral("LM head")));
        }
        // The Memory figure's tooltip is the breakdown by kind.
        QVERIFY(panel.label(QStringLiteral("memory"))->toolTip().contains(QStringLiteral("By kind")));
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

    // Issue 36: the Layers table shards like the Prediction panel: ZeRO-2 the gradients too (2 + 2/6 + 12/6
    // bytes a parameter at dp 6), ZeRO-3 the weights too (16/6); it ignored both (89 GB a device on an 80 GB
    // card while Prediction said 49.4 GB).
    void layersShardLikeThePrediction_data()
    {
        QTest::addColumn<int>("zero");
        QTest::addColumn<double>("bytesPerParameter");
        QTest::newRow("ZeRO-2") << 2 << 2.0 + 2.0 / 6 + 12.0 / 6;
        QTest::newRow("ZeRO-3") << 3 << 16.0 / 6;
    }
    void layersShardLikeThePrediction()
    {
        QFETCH(int, zero);
        QFETCH(double, bytesPerParameter);
        LayerModel model;
        plan::Layout l = test::megatron1t();
        QCOMPARE(l.parallel.dp * l.parallel.cp, 6);
        l.memory.zero = zero;
        model.setLayout(l);
        const QModelIndex block = model.index(model.rowOfBlock(0), LayerModel::Memory);
        const double params = double(l.model.blockParameters());
        QCOMPARE(model.data(block).toString(),
            QLocale().toString(params / 8 * bytesPerParameter / 1e9, 'f', 2) + QStringLiteral(" GB"));
        const QString tip = model.data(block, Qt::ToolTipRole).toString();
        QVERIFY2(tip.contains(QStringLiteral("ZeRO-%1").arg(zero)), qPrintable(tip));
    }

    // Issue 36: with interleaving the Stage column names the physical stage (the map's colour) and the chunk;
    // it showed virtual stages in colours that matched no device.
    void interleavedStagesMatchTheMap()
    {
        plan::Layout l = test::megatron1t();
        l.parallel.vpp = 2;
        l.parallel.stages.clear();
        LayerModel model;
        model.setLayout(l);
        QVERIFY(model.rowCount() > 0);
        const std::int64_t pp = l.parallel.pp;
        const std::int64_t perVirtual = l.model.layers / (pp * 2);
        const int row = model.rowOfBlock(int(perVirtual * pp)); // the first block of chunk 1 on stage 0
        const QModelIndex stage = model.index(row, LayerModel::Stage);
        QCOMPARE(model.data(stage, LayerModel::StageRole).toLongLong(), pp);
        QCOMPARE(model.data(stage).toString(), QStringLiteral("0 · chunk 1"));
        QCOMPARE(model.data(stage, Qt::DecorationRole).value<QColor>(), stageColor(0));
    }

    // Small figures in a unit that fits, never "0.00 GB".
    void memoryInUnitsThatFit_data()
    {
        QTest::addColumn<double>("bytes");
        QTest::addColumn<QString>("text");
        QTest::newRow("GB") << 2.5e9 << QLocale().toString(2.5, 'f', 2) + QStringLiteral(" GB");
        QTest::newRow("MB") << 8.21e6 << QLocale().toString(8.2, 'f', 1) + QStringLiteral(" MB");
        QTest::newRow("kB") << 3400.0 << QLocale().toString(3.4, 'f', 1) + QStringLiteral(" kB");
        QTest::newRow("B") << 12.0 << QStringLiteral("12 B");
    }
    void memoryInUnitsThatFit()
    {
        QFETCH(double, bytes);
        QFETCH(QString, text);
        QCOMPARE(memoryText(bytes), text);
    }
};

QTEST_MAIN(TestTeaching)
#include "tst_teaching.moc"
