// The topology map: nodes and devices from the layout, memory bars from the prediction, drops from the
// layer palette delivered as real drag-and-drop events, level-of-detail drawing of 3,072 devices.

#include "ViewsTest.h"
#include "engine/plan/CostModel.h"
#include "views/Colors.h"
#include "views/DropPreview.h"
#include "views/LayerModel.h"
#include "views/LayoutEdits.h"
#include "views/NodeItem.h"
#include "views/TopologyScene.h"
#include "views/TopologyView.h"
#include "views/Units.h"

#include <QDragEnterEvent>
#include <QElapsedTimer>
#include <QFontMetricsF>
#include <QGraphicsSceneHoverEvent>
#include <QGraphicsSimpleTextItem>
#include <QImage>
#include <QLabel>
#include <QLineEdit>
#include <QMimeData>
#include <QPainter>

using namespace loom;
using namespace loom::views;

class TestTopologyMap : public QObject {
    Q_OBJECT

    // Sends the drag-enter, drag-move and drop events a real drag would, at the centre of a device.
    static bool dropOn(TopologyView& view, std::int64_t node, std::int64_t local, QMimeData* mime)
    {
        const QPoint at = view.mapFromScene(view.topologyScene()->deviceRect(node, local).center());
        QDragEnterEvent enter(at, Qt::MoveAction, mime, Qt::LeftButton, Qt::NoModifier);
        QCoreApplication::sendEvent(view.viewport(), &enter);
        if (!enter.isAccepted())
            return false;
        QDragMoveEvent move(at, Qt::MoveAction, mime, Qt::LeftButton, Qt::NoModifier);
        QCoreApplication::sendEvent(view.viewport(), &move);
        if (!move.isAccepted())
            return false;
        QDropEvent drop(QPointF(at), Qt::MoveAction, mime, Qt::LeftButton, Qt::NoModifier);
        QCoreApplication::sendEvent(view.viewport(), &drop);
        return drop.isAccepted();
    }

private slots:
    // Nodes of one or two devices named by host: the box is wide enough for "node 0 · hosta" (it showed
    // "node 0 · h"); a name longer than the widest header is elided, and the header's tooltip has it whole.
    void nodeHeadersNameTheirHosts_data()
    {
        QTest::addColumn<std::int64_t>("devicesPerNode");
        QTest::addColumn<QString>("host");
        QTest::addColumn<bool>("whole");
        QTest::newRow("one device, short host") << std::int64_t(1) << "hosta" << true;
        QTest::newRow("two devices, dotted host") << std::int64_t(2) << "gpu-017.lab" << true;
        QTest::newRow("one device, long host")
            << std::int64_t(1) << "a-very-long-compute-node-name-017.rack-04.cluster.example.org" << false;
    }
    void nodeHeadersNameTheirHosts()
    {
        QFETCH(std::int64_t, devicesPerNode);
        QFETCH(QString, host);
        QFETCH(bool, whole);
        plan::Layout l = test::tinyLayout();
        l.parallel = {};
        l.parallel.dp = 2 * devicesPerNode;
        l.parallel.globalBatch = l.parallel.dp * l.parallel.microBatch;
        l.nodes = 2;
        l.cluster.devicesPerNode = devicesPerNode;
        l.cluster.hosts = { "hostz", host.toStdString() };
        TopologyScene scene;
        TopologyView view(&scene);
        view.resize(900, 600);
        view.show();
        scene.show(l, nullptr);
        QCOMPARE(scene.nodeCount(), 2);
        NodeItem* node = scene.nodeItem(1);
        QCOMPARE(node->title(), QStringLiteral("node 1 · ") + host);
        const QFontMetricsF metrics(NodeItem::titleFont(scene.font()));
        const qreal room = node->boundingRect().width() - 2 * TopologyScene::kPadding;
        QVERIFY2(metrics.horizontalAdvance(node->shownTitle()) <= room + 0.5, qPrintable(node->shownTitle()));
        if (whole) {
            QCOMPARE(node->shownTitle(), node->title());
        } else {
            QVERIFY2(node->shownTitle().endsWith(QChar(0x2026)), qPrintable(node->shownTitle()));
            QVERIFY(node->shownTitle().startsWith(QStringLiteral("node 1 · a-very")));
        }
        // Hovering the header (not a device, not the bus) shows the whole host name.
        QGraphicsSceneHoverEvent hover(QEvent::GraphicsSceneHoverMove);
        hover.setPos(QPointF(TopologyScene::kPadding + 2, TopologyScene::kHeader / 2));
        scene.sendEvent(node, &hover);
        QVERIFY2(node->toolTip().contains(host.toHtmlEscaped()), qPrintable(node->toolTip()));
        // The devices keep their places.
        QCOMPARE(node->cellRect(0).left(), TopologyScene::kPadding + 2);
    }

    void showsTheExample()
    {
        TopologyScene scene;
        const plan::Layout l = test::tinyLayout();
        const plan::Prediction p = plan::predict(l);
        scene.show(l, &p);
        QCOMPARE(scene.nodeCount(), 1);
        QCOMPARE(scene.devicesPerNode(), 8); // the local cluster has as many devices as ranks
        const DeviceView& d = scene.device(0, 5);
        QCOMPARE(d.rank, 5);
        QCOMPARE(d.coord, (plan::RankCoord { 1, 0, 1 }));
        QVERIFY(d.memory);
        const QString tip = scene.deviceToolTip(0, 5);
        QVERIFY2(tip.contains(QStringLiteral("rank 5")), qPrintable(tip));
        QVERIFY(tip.contains(QStringLiteral("(tp 1, pp 0, dp 1)")));
        QVERIFY(tip.contains(QStringLiteral("stage 0: embedding, blocks 0–1")));
        QVERIFY(tip.contains(QStringLiteral("memory")));
        QVERIFY(scene.intraLinkToolTip().contains(QStringLiteral("shared memory")));
    }

    void dropChangesTheStages()
    {
        TopologyScene scene;
        TopologyView view(&scene);
        view.resize(900, 600);
        view.show();
        plan::Layout layout = test::tinyLayout();
        scene.show(layout, nullptr);
        QObject::connect(
            &view, &TopologyView::blocksDropped, [&](std::int64_t rank, std::int64_t first, std::int64_t last) {
                const EditResult r = dropBlocksOnRank(layout, rank, first, last);
                QVERIFY2(r.ok(), r.refusal.c_str());
                layout = *r.layout;
                scene.show(layout, nullptr);
            });
        QSignalSpy dropped(&view, &TopologyView::blocksDropped);
        LayerModel model;
        model.setLayout(layout);
        // Block 1 (stage 0) onto rank 3's device (stage 1).
        std::unique_ptr<QMimeData> mime(model.mimeData({ model.index(model.rowOfBlock(1), 0) }));
        QVERIFY(dropOn(view, 0, 3, mime.get()));
        QCOMPARE(dropped.count(), 1);
        QCOMPARE(dropped.at(0).at(0).toLongLong(), 3);
        QCOMPARE(layout.parallel.stages, (std::vector<plan::StageRange> { { 0, 0 }, { 1, 3 } }));
        QCOMPARE(scene.dropTarget(), (std::pair<std::int64_t, std::int64_t> { -1, -1 }));

        // Something that is not a block range is refused at the door.
        QMimeData text;
        text.setText(QStringLiteral("block 1"));
        QVERIFY(!dropOn(view, 0, 3, &text));
        QCOMPARE(dropped.count(), 1);
    }

    // Issue 36: while the drag hovers a device, the map previews the stage ranges the drop would give, worked out
    // by the edit the drop applies (dropBlocksOnRank); a drop the plan refuses says why before the release, and
    // the note goes when the drag leaves or drops.
    void dragPreviewsTheStageRanges()
    {
        TopologyScene scene;
        TopologyView view(&scene);
        view.resize(900, 600);
        view.show();
        const plan::Layout layout = test::tinyLayout(); // pp 2: stages blocks 0–1 and 2–3
        scene.show(layout, nullptr);
        LayerModel model;
        model.setLayout(layout);
        const QPoint at = view.mapFromScene(scene.deviceRect(0, 3).center()); // rank 3, stage 1
        std::unique_ptr<QMimeData> one(model.mimeData({ model.index(model.rowOfBlock(1), 0) }));
        QCOMPARE(one->text(), QStringLiteral("block 1")); // what other programs get of a one-block drag
        QDragEnterEvent enter(at, Qt::MoveAction, one.get(), Qt::LeftButton, Qt::NoModifier);
        QCoreApplication::sendEvent(view.viewport(), &enter);
        QVERIFY(enter.isAccepted());
        QVERIFY(view.dropPreview().isEmpty()); // nothing hovered yet
        QDragMoveEvent move(at, Qt::MoveAction, one.get(), Qt::LeftButton, Qt::NoModifier);
        QCoreApplication::sendEvent(view.viewport(), &move);
        QVERIFY(move.isAccepted());
        QCOMPARE(view.dropPreview(),
            QStringLiteral(
                "Drop block 1 on rank 3 (stage 1):\nstage 0: block 0 (was 0–1)\nstage 1: blocks 1–3 (was 2–3)"));
        QVERIFY(view.dropPreviewLabel()->isVisible());
        QVERIFY(view.viewport()->geometry().contains(view.dropPreviewLabel()->geometry()));
        // The preview is what the drop does.
        const plan::Layout after = *dropBlocksOnRank(layout, 3, 1, 1).layout;
        const auto ranges = after.stageRanges();
        QCOMPARE(ranges, (std::vector<plan::StageRange> { { 0, 0 }, { 1, 3 } }));
        QDragLeaveEvent leave;
        QCoreApplication::sendEvent(view.viewport(), &leave);
        QVERIFY(view.dropPreview().isEmpty());

        // Every block onto stage 1 would leave stage 0 empty: refused, with the plan's reason, before the release.
        std::unique_ptr<QMimeData> all(
            model.mimeData({ model.index(model.rowOfBlock(0), 0), model.index(model.rowOfBlock(1), 0),
                model.index(model.rowOfBlock(2), 0), model.index(model.rowOfBlock(3), 0) }));
        QDragEnterEvent enterAll(at, Qt::MoveAction, all.get(), Qt::LeftButton, Qt::NoModifier);
        QCoreApplication::sendEvent(view.viewport(), &enterAll);
        QDragMoveEvent moveAll(at, Qt::MoveAction, all.get(), Qt::LeftButton, Qt::NoModifier);
        QCoreApplication::sendEvent(view.viewport(), &moveAll);
        const EditResult refused = dropBlocksOnRank(layout, 3, 0, 3);
        QVERIFY(!refused.ok());
        QCOMPARE(view.dropPreview(),
            QStringLiteral("Cannot move blocks 0–3 to rank 3: ") + QString::fromStdString(refused.refusal));
        QDropEvent drop(QPointF(at), Qt::MoveAction, all.get(), Qt::LeftButton, Qt::NoModifier);
        QCoreApplication::sendEvent(view.viewport(), &drop);
        QVERIFY(view.dropPreview().isEmpty());

        // A block already on the hovered stage changes nothing, and the note says so.
        QDragEnterEvent enterSame(at, Qt::MoveAction, one.get(), Qt::LeftButton, Qt::NoModifier);
        QCoreApplication::sendEvent(view.viewport(), &enterSame);
        const QPoint stage0 = view.mapFromScene(scene.deviceRect(0, 0).center()); // rank 0, stage 0
        QDragMoveEvent moveSame(stage0, Qt::MoveAction, one.get(), Qt::LeftButton, Qt::NoModifier);
        QCoreApplication::sendEvent(view.viewport(), &moveSame);
        QCOMPARE(
            view.dropPreview(), QStringLiteral("block 1 is already on stage 0 (rank 0): the drop changes nothing"));
    }

    // On 64 stages the note lists the first changed stages and counts the rest, so it stays short.
    void dragPreviewOnManyStages()
    {
        TopologyScene scene;
        TopologyView view(&scene);
        view.resize(900, 600);
        view.show();
        const plan::Layout l = test::megatron1t();
        scene.show(l, nullptr);
        const auto ranges = l.stageRanges();
        QVERIFY(ranges.size() >= 16);
        // Blocks 4–9 (stages 2 to 4) onto rank 0's stage 0: it grows to blocks 0–9 and the stages after it give
        // up blocks until the old boundaries are reached again, more stages than the note lists.
        const auto [node, local] = scene.deviceOfRank(0);
        QVERIFY(node >= 0);
        const std::int64_t first = ranges[1].last + 1, last = ranges[4].last;
        const DropPreview p = previewDrop(l, 0, first, last);
        const EditResult r = dropBlocksOnRank(l, 0, first, last);
        QVERIFY2(r.ok(), r.refusal.c_str());
        QVERIFY(p.accepted);
        QCOMPARE(p.stage, 0);
        const auto after = r.layout->stageRanges();
        int changed = 0;
        for (std::size_t s = 0; s < after.size(); ++s)
            changed += after[s] == ranges[s] ? 0 : 1;
        QVERIFY2(changed > 6, qPrintable(QString::number(changed)));
        const QStringList lines = p.text.split(QLatin1Char('\n'));
        QCOMPARE(lines.size(), 1 + 6 + 1); // the heading, six stages, the count of the rest
        QCOMPARE(lines.last(), QStringLiteral("and %1 more stages").arg(changed - 6));
        QCOMPARE(lines.at(1),
            QStringLiteral("stage 0: %1 (was %2–%3)")
                .arg(blocksText(after[0].first, after[0].last))
                .arg(ranges[0].first)
                .arg(ranges[0].last));
        // Through the view: the note is there while the drag hovers rank 0's device.
        LayerModel model;
        model.setLayout(l);
        QModelIndexList rows;
        for (std::int64_t b = first; b <= last; ++b)
            rows << model.index(model.rowOfBlock(b), 0);
        std::unique_ptr<QMimeData> mime(model.mimeData(rows));
        view.centerOn(scene.deviceRect(node, local).center());
        const QPoint at = view.mapFromScene(scene.deviceRect(node, local).center());
        QDragEnterEvent enter(at, Qt::MoveAction, mime.get(), Qt::LeftButton, Qt::NoModifier);
        QCoreApplication::sendEvent(view.viewport(), &enter);
        QDragMoveEvent move(at, Qt::MoveAction, mime.get(), Qt::LeftButton, Qt::NoModifier);
        QCoreApplication::sendEvent(view.viewport(), &move);
        QCOMPARE(view.dropPreview(), p.text);
    }

    void dropOnAnUnusedDeviceIsRefused()
    {
        TopologyScene scene;
        TopologyView view(&scene);
        view.resize(900, 600);
        view.show();
        plan::Layout l = test::megatron1t();
        l = *withDegree(l, Degree::Dp, 3).layout; // 192 nodes
        l.nodes = 193; // one node more than the grid needs: its devices run nothing
        scene.show(l, nullptr);
        QCOMPARE(scene.device(192, 0).rank, -1);
        QVERIFY(scene.deviceToolTip(192, 0).contains(QStringLiteral("not used")));
        view.centerOn(scene.deviceRect(192, 0).center());
        QSignalSpy dropped(&view, &TopologyView::blocksDropped);
        LayerModel model;
        model.setLayout(l);
        std::unique_ptr<QMimeData> mime(model.mimeData({ model.index(model.rowOfBlock(1), 0) }));
        QVERIFY(!dropOn(view, 192, 0, mime.get()));
        QCOMPARE(dropped.count(), 0);
    }

    void memoryBarsAndFit()
    {
        TopologyScene scene;
        plan::Layout l = test::megatron1t();
        l.memory.recompute = plan::Recompute::None; // 1T without recomputation does not fit in 80 GB
        const plan::Prediction p = plan::predict(l);
        QVERIFY(!p.fits);
        scene.show(l, &p);
        QCOMPARE(p.memoryPerStage.size(), std::size_t(64));
        bool someOver = false;
        for (std::int64_t n = 0; n < scene.nodeCount(); n += 7)
            someOver |= scene.device(n, 0).memory->total() > scene.capacityGB();
        QVERIFY(someOver);
        QVERIFY(scene.deviceToolTip(0, 0).contains(QStringLiteral("does not fit")));
    }

    // Issue 36: the map's "does not fit" is one rule (the plan's fit per device) drawn the same at every zoom: at
    // an overview zoom (no bars, 128 nodes on screen) and a closer one (bars, 64 nodes) every device that does not
    // fit shows red, and with a layout that fits no device does.
    void overBudgetCueAtEveryZoom_data()
    {
        QTest::addColumn<bool>("fits");
        QTest::addColumn<double>("zoom");
        for (double zoom : { 0.1, 0.3, 1.0 }) {
            QTest::addRow("fits at %.1f", zoom) << true << zoom;
            QTest::addRow("does not fit at %.1f", zoom) << false << zoom;
        }
    }
    void overBudgetCueAtEveryZoom()
    {
        QFETCH(bool, fits);
        QFETCH(double, zoom);
        plan::Layout l = test::megatron1t();
        if (!fits)
            l.memory.recompute = plan::Recompute::None; // 1T without recomputation does not fit in 80 GB
        const plan::Prediction p = plan::predict(l);
        QCOMPARE(p.fits, fits);
        TopologyScene scene;
        TopologyView view(&scene);
        view.resize(1200, 800);
        scene.show(l, &p);
        // The map's rule is the plan's: some device does not fit exactly when the prediction says so.
        int over = 0;
        for (std::int64_t n = 0; n < scene.nodeCount(); ++n)
            for (std::int64_t d = 0; d < scene.devicesPerNode(); ++d)
                over += scene.overBudget(scene.device(n, d));
        QCOMPARE(over > 0, !fits);
        view.setTransform(QTransform::fromScale(zoom, zoom));
        view.centerOn(scene.deviceRect(0, 0).center());
        QImage image(view.viewport()->size(), QImage::Format_ARGB32_Premultiplied);
        image.fill(Qt::white);
        QPainter painter(&image);
        view.render(&painter);
        painter.end();
        const auto isRed = [](QColor c) {
            const QColor red = colors::overBudget;
            return std::abs(c.red() - red.red()) + std::abs(c.green() - red.green()) + std::abs(c.blue() - red.blue())
                < 60;
        };
        int checked = 0;
        for (std::int64_t n = 0; n < scene.nodeCount(); ++n)
            for (std::int64_t d = 0; d < scene.devicesPerNode(); ++d) {
                const QRect cell = view.mapFromScene(scene.deviceRect(n, d)).boundingRect();
                if (!image.rect().contains(cell) || cell.width() < 3 || cell.height() < 3)
                    continue; // off screen, or cut by its edge
                // The cue is the device's frame (zoomed out, the whole small cell): the cell's outer ring of
                // pixels, 3 px deep, is red where no TP outline covers it (the bar alone left it white); a device that
                // fits has no red pixel at all.
                int red = 0, ring = 0, redInRing = 0;
                for (int y = cell.top(); y <= cell.bottom(); ++y)
                    for (int x = cell.left(); x <= cell.right(); ++x) {
                        const bool isRing = x - cell.left() < 3 || cell.right() - x < 3 || y - cell.top() < 3
                            || cell.bottom() - y < 3;
                        const bool r = isRed(image.pixel(x, y));
                        red += r;
                        ring += isRing;
                        redInRing += isRing && r;
                    }
                const double share = double(redInRing) / double(std::max(1, ring));
                const bool expected = scene.overBudget(scene.device(n, d));
                QVERIFY2(expected ? share >= 0.3 : red == 0, // TP outlines cover part of the frame
                    qPrintable(QStringLiteral("node %1 device %2: %3 % of the frame red, %4 expected")
                                   .arg(n)
                                   .arg(d)
                                   .arg(100 * share, 0, 'f', 1)
                                   .arg(expected ? QStringLiteral("red") : QStringLiteral("none"))));
                ++checked;
            }
        QVERIFY(checked >= 8);
    }

    // Megatron-LM's 1T layout (3,072 ranks, 64 stages): zoomed out, each stage is named by a label of constant
    // size at its first device; the jump box (Ctrl+J, typed, Enter) centres on a rank or a node and outlines
    // it; hovering a node's header names its ranks, stages and replicas, not only its number.
    void jumpToRankOrNodeOnAHugeMap()
    {
        TopologyScene scene;
        TopologyView view(&scene);
        view.resize(1200, 800);
        scene.show(test::megatron1t(), nullptr);
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        view.fitAll();
        QVERIFY(view.zoom() < 0.18);
        QVERIFY(scene.overview());
        // Every stage has its label at its first device; those shown never overlap on screen (the map is
        // too small for 64 side by side here), stage 0's among them.
        for (std::int64_t stage : { 0, 63 }) {
            std::int64_t first = 0; // the lowest rank of the stage
            while (scene.device(first / 8, first % 8).coord.pp != stage)
                ++first;
            QCOMPARE(scene.stageLabel(stage)->text(), QStringLiteral("stage %1").arg(stage));
            QCOMPARE(scene.stageLabel(stage)->pos(), scene.deviceRect(first / 8, first % 8).topLeft());
        }
        QGraphicsSimpleTextItem* label = scene.stageLabel(0);
        QVERIFY(label->isVisible());
        std::vector<QRect> shown;
        for (std::int64_t s = 0; s < 64; ++s)
            if (scene.stageLabel(s)->isVisible()) {
                const QRect r(
                    view.mapFromScene(scene.stageLabel(s)->pos()), scene.stageLabel(s)->boundingRect().size().toSize());
                for (const QRect& o : shown)
                    QVERIFY2(!o.intersects(r), qPrintable(QStringLiteral("stage %1 overlaps").arg(s)));
                shown.push_back(r);
            }
        QVERIFY2(shown.size() >= 8, qPrintable(QString::number(shown.size())));

        const auto jump = [&view](const QString& text) {
            QTest::keyClick(view.viewport(), Qt::Key_J, Qt::ControlModifier);
            if (!view.jumpBox()->hasFocus())
                return false;
            view.jumpBox()->clear();
            QTest::keyClicks(view.jumpBox(), text);
            QTest::keyClick(view.jumpBox(), Qt::Key_Return);
            return true;
        };
        const auto centre = [&view] { return view.mapToScene(view.viewport()->rect().center()); };
        QVERIFY(jump(QStringLiteral("rank 1500")));
        QCOMPARE(scene.highlight(), (std::pair<std::int64_t, std::int64_t> { 187, 4 }));
        QCOMPARE(scene.highlight(), scene.deviceOfRank(1500));
        QVERIFY(scene.deviceRect(187, 4).adjusted(-2, -2, 2, 2).contains(centre()));
        QVERIFY(view.zoom() >= 0.55); // close enough for the device's text
        QVERIFY(!scene.overview() && !label->isVisible());
        const DeviceView& d = scene.device(187, 4);
        QCOMPARE(view.jumpMessage(),
            QStringLiteral("Rank 1500: node 187, device 4, stage %1, tp %2, dp %3")
                .arg(d.coord.pp)
                .arg(d.coord.tp)
                .arg(d.coord.dp));
        // A rank at the map's right edge is brought into view as far as the map scrolls.
        QVERIFY(jump(QStringLiteral("r1000")));
        QVERIFY(view.mapToScene(view.viewport()->rect()).boundingRect().contains(scene.deviceRect(125, 0)));
        QVERIFY(jump(QStringLiteral("n118")));
        QCOMPARE(scene.highlight().first, 118);
        QVERIFY(scene.nodeItem(118)->sceneBoundingRect().contains(centre()));
        // Nothing moves for a rank or text that is not there.
        QVERIFY(jump(QStringLiteral("r99999")));
        QCOMPARE(scene.highlight().first, 118);
        QVERIFY2(view.jumpMessage().contains(QStringLiteral("no rank 99999")), qPrintable(view.jumpMessage()));
        QVERIFY(!view.jumpTo(QStringLiteral("stage 3; rm")));
        QVERIFY(view.jumpMessage().contains(QStringLiteral("is not a rank or a node")));

        // Hover the header of node 118 with a real mouse move.
        NodeItem* item = scene.nodeItem(118);
        const QPoint header = view.mapFromScene(item->mapToScene(QPointF(TopologyScene::kPadding + 30, 6)));
        QTest::mouseMove(view.viewport(), header);
        const QString tip = item->toolTip();
        std::int64_t lo = INT64_MAX, hi = -1;
        for (std::int64_t i = 0; i < scene.devicesPerNode(); ++i) {
            lo = std::min(lo, scene.device(118, i).rank);
            hi = std::max(hi, scene.device(118, i).rank);
        }
        QVERIFY2(tip.contains(QStringLiteral("<b>node 118</b>"))
                && tip.contains(QStringLiteral("ranks %1–%2").arg(lo).arg(hi))
                && tip.contains(QStringLiteral("pipeline stage %1").arg(scene.device(118, 0).coord.pp))
                && tip.contains(QStringLiteral("DP replica")),
            qPrintable(tip));
    }

    void hugeClusterDrawsFastAtEveryZoom()
    {
        TopologyScene scene;
        TopologyView view(&scene);
        view.resize(1200, 800);
        const plan::Layout l = test::megatron1t();
        const plan::Prediction p = plan::predict(l);
        QElapsedTimer build;
        build.start();
        scene.show(l, &p);
        QCOMPARE(scene.nodeCount(), 384);
        // Nodes, the fabric and one label per pipeline stage: never one item per device.
        QCOMPARE(scene.items().size(), qsizetype(384 + 1 + 64));
        qInfo("built the 384-node map in %lld ms", build.elapsed());
        // Draw it at the three levels of detail: fitted (coarse), mid and close.
        for (double zoom : { 0.05, 0.3, 1.5 }) {
            view.setTransform(QTransform::fromScale(zoom, zoom));
            QImage image(view.viewport()->size(), QImage::Format_ARGB32_Premultiplied);
            image.fill(Qt::white);
            QElapsedTimer t;
            t.start();
            QPainter painter(&image);
            view.render(&painter);
            painter.end();
            qInfo("zoom %.2f drawn in %lld ms", zoom, t.elapsed());
            QVERIFY(t.elapsed() < 1500);
            // Something was drawn in stage colours.
            int coloured = 0;
            for (int y = 0; y < image.height(); y += 8)
                for (int x = 0; x < image.width(); x += 8)
                    coloured += QColor(image.pixel(x, y)).saturation() > 40;
            QVERIFY2(coloured > 20, qPrintable(QString::number(coloured)));
        }
    }
};

QTEST_MAIN(TestTopologyMap)
#include "tst_topologymap.moc"
