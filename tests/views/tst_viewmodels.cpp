// The workbench's item models and the timeline's index: LayerModel, CandidateModel, TimelineData.

#include "ViewsTest.h"
#include "engine/plan/Search.h"
#include "views/CandidateModel.h"
#include "views/LayerModel.h"
#include "views/RunHistoryModel.h"
#include "views/TimelineData.h"

#include <QAbstractItemModelTester>
#include <QMimeData>
#include <QTemporaryDir>

#include <random>

using namespace loom;
using namespace loom::views;

class TestViewModels : public QObject {
    Q_OBJECT
private slots:
    void layerModelRows()
    {
        LayerModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        const plan::Layout l = test::tinyLayout();
        model.setLayout(l);
        QCOMPARE(model.rowCount(), 4 + 3);
        QCOMPARE(model.data(model.index(0, LayerModel::Name)).toString(), QStringLiteral("embedding"));
        QCOMPARE(model.data(model.index(1, LayerModel::Name)).toString(), QStringLiteral("block 0"));
        QCOMPARE(model.data(model.index(6, LayerModel::Name)).toString(), QStringLiteral("LM head (tied)"));
        // Stages from the layout's even split: blocks 0-1 on stage 0, 2-3 on stage 1, head on the last.
        QCOMPARE(model.data(model.index(2, 0), LayerModel::StageRole).toLongLong(), 0);
        QCOMPARE(model.data(model.index(3, 0), LayerModel::StageRole).toLongLong(), 1);
        QCOMPARE(model.data(model.index(6, 0), LayerModel::StageRole).toLongLong(), 1);
        QVERIFY(model.data(model.index(1, LayerModel::Memory), Qt::ToolTipRole)
                    .toString()
                    .contains(QStringLiteral("16 bytes")));
        // Block rows drag; the embedding does not.
        QVERIFY(model.flags(model.index(1, 0)) & Qt::ItemIsDragEnabled);
        QVERIFY(!(model.flags(model.index(0, 0)) & Qt::ItemIsDragEnabled));

        // A stage change only changes data; a new model resets.
        plan::Layout moved = l;
        moved.parallel.stages = { { 0, 0 }, { 1, 3 } };
        QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
        QSignalSpy reset(&model, &QAbstractItemModel::modelReset);
        model.setLayout(moved);
        QCOMPARE(changed.count(), 1);
        QCOMPARE(reset.count(), 0);
        QCOMPARE(model.data(model.index(2, 0), LayerModel::StageRole).toLongLong(), 1);
        model.setLayout(test::megatron1t());
        QCOMPARE(reset.count(), 1);
        QCOMPARE(model.rowCount(), 128 + 3);
    }

    // In a V (ZB-V, DualPipe) rank r holds virtual stages r and 2p-1-r: the Stage column names the rank the
    // map colours and its chunk, and the head lives on rank 0 with the last virtual stage.
    void layerModelVPlacement()
    {
        LayerModel model;
        plan::Layout l = test::tinyLayout();
        l.parallel.pp = 2;
        l.parallel.vpp = 2;
        l.parallel.schedule = plan::ScheduleKind::ZbV;
        l.parallel.stages.clear();
        model.setLayout(l);
        const QString expected[] = { "0 · chunk 0", "1 · chunk 0", "1 · chunk 1", "0 · chunk 1" };
        for (int block = 0; block < 4; ++block)
            QCOMPARE(model.data(model.index(1 + block, LayerModel::Stage)).toString(), expected[block]);
        QCOMPARE(model.data(model.index(6, LayerModel::Stage)).toString(), QStringLiteral("0 · chunk 1"));
        QVERIFY(model.data(model.index(3, 0), Qt::ToolTipRole).toString().contains(QStringLiteral("stage 1 (chunk 1")));
        l.parallel.schedule = plan::ScheduleKind::Interleaved; // Megatron-LM's order: chunk·pp + rank
        model.setLayout(l);
        QCOMPARE(model.data(model.index(3, LayerModel::Stage)).toString(), QStringLiteral("0 · chunk 1"));
        QCOMPARE(model.data(model.index(6, LayerModel::Stage)).toString(), QStringLiteral("1 · chunk 1"));
    }

    void layerModelMime()
    {
        LayerModel model;
        model.setLayout(test::megatron1t());
        std::unique_ptr<QMimeData> mime(model.mimeData(
            { model.index(model.rowOfBlock(7), 0), model.index(model.rowOfBlock(3), 2), model.index(0, 0) }));
        QVERIFY(mime);
        std::int64_t first = -1, last = -1;
        QVERIFY(LayerModel::decodeBlocks(mime.get(), &first, &last));
        QCOMPARE(first, 3);
        QCOMPARE(last, 7);
        QVERIFY(!model.mimeData({ model.index(0, 0) })); // the embedding alone is not a block range
        QMimeData junk;
        junk.setData(QString::fromLatin1(LayerModel::kMimeType), "7 three");
        QVERIFY(!LayerModel::decodeBlocks(&junk, &first, &last));
        junk.setData(QString::fromLatin1(LayerModel::kMimeType), "9 2");
        QVERIFY(!LayerModel::decodeBlocks(&junk, &first, &last));
        QVERIFY(!LayerModel::decodeBlocks(nullptr, &first, &last));
    }

    void candidateModel()
    {
        CandidateModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        const plan::Layout l = test::megatron1t();
        plan::SearchRequest request;
        request.model = l.model;
        request.cluster = l.cluster;
        request.nodes = 8;
        request.globalBatch = 64;
        request.precision = plan::Precision::Fp16;
        request.top = 4;
        plan::ModelSpec small = *profiles::BuiltinProfiles::instance().findModel("gpt2-1.5b");
        request.model = small;
        const plan::SearchResult r = plan::search(request);
        QVERIFY(!r.ranked.empty());
        model.setCandidates(r.ranked);
        QCOMPARE(model.rowCount(), int(r.ranked.size()));
        QCOMPARE(model.data(model.index(0, CandidateModel::Tp)).toLongLong(), r.ranked[0].layout.parallel.tp);
        // Best first.
        for (int i = 1; i < model.rowCount(); ++i)
            QVERIFY(model.data(model.index(i - 1, CandidateModel::TokensPerS), Qt::UserRole).toDouble()
                >= model.data(model.index(i, CandidateModel::TokensPerS), Qt::UserRole).toDouble());
    }

    void searchReportsProgressAndCancels()
    {
        plan::SearchRequest request;
        const plan::Layout l = test::megatron1t();
        request.model = l.model;
        request.cluster = l.cluster;
        request.nodes = l.nodes;
        request.globalBatch = l.parallel.globalBatch;
        request.precision = l.precision;
        std::vector<double> seen;
        request.progress = [&](double f) {
            seen.push_back(f);
            return seen.size() < 5;
        };
        const plan::SearchResult r = plan::search(request);
        QVERIFY(r.cancelled);
        QVERIFY(r.ranked.empty());
        QCOMPARE(seen.size(), std::size_t(5));
        QVERIFY(std::is_sorted(seen.begin(), seen.end()));
    }

    void timelineVisibleMatchesBruteForce()
    {
        std::mt19937 rng(7);
        std::vector<trace::TraceEvent> events;
        for (int i = 0; i < 5000; ++i) {
            trace::TraceEvent e;
            e.rank = int(rng() % 4);
            e.lane = rng() % 3 == 0 ? trace::Lane::Comm : trace::Lane::Compute;
            e.kind = e.lane == trace::Lane::Comm ? trace::EventKind::AllReduce : trace::EventKind::Forward;
            e.startNs = std::int64_t(rng() % 1000000);
            e.endNs = e.startNs + std::int64_t(rng() % (rng() % 10 == 0 ? 200000 : 2000));
            events.push_back(e);
        }
        TimelineData data;
        data.setEvents(events);
        QCOMPARE(data.rows().size(), std::size_t(8));
        for (int q = 0; q < 300; ++q) {
            const std::int64_t t0 = std::int64_t(rng() % 1100000) - 50000, t1 = t0 + std::int64_t(rng() % 50000);
            for (const auto& row : data.rows()) {
                const auto [first, last] = data.visible(row, t0, t1);
                std::size_t expected = 0, found = 0;
                for (std::size_t i = 0; i < row.events.size(); ++i) {
                    const auto& e = data.event(row.events[i]);
                    const bool overlaps = e.endNs >= t0 && e.startNs <= t1;
                    expected += overlaps;
                    if (overlaps) {
                        QVERIFY(i >= first && i < last);
                        ++found;
                    }
                }
                QCOMPARE(found, expected);
                QVERIFY(last - first <= row.events.size());
            }
        }
        // eventAt finds the event covering a time.
        const auto& row = data.rows().front();
        const auto& e = data.event(row.events[row.events.size() / 2]);
        const std::int64_t hit = data.eventAt(row, (e.startNs + e.endNs) / 2);
        QVERIFY(hit >= 0);
        QVERIFY(data.event(std::uint32_t(hit)).startNs <= (e.startNs + e.endNs) / 2);
        QVERIFY(data.event(std::uint32_t(hit)).endNs >= (e.startNs + e.endNs) / 2);
    }

    // The run history shows each RunState as its word, gives the enum through StateRole and colours the
    // states that ended badly.
    void runHistoryStates()
    {
        QTemporaryDir dir;
        profiles::Store store(dir.filePath(QStringLiteral("loom.db")));
        profiles::RunStore runs(store);
        for (profiles::RunState s : profiles::kRunStates) {
            const qint64 id = runs.startRun(
                profiles::toString(s), QStringLiteral("{}"), QStringLiteral("local"), QStringLiteral("mpirun"));
            if (s != profiles::RunState::Running)
                runs.finishRun(id, s, QStringLiteral("because"));
        }
        RunHistoryModel model(&store);
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QCOMPARE(model.rowCount(), int(profiles::kRunStates.size()));
        for (int row = 0; row < model.rowCount(); ++row) {
            const QModelIndex state = model.index(row, RunHistoryModel::State);
            const auto value = static_cast<profiles::RunState>(model.data(state, RunHistoryModel::StateRole).toInt());
            QCOMPARE(model.data(state).toString(), profiles::toString(value));
            QCOMPARE(model.data(model.index(row, RunHistoryModel::Name)).toString(), profiles::toString(value));
            const QVariant colour = model.data(state, Qt::ForegroundRole);
            if (profiles::endedBadly(value))
                QCOMPARE(colour.value<QColor>(), QColor(0xC0, 0x1F, 0x1F));
            else if (value == profiles::RunState::Finished)
                QCOMPARE(colour.value<QColor>(), QColor(0x2E, 0x7D, 0x32));
            else
                QVERIFY(!colour.isValid());
        }
    }

    // The history's configuration and outcome columns: tp/pp/dp and codec from the stored layout, loss and
    // tokens/s of the last stored step (a diverged loss in words), empty for a run with no steps or a layout
    // that cannot be read.
    void runHistoryColumns()
    {
        QTemporaryDir dir;
        profiles::Store store(dir.filePath(QStringLiteral("loom.db")));
        profiles::RunStore runs(store);
        plan::Layout layout = test::tinyLayout();
        layout.parallel.tp = 1;
        layout.parallel.pp = 2;
        layout.parallel.dp = 4;
        layout.comm.dpCodec = *plan::Codec::parse("int8");
        const QString json = QString::fromStdString(plan::writeLayout(layout));
        const qint64 trained
            = runs.startRun(QStringLiteral("int8"), json, QStringLiteral("local"), QStringLiteral("x"));
        for (qint64 step = 1; step <= 3; ++step) {
            profiles::StepRecord s;
            s.step = step;
            s.loss = 4.0 - double(step);
            s.tokensPerSecond = 1000.0 * double(step);
            runs.addStep(trained, s);
        }
        runs.finishRun(trained, profiles::RunState::Finished, {});
        const qint64 diverged
            = runs.startRun(QStringLiteral("nan"), json, QStringLiteral("local"), QStringLiteral("x"));
        profiles::StepRecord bad;
        bad.step = 1;
        bad.loss = std::numeric_limits<double>::quiet_NaN();
        bad.tokensPerSecond = 10;
        runs.addStep(diverged, bad);
        const qint64 empty = runs.startRun(
            QStringLiteral("empty"), QStringLiteral("{}"), QStringLiteral("local"), QStringLiteral("x"));

        RunHistoryModel model(&store);
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        auto cell = [&](qint64 id, int column) {
            for (int row = 0; row < model.rowCount(); ++row)
                if (model.runIdAt(row) == id)
                    return model.data(model.index(row, column)).toString();
            return QStringLiteral("<no row>");
        };
        QCOMPARE(model.headerData(RunHistoryModel::Degrees, Qt::Horizontal).toString(), QStringLiteral("tp/pp/dp"));
        QCOMPARE(cell(trained, RunHistoryModel::Degrees), QStringLiteral("1/2/4"));
        QCOMPARE(cell(trained, RunHistoryModel::Codec), QStringLiteral("int8"));
        QCOMPARE(cell(trained, RunHistoryModel::FinalLoss), profiles::lossText(1.0));
        QCOMPARE(cell(trained, RunHistoryModel::TokensPerSecond), QLocale().toString(3000.0, 'f', 0));
        QCOMPARE(cell(diverged, RunHistoryModel::FinalLoss), profiles::lossText(bad.loss));
        QVERIFY(cell(diverged, RunHistoryModel::FinalLoss).startsWith(QStringLiteral("diverged")));
        QCOMPARE(cell(empty, RunHistoryModel::Degrees), QString());
        QCOMPARE(cell(empty, RunHistoryModel::FinalLoss), QString());
        QCOMPARE(cell(empty, RunHistoryModel::TokensPerSecond), QString());
        QCOMPARE(cell(empty, RunHistoryModel::Name), QStringLiteral("empty"));
    }
};

QTEST_GUILESS_MAIN(TestViewModels)
#include "tst_viewmodels.moc"
