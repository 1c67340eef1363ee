// The strategy panel (valid choices, refusals that say why, one edit per change), the prediction panel
// (figures and their formula tooltips) and the simulated schedule view.

#include "ViewsTest.h"
#include "engine/plan/CostModel.h"
#include "engine/plan/LayoutValidator.h"
#include "profiles/Store.h"
#include "views/Explain.h"
#include "views/LayoutAnalysis.h"
#include "views/PredictionPanel.h"
#include "views/RunMonitor.h"
#include "views/RunPanel.h"
#include "views/StackedBar.h"
#include "views/StrategyPanel.h"
#include "views/TimelineView.h"
#include "views/Units.h"

#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QTemporaryDir>

using namespace loom;
using namespace loom::views;

class TestPanels : public QObject {
    Q_OBJECT
private slots:
    void refusedTpExplainsWhy()
    {
        StrategyPanel panel(&profiles::BuiltinProfiles::instance());
        const plan::Layout l = test::tinyLayout();
        panel.setLayout(l);
        QSignalSpy edits(&panel, &StrategyPanel::editRequested);
        QVERIFY(!panel.requestDegree(Degree::Tp, 3));
        QCOMPARE(edits.count(), 0);
        QVERIFY2(panel.message().contains(QStringLiteral("parallel.tp=3 does not divide model.heads=4")),
            qPrintable(panel.message()));
        QCOMPARE(panel.degreeBox(Degree::Tp)->currentText(), QStringLiteral("2")); // back to the current value

        // Typing it into the box is refused the same way.
        QLineEdit* edit = panel.degreeBox(Degree::Tp)->lineEdit();
        edit->setText(QStringLiteral("3"));
        emit edit->editingFinished();
        QCOMPARE(edits.count(), 0);
        QVERIFY(panel.message().contains(QStringLiteral("does not divide")));

        // The list offers 3 but disabled, with the reason as its tooltip.
        auto* model = static_cast<QStandardItemModel*>(panel.degreeBox(Degree::Tp)->model());
        bool found = false;
        for (int i = 0; i < model->rowCount(); ++i)
            if (model->item(i)->text() == QStringLiteral("3")) {
                found = true;
                QVERIFY(!model->item(i)->isEnabled());
                QVERIFY(model->item(i)->toolTip().contains(QStringLiteral("does not divide")));
            }
        QVERIFY(found);

        // A valid degree is one edit, and clears the message.
        QVERIFY(panel.requestDegree(Degree::Tp, 4));
        QCOMPARE(edits.count(), 1);
        const auto next = edits.at(0).at(0).value<plan::Layout>();
        QCOMPARE(next.parallel.tp, 4);
        QVERIFY(panel.message().isEmpty());
    }

    void everyControlEdits()
    {
        StrategyPanel panel(&profiles::BuiltinProfiles::instance());
        const plan::Layout l = test::megatron1t();
        panel.setLayout(l);
        QSignalSpy edits(&panel, &StrategyPanel::editRequested);
        auto* nodes = panel.findChild<QSpinBox*>(QStringLiteral("nodes"));
        nodes->setValue(192);
        QCOMPARE(edits.count(), 1);
        auto next = edits.takeFirst().at(0).value<plan::Layout>();
        QCOMPARE(next.nodes, 192);
        QCOMPARE(next.parallel.dp, 3); // 1536 / (8·64)
        // setLayout shows without emitting.
        panel.setLayout(next);
        QCOMPARE(edits.count(), 0);
        auto* schedule = panel.findChild<QComboBox*>(QStringLiteral("schedule"));
        QCOMPARE(schedule->currentText(), QStringLiteral("1f1b"));
        schedule->setCurrentIndex(2);
        emit schedule->activated(2);
        QCOMPARE(edits.count(), 1);
        next = edits.takeFirst().at(0).value<plan::Layout>();
        QVERIFY(next.parallel.schedule == plan::ScheduleKind::Interleaved);
        QCOMPARE(next.parallel.vpp, 2);
        // The micro-batch group shows for the interleaved schedule only, and edits parallel.microbatch_group.
        auto* group = panel.findChild<QSpinBox*>(QStringLiteral("microbatchGroup"));
        QVERIFY(group && group->isHidden());
        panel.setLayout(next);
        QVERIFY(!group->isHidden());
        QCOMPARE(group->text(), QStringLiteral("pp (default)"));
        group->setValue(32);
        QCOMPARE(edits.count(), 1);
        next = edits.takeFirst().at(0).value<plan::Layout>();
        QCOMPARE(next.parallel.microbatchGroup, std::int64_t(32));
        panel.setLayout(next);
        schedule->setCurrentIndex(1);
        emit schedule->activated(1); // back to 1f1b: the group goes with the virtual stages
        next = edits.takeFirst().at(0).value<plan::Layout>();
        QCOMPARE(next.parallel.microbatchGroup, std::int64_t(0));
    }

    void weightFillForZeroBubbleOnly()
    {
        // "W fills idle time" shows for the schedules that split the backward, and edits parallel.weight_fill.
        StrategyPanel panel(&profiles::BuiltinProfiles::instance());
        plan::Layout l = test::tinyLayout();
        l.parallel.pp = 2;
        panel.setLayout(l);
        auto* fill = panel.findChild<QCheckBox*>(QStringLiteral("weightFill"));
        QVERIFY(fill && fill->isHidden());
        l.parallel.schedule = plan::ScheduleKind::ZbH1;
        panel.setLayout(l);
        QVERIFY(!fill->isHidden() && !fill->isChecked()); // "listed", the default
        QSignalSpy edits(&panel, &StrategyPanel::editRequested);
        fill->setChecked(true);
        QCOMPARE(edits.count(), 1);
        const plan::Layout next = edits.takeFirst().at(0).value<plan::Layout>();
        QVERIFY(next.parallel.weightFill == plan::WeightFill::Idle);
        panel.setLayout(next);
        QVERIFY(fill->isChecked());
        QCOMPARE(edits.count(), 0); // showing the layout edits nothing
    }

    void endsCountedAsLayers()
    {
        // Llama 3's pipeline from the panel: 126 layers on pp 16 with vpp 8 need the embedding and the LM head
        // counted as a layer each (chunks of one layer, the first and the last with none).
        StrategyPanel panel(&profiles::BuiltinProfiles::instance());
        plan::Layout l = test::megatron1t();
        l.model.layers = 126;
        l.parallel.tp = 8, l.parallel.pp = 16, l.parallel.dp = 24, l.parallel.vpp = 8;
        l.parallel.schedule = plan::ScheduleKind::Interleaved;
        panel.setLayout(l);
        QSignalSpy edits(&panel, &StrategyPanel::editRequested);
        auto* ends = panel.findChild<QCheckBox*>(QStringLiteral("endsAsLayers"));
        QVERIFY(ends && ends->isEnabled() && !ends->isChecked());
        ends->setChecked(true);
        QCOMPARE(edits.count(), 1);
        plan::Layout next = edits.takeFirst().at(0).value<plan::Layout>();
        QCOMPARE(next.parallel.stages.size(), std::size_t(128));
        QVERIFY(next.parallel.stages.front().empty() && next.parallel.stages.back().empty());
        QVERIFY2(!plan::validateLayout(next).hasErrors(), plan::validateLayout(next).format().c_str());
        panel.setLayout(next);
        QVERIFY(ends->isChecked());
        ends->setChecked(false); // back to the even split
        QVERIFY(edits.takeFirst().at(0).value<plan::Layout>().parallel.stages.empty());
        // Where pp·vpp does not divide the layers + 2 the box is off, and says why in its tooltip.
        l.parallel.vpp = 3; // 48 virtual stages; 128 = 126 + 2 does not divide by 48
        panel.setLayout(l);
        QVERIFY(!ends->isEnabled());
        QVERIFY(ends->toolTip().contains(QStringLiteral("layers + 2")));
    }

    void efficientNormFromThePanel()
    {
        // The box edits memory.efficient_norm, and the activations' tooltip then counts 4 fewer s·b·h.
        StrategyPanel panel(&profiles::BuiltinProfiles::instance());
        const plan::Layout l = test::megatron1t();
        panel.setLayout(l);
        QSignalSpy edits(&panel, &StrategyPanel::editRequested);
        auto* box = panel.findChild<QCheckBox*>(QStringLiteral("efficientNorm"));
        QVERIFY(box && !box->isChecked());
        box->setChecked(true);
        QCOMPARE(edits.count(), 1);
        const plan::Layout next = edits.takeFirst().at(0).value<plan::Layout>();
        QVERIFY(next.memory.efficientNorm);
        panel.setLayout(next);
        QVERIFY(box->isChecked());
        QCOMPARE(edits.count(), 0); // showing a layout is no edit
        PredictionPanel prediction;
        prediction.setAnalysis(analyzeLayout(next));
        const QString tip = prediction.label(QStringLiteral("memory.activations"))->toolTip();
        QVERIFY2(tip.contains(QStringLiteral("the norms keep their outputs")), qPrintable(tip));
    }

    // Issue 31: a valid layout that loom-train cannot train (here: a GPU cluster on NCCL) leaves Run disabled
    // with the reason; the same layout on MPI ranks may run.
    void runButtonAsksTheEngineRules()
    {
        RunMonitor monitor(nullptr);
        RunPanel panel(&monitor);
        plan::Layout l = test::megatron1t();
        panel.setLayout(l, true);
        QVERIFY(!panel.runButton()->isEnabled());
        QVERIFY2(panel.runButton()->toolTip().contains(QStringLiteral("loom-train cannot train it"))
                && panel.runButton()->toolTip().contains(QStringLiteral("nccl")),
            qPrintable(panel.runButton()->toolTip()));
        QVERIFY(!panel.run());
        l.comm.backend = plan::CommBackend::Mpi;
        panel.setLayout(l, true);
        QVERIFY2(!panel.runButton()->toolTip().contains(QStringLiteral("loom-train cannot train it")),
            qPrintable(panel.runButton()->toolTip()));
        // loom-train could train it now, but 3,072 ranks on this machine is the launcher's refusal (issue 36);
        // launched as a Slurm job it may run.
        QVERIFY(!panel.runButton()->isEnabled());
        QVERIFY2(panel.runButton()->toolTip().contains(QStringLiteral("3072 ranks")),
            qPrintable(panel.runButton()->toolTip()));
        l.cluster.launch.method = "slurm";
        panel.setLayout(l, true);
        QVERIFY2(panel.runButton()->isEnabled(), qPrintable(panel.runButton()->toolTip()));
    }

    // Issue 36: a layout the launcher would refuse here (more local ranks than this machine may start) leaves
    // Run disabled with the launcher's reason, before any click.
    void runButtonAsksTheLauncher()
    {
        RunMonitor monitor(nullptr);
        RunPanel panel(&monitor);
        plan::Layout l = test::tinyLayout();
        QCOMPARE(QString::fromStdString(l.cluster.launch.method), QStringLiteral("local"));
        panel.setLayout(l, true);
        QVERIFY2(panel.runButton()->isEnabled(), qPrintable(panel.runButton()->toolTip()));
        l.parallel.dp = 8192;
        panel.setLayout(l, true);
        QVERIFY(!panel.runButton()->isEnabled());
        QVERIFY2(panel.runButton()->toolTip().contains(QStringLiteral("a local run starts at most")),
            qPrintable(panel.runButton()->toolTip()));
        QVERIFY(!panel.run());
        QVERIFY2(panel.status().contains(QStringLiteral("a local run starts at most")), qPrintable(panel.status()));
    }

    // Issue 36: a launch refused inside the launcher is recorded as failed and the panel returns to idle:
    // started() comes before finished() (it came after, leaving "Run N starting…" and a live Cancel).
    void refusedLaunchReturnsToIdle()
    {
        QTemporaryDir dir;
        profiles::Store store(dir.filePath(QStringLiteral("loom.db")));
        qputenv("LOOM_TRAIN", "/bin/true"); // an executable engine: the refusal is the launcher's
        RunMonitor monitor(&store);
        RunPanel panel(&monitor);
        QStringList order;
        connect(&monitor, &RunMonitor::started, this, [&order] { order << QStringLiteral("started"); });
        connect(&monitor, &RunMonitor::finished, this, [&order] { order << QStringLiteral("finished"); });
        plan::Layout l = test::tinyLayout();
        l.parallel.dp = 8192;
        QString error;
        QCOMPARE(monitor.start(l, 5, &error), 0);
        QVERIFY2(error.contains(QStringLiteral("a local run starts at most")), qPrintable(error));
        QCOMPARE(order, QStringList({ QStringLiteral("started"), QStringLiteral("finished") }));
        QVERIFY(!monitor.running());
        QVERIFY(monitor.runId() > 0);
        QVERIFY(!panel.cancelButton()->isEnabled());
        QVERIFY2(
            panel.status().contains(QStringLiteral("Run %1 failed").arg(monitor.runId())), qPrintable(panel.status()));
        const auto runs = profiles::RunStore(store).runs();
        QCOMPARE(int(runs.size()), 1);
        QVERIFY(runs.front().state == profiles::RunState::Failed);
        qunsetenv("LOOM_TRAIN");
    }

    // The step frame's memory high-water marks are shown beside the prediction.
    void measuredMemoryBesideThePrediction()
    {
        profiles::StepRecord step;
        QVERIFY(measuredMemoryText(step, std::nullopt).isEmpty()); // not measured: nothing said
        step.memoryHighWaterBytes = { 2'100'000'000, 2'372'000'000 };
        plan::Prediction p;
        p.memory.params = 2.399;
        const QString text = measuredMemoryText(step, p);
        QVERIFY2(text.contains(QLocale().toString(2.372, 'f', 3)) && text.contains(QLocale().toString(2.399, 'f', 3))
                && text.contains(QStringLiteral("measured")) && text.contains(QStringLiteral("predicted")),
            qPrintable(text));
    }

    // Blocks moved onto stage 1 (3 of them; stage 0 keeps 1, the others 2): the Bubble figure names stage 1, the
    // busiest, and the uneven work shows as Load imbalance beside it (issue 36: it was stage 0's idle time).
    void predictionPanelNamesTheBottleneck()
    {
        plan::Layout l = test::megatron1t();
        l.parallel.stages.clear();
        l.parallel.stages.push_back({ 0, 0 });
        l.parallel.stages.push_back({ 1, 3 });
        for (std::int64_t first = 4; first < l.model.layers; first += 2)
            l.parallel.stages.push_back({ first, first + 1 });
        const LayoutAnalysis a = analyzeLayout(l);
        QVERIFY2(a.prediction, a.noPrediction.c_str());
        QCOMPARE(a.prediction->bottleneckStage, std::int64_t(1));
        PredictionPanel panel;
        panel.setAnalysis(a);
        const QString bubble = panel.label(QStringLiteral("bubble"))->text();
        QVERIFY2(bubble.contains(QStringLiteral("stage 1, the bottleneck")), qPrintable(bubble));
        QVERIFY2(panel.label(QStringLiteral("bubble"))->toolTip().contains(QStringLiteral("stage 1, the bottleneck")),
            qPrintable(panel.label(QStringLiteral("bubble"))->toolTip()));
        const QString imbalance = panel.label(QStringLiteral("imbalance"))->text();
        QCOMPARE(imbalance, QLocale().toString(100.0 * a.prediction->loadImbalance, 'f', 1) + QStringLiteral(" %"));
        QVERIFY(a.prediction->loadImbalance > 0.2); // 1 − 2 ÷ 3 by blocks
        QVERIFY(panel.label(QStringLiteral("imbalance"))->toolTip().contains(QStringLiteral("Load imbalance")));
    }

    // Issue 36: the memory bar draws every part of the estimate (the FP8 scaling state and the codec's residual
    // too), so its parts add up to the total it is drawn against; each part the layout has gets a legend line
    // with its figure and its own explanation, the ones it does not have (zero) none.
    void predictionMemoryBarHasEveryPart_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<QStringList>("present"); // optional parts the layout has
        QTest::newRow("tiny") << "tiny" << QStringList {};
        QTest::newRow("zero-3, fp8") << "zero-3" << QStringList { "gathered", "fp8" };
        QTest::newRow("int8 with error feedback, fp8") << "int8" << QStringList { "fp8", "residual" };
        QTest::newRow("top-k with error feedback") << "top-k" << QStringList { "residual" };
    }
    void predictionMemoryBarHasEveryPart()
    {
        QFETCH(QString, name);
        QFETCH(QStringList, present);
        plan::Layout l
            = name == QLatin1String("tiny") ? test::tinyLayout() : test::exampleLayout("llama3-405b-8192-h100.json");
        if (name == QLatin1String("zero-3")) {
            l.memory.zero = 3;
            l.fp8 = plan::Fp8Recipe::Delayed;
            l.precision = plan::Precision::Bf16;
        } else if (name == QLatin1String("int8")) {
            l.memory.zero = 1;
            l.comm.dpCodec = *plan::Codec::parse("int8");
            l.comm.errorFeedback = true;
            l.fp8 = plan::Fp8Recipe::Delayed;
            l.precision = plan::Precision::Bf16;
        } else if (name == QLatin1String("top-k")) {
            l.memory.zero = 1;
            l.comm.dpCodec = *plan::Codec::parse("topk:0.01");
            l.comm.errorFeedback = true;
        }
        const LayoutAnalysis a = analyzeLayout(l);
        QVERIFY2(a.prediction, a.diagnostics.format().c_str());
        const plan::MemoryEstimate& m = a.prediction->memory;
        PredictionPanel panel;
        panel.setAnalysis(a);
        double sum = 0;
        for (const auto& part : panel.memoryBar()->parts())
            sum += part.value;
        QVERIFY2(std::abs(sum - m.total()) <= 1e-12 * m.total(),
            qPrintable(QStringLiteral("parts %1 GB, total %2 GB").arg(sum, 0, 'g', 12).arg(m.total(), 0, 'g', 12)));
        const QString total = explain::memory(a.layout, *a.prediction, QStringLiteral("total"));
        for (const auto& part : explain::memoryParts(m)) {
            QLabel* legend = panel.label(QStringLiteral("memory.") + part.key);
            QVERIFY2(legend, qPrintable(part.key));
            QVERIFY2(legend->isVisibleTo(&panel), qPrintable(part.key));
            QVERIFY2(legend->text().endsWith(gigabytesText(part.gb)), qPrintable(legend->text()));
            QVERIFY2(!legend->toolTip().isEmpty() && legend->toolTip() != total, qPrintable(part.key));
            bool drawn = false;
            for (const auto& bar : panel.memoryBar()->parts())
                drawn |= bar.value == part.gb && bar.toolTip == legend->toolTip();
            QVERIFY2(drawn, qPrintable(part.key));
        }
        for (const char* key : { "gathered", "fp8", "residual" }) {
            const bool has = present.contains(QLatin1String(key));
            QCOMPARE(panel.label(QStringLiteral("memory.") + QLatin1String(key))->isVisibleTo(&panel), has);
            const double value = QLatin1String(key) == QLatin1String("gathered") ? m.gathered
                : QLatin1String(key) == QLatin1String("fp8")                     ? m.fp8State
                                                                                 : m.residual;
            QCOMPARE(value > 0, has);
        }
    }

    void predictionPanelExplainsEveryFigure()
    {
        PredictionPanel panel;
        const LayoutAnalysis a = analyzeLayout(test::megatron1t());
        QVERIFY(a.prediction);
        panel.setAnalysis(a);
        QCOMPARE(panel.label(QStringLiteral("tflops"))->text(), QLocale().toString(a.prediction->tflopsPerGpu, 'f', 1));
        const QString flops = panel.label(QStringLiteral("tflops"))->toolTip();
        // Model FLOPs leave the recomputation out (the 72 form); with full recomputation the hardware FLOPs
        // are said beside them, and HFU beside MFU (issue 31: they had been the hardware figures).
        QVERIFY2(flops.contains(QStringLiteral("72·B·s·l·h²·(1 + s/6h + V/12lh)")), qPrintable(flops));
        QVERIFY2(flops.contains(QStringLiteral("72·3,072·2,048·128·25,600²")), qPrintable(flops)); // values substituted
        QVERIFY2(flops.contains(QStringLiteral("hardware FLOPs")), qPrintable(flops));
        QVERIFY(a.prediction->hfu > a.prediction->mfu);
        QVERIFY2(panel.label(QStringLiteral("mfu"))->text().contains(QStringLiteral("HFU")),
            qPrintable(panel.label(QStringLiteral("mfu"))->text()));
        const QString bubble = panel.label(QStringLiteral("bubble"))->toolTip();
        QVERIFY2(bubble.contains(QStringLiteral("(p−1)/(m+p−1) = (64−1)/(512+64−1)")), qPrintable(bubble));
        QVERIFY(panel.label(QStringLiteral("mfu"))->toolTip().contains(QStringLiteral("A100")));
        QVERIFY(panel.label(QStringLiteral("memory.activations"))->toolTip().contains(QStringLiteral("2·s·b·h")));
        QVERIFY(panel.label(QStringLiteral("memory.optimizer"))->toolTip().contains(QStringLiteral("12 bytes")));
        for (const char* key : { "step", "tokens", "mfu", "memory", "split.compute", "split.tp", "split.cp", "split.pp",
                 "split.dp", "split.bubble", "split.optimizer", "memory.params", "memory.grads", "memory.reserve" })
            QVERIFY2(!panel.label(QString::fromLatin1(key))->toolTip().isEmpty(), key);
        QCOMPARE(panel.splitBar()->parts().size(), std::size_t(7)); // compute, TP, CP, PP, DP, bubble, optimizer
        double sum = 0;
        for (const auto& part : panel.splitBar()->parts())
            sum += part.value;
        QVERIFY(std::abs(sum - a.prediction->stepTime) < 1e-6 * a.prediction->stepTime);

        // An invalid layout shows why there is no prediction.
        plan::Layout bad = test::tinyLayout();
        bad.parallel.tp = 3;
        panel.setAnalysis(analyzeLayout(bad));
        QCOMPARE(panel.label(QStringLiteral("step"))->text(), QStringLiteral("–"));
        QVERIFY(panel.label(QStringLiteral("status"))->text().contains(QStringLiteral("does not divide")));
    }

    void scheduleViewDrawsTheSimulatedTimeline()
    {
        TimelineView view;
        view.resize(1000, 300);
        view.show();
        const plan::Prediction p = plan::predict(test::tinyLayout());
        TimelineData data;
        data.setEvents(p.events);
        view.setTimeline(std::move(data));
        // pp = 2: two ranks (0 and 2), each with compute and comm lanes.
        QCOMPARE(view.timeline().rows().size(), std::size_t(4));
        QCOMPARE(view.timeline().rows()[2].rank, 2);
        QCOMPARE(view.timeline().rows()[2].stage, 1);
        QImage image(view.viewport()->size(), QImage::Format_ARGB32_Premultiplied);
        view.viewport()->render(&image);
        QVERIFY(view.lastPaintBoxes() >= 16); // 4 micro-batches × forward + backward × 2 ranks
        // The first forward of rank 0 is under the mouse at its middle.
        const auto& row = view.timeline().rows()[0];
        const auto& first = view.timeline().event(row.events[0]);
        const double x = TimelineView::kLabelWidth
            + double((first.startNs + first.endNs) / 2 - view.window().first)
                / double(view.window().second - view.window().first)
                * (view.viewport()->width() - TimelineView::kLabelWidth);
        const std::int64_t hit = view.eventAt(QPoint(int(x), TimelineView::kRulerHeight + 5));
        QCOMPARE(hit, std::int64_t(row.events[0]));
        QVERIFY(view.eventDescription(hit).contains(QStringLiteral("micro-batch 0")));
        QVERIFY(view.eventDescription(hit).contains(QStringLiteral("simulated")));
        // Zooming at the mouse keeps the time under it.
        const auto before = view.window();
        view.zoomAt(4.0, int(x));
        QVERIFY(view.window().second - view.window().first < (before.second - before.first) / 3);
        QCOMPARE(view.eventAt(QPoint(int(x), TimelineView::kRulerHeight + 5)), hit);
        view.fit();
        QCOMPARE(view.window(), before);
    }
};

QTEST_MAIN(TestPanels)
#include "tst_panels.moc"
