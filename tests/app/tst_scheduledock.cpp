// The schedule dock (simulated) with every pipeline schedule, chosen as a user does in the Strategy panel's
// schedule box, offscreen: the zero-bubble schedules' simulated timeline has F, B and W ops on every stage,
// W drawn in its own colour (olive) and listed in the dock's legend; 1F1B's and GPipe's have no W.

#include "app/gui/MainWindow.h"
#include "engine/profiles/BuiltinProfiles.h"
#include "views/Colors.h"
#include "views/LayoutAnalysis.h"
#include "views/LayoutDocument.h"
#include "views/TimelineLegend.h"
#include "views/TimelinePane.h"
#include "views/TimelineView.h"

#include <QComboBox>
#include <QDockWidget>
#include <QFile>
#include <QImage>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QToolButton>

#include <map>
#include <set>

using namespace loom;
using namespace loom::views;

namespace {
// An 8-layer gpt-tiny on 4 stages with 8 micro-batches: ZB-V and DualPipe need layers divisible by 2·pp
// and DualPipe m ≥ 2·pp.
const char* const kLayout = R"({
  "loom_layout": 1, "name": "zb-dock",
  "model": { "name": "gpt-tiny-8", "layers": 8, "hidden": 64, "heads": 4, "ffn_hidden": 256, "vocab": 256,
             "seq_len": 32 },
  "cluster": "local", "nodes": 1,
  "parallel": { "tp": 1, "pp": 4, "dp": 1, "vpp": 1, "micro_batch": 2, "global_batch": 16, "schedule": "1f1b" },
  "precision": "fp32"
})";

// Pixels of exactly `c` in the view's viewport as painted now.
int pixelsOf(TimelineView* view, const QColor& c)
{
    const QImage image = view->viewport()->grab().toImage().convertToFormat(QImage::Format_RGB32);
    int n = 0;
    for (int y = 0; y < image.height(); ++y)
        for (int x = 0; x < image.width(); ++x)
            n += QColor(image.pixel(x, y)) == c ? 1 : 0;
    return n;
}
} // namespace

class TestScheduleDock : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    std::unique_ptr<app::MainWindow> m_window;

    // Until the analysis shown is the current layout's.
    bool settle(int ms = 120000)
    {
        QElapsedTimer t;
        t.start();
        while (t.elapsed() < ms) {
            const auto& a = m_window->analysis()->latest();
            if (a.generation > 0 && a.layout == m_window->document()->layout() && !m_window->analysis()->busy())
                return true;
            QTest::qWait(20);
        }
        return false;
    }

private slots:
    void initTestCase()
    {
        qputenv("XDG_CONFIG_HOME", m_dir.filePath(QStringLiteral("config")).toLocal8Bit());
        QCoreApplication::setOrganizationName(QStringLiteral("loom-test"));
        QCoreApplication::setApplicationName(QStringLiteral("tst_scheduledock"));
        QFile f(m_dir.filePath(QStringLiteral("zb.json")));
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(kLayout);
        f.close();
        m_window = std::make_unique<app::MainWindow>(profiles::BuiltinProfiles::instance());
        m_window->resize(1600, 1000);
        m_window->show();
        QString error;
        QVERIFY2(m_window->openFile(f.fileName(), &error), qPrintable(error));
        QVERIFY(settle());
    }

    void eachSchedule_data()
    {
        QTest::addColumn<QString>("schedule");
        QTest::addColumn<bool>("splitBackward");
        QTest::addColumn<int>("vpp");
        QTest::newRow("gpipe") << "gpipe" << false << 1;
        QTest::newRow("1f1b") << "1f1b" << false << 1;
        QTest::newRow("zb-h1") << "zb-h1" << true << 1;
        QTest::newRow("zb-h2") << "zb-h2" << true << 1;
        QTest::newRow("zb-v") << "zb-v" << true << 2;
        QTest::newRow("dualpipe") << "dualpipe" << true << 2;
    }

    void eachSchedule()
    {
        QFETCH(QString, schedule);
        QFETCH(bool, splitBackward);
        QFETCH(int, vpp);
        app::MainWindow& w = *m_window;
        auto* box = w.findChild<QComboBox*>(QStringLiteral("schedule"));
        QVERIFY(box);
        const int index = box->findText(schedule);
        QVERIFY2(index >= 0, qPrintable(schedule + QStringLiteral(" is not offered")));
        box->setCurrentIndex(index);
        emit box->activated(index); // as when the user picks it
        QVERIFY(settle());
        const plan::Layout& l = w.document()->layout();
        QCOMPARE(QString::fromLatin1(plan::toString(l.parallel.schedule)), schedule);
        QCOMPARE(int(l.parallel.vpp), vpp); // the panel gives the V schedules their two chunks
        QVERIFY2(w.analysis()->latest().prediction, "no prediction for a valid layout");

        // Every rank runs F, B and (split) W ops in the dock's simulated schedule.
        auto* dock = w.findChild<QDockWidget*>(QStringLiteral("scheduleDock"));
        QVERIFY(dock && dock->isVisible());
        auto* pane = dock->findChild<TimelinePane*>(); // inside the dock's scroll area
        QVERIFY(pane);
        TimelineView* view = pane->view();
        QCOMPARE(view, w.scheduleView());
        std::map<std::int32_t, std::set<trace::EventKind>> kindsOfRank;
        for (const auto& e : view->timeline().events())
            if (trace::isPass(e.kind))
                kindsOfRank[e.rank].insert(e.kind);
        QCOMPARE(int(kindsOfRank.size()), 4);
        for (const auto& [rank, kinds] : kindsOfRank) {
            QVERIFY2(kinds.count(trace::EventKind::Forward) && kinds.count(trace::EventKind::Backward),
                qPrintable(QStringLiteral("rank %1 lacks F or B").arg(rank)));
            QCOMPARE(kinds.count(trace::EventKind::Weight) == 1, splitBackward);
        }

        // W in its own colour, in the legend and on screen (none of that colour without W).
        QCOMPARE(eventColor(trace::EventKind::Weight), colors::weight);
        QToolButton* chip = pane->legend()->chip(LegendKind::Weight);
        QVERIFY(chip && chip->isVisible() && chip->isChecked());
        QVERIFY(chip->text().contains(QStringLiteral("(W)")));
        QCOMPARE(legendColor(LegendKind::Weight), colors::weight);
        QCOMPARE(legendKindOf(trace::EventKind::Weight, trace::GroupKind::Other), LegendKind::Weight);
        view->viewport()->repaint();
        const int olive = pixelsOf(view, colors::weight);
        if (splitBackward)
            QVERIFY2(olive > 0, "no W box drawn in the W colour");
        else
            QCOMPARE(olive, 0);
    }
};

QTEST_MAIN(TestScheduleDock)
#include "tst_scheduledock.moc"
