// Context parallelism in the views: the strategy panel's cp spin box edits parallel.cp (dp follows from the
// devices, an impossible cp is refused with the reason), the map gives each device its cp coordinate and
// chunks, and the legend names the CP groups. With LOOM_SCREENSHOT_DIR set it also saves the panel and the
// map there (to look at them under Xvfb or offscreen).

#include "ViewsTest.h"
#include "engine/plan/CostModel.h"
#include "views/MapLegend.h"
#include "views/StrategyPanel.h"
#include "views/TopologyScene.h"
#include "views/TopologyView.h"

#include <QLabel>
#include <QSignalSpy>
#include <QSpinBox>

#include <nlohmann/json.hpp>

using namespace loom;
using namespace loom::views;

namespace {

plan::Layout cpLayout(int cp, int dp)
{
    nlohmann::json j = { { "loom_layout", 1 }, { "name", "cp" }, { "model", "llama2-7b" }, { "cluster", "dgx-a100" },
        { "nodes", 2 },
        { "parallel",
            { { "tp", 2 }, { "cp", cp }, { "pp", 2 }, { "dp", dp }, { "micro_batch", 1 }, { "global_batch", 16 } } },
        { "precision", "bf16" } };
    auto r = plan::readLayout(j.dump(), profiles::BuiltinProfiles::instance());
    if (!r.ok())
        qFatal("%s", r.diagnostics.format().c_str());
    return *r.layout;
}

void save(QWidget& w, const char* name)
{
    const QByteArray dir = qgetenv("LOOM_SCREENSHOT_DIR");
    if (!dir.isEmpty())
        w.grab().save(QString::fromLocal8Bit(dir) + QLatin1Char('/') + QLatin1String(name));
}

} // namespace

class TestContextViews : public QObject {
    Q_OBJECT
private slots:
    void spinBoxSetsCp()
    {
        StrategyPanel panel(&profiles::BuiltinProfiles::instance());
        panel.setLayout(cpLayout(1, 4));
        auto* cp = panel.findChild<QSpinBox*>(QStringLiteral("cp"));
        QVERIFY(cp);
        QCOMPARE(cp->value(), 1);
        QVERIFY(cp->toolTip().contains(QStringLiteral("ring attention")));
        QSignalSpy edits(&panel, &StrategyPanel::editRequested);
        cp->setValue(2);
        QCOMPARE(edits.count(), 1);
        const auto next = edits.at(0).at(0).value<plan::Layout>();
        QCOMPARE(next.parallel.cp, std::int64_t(2));
        QCOMPARE(next.parallel.dp, std::int64_t(2)); // 16 devices = tp 2 · cp 2 · pp 2 · dp 2
        // cp = 3 cannot divide the 16 devices: refused, with the reason, and the box shows cp 1 again.
        cp->setValue(3);
        QCOMPARE(edits.count(), 1);
        auto* refusal = panel.findChild<QLabel*>(QStringLiteral("refusal"));
        QVERIFY(refusal && refusal->text().contains(QStringLiteral("tp·cp·pp = 12")));
        QCOMPARE(cp->value(), 1);
        panel.setLayout(next);
        QCOMPARE(cp->value(), 2);
        panel.resize(420, 1200);
        save(panel, "strategy-cp.png");
    }

    void mapShowsContextGroups()
    {
        TopologyScene scene;
        const plan::Layout l = cpLayout(2, 2);
        const plan::Prediction p = plan::predict(l);
        scene.show(l, &p);
        // rank 3: tp 1, cp 1 (cp varies right after tp), pp 0, dp 0.
        const DeviceView& d = scene.device(0, 3);
        QCOMPARE(d.coord.cp, std::int64_t(1));
        QCOMPARE(d.coord.tp, std::int64_t(1));
        const QString tip = scene.deviceToolTip(0, 3);
        QVERIFY2(tip.contains(QStringLiteral("(tp 1, cp 1, pp 0, dp 0)")), qPrintable(tip));
        QVERIFY2(tip.contains(QStringLiteral("holds chunks 1 and 2 of the 4")), qPrintable(tip));
        MapLegend legend;
        legend.setLayout(l, 2);
        QVERIFY(legend.texts().contains(QStringLiteral("CP group of 2 (with its TP groups)")));
        TopologyView view(&scene);
        view.resize(900, 520);
        view.show();
        view.fitAll();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        save(view, "map-cp.png");
        legend.resize(900, legend.heightForWidth(900));
        save(legend, "legend-cp.png");
    }

    // Mixture of experts with ep 2 over dp 4: each device's label and tooltip name its expert-group member,
    // the experts it holds and the ranks it trades tokens and reduces expert gradients with.
    void mapShowsExpertGroups()
    {
        nlohmann::json j = { { "loom_layout", 1 }, { "name", "ep" }, { "model", "mixtral-8x7b" },
            { "cluster", "dgx-h100" }, { "nodes", 2 },
            { "parallel",
                { { "tp", 2 }, { "pp", 2 }, { "dp", 4 }, { "ep", 2 }, { "micro_batch", 1 }, { "global_batch", 16 } } },
            { "precision", "bf16" } };
        auto r = plan::readLayout(j.dump(), profiles::BuiltinProfiles::instance());
        QVERIFY2(r.ok(), r.diagnostics.format().c_str());
        const plan::Layout l = *r.layout;
        const plan::Prediction p = plan::predict(l);
        TopologyScene scene;
        scene.show(l, &p);
        // rank 4: tp 0, pp 0, dp 1 (tp-pp-dp): member e1 of the expert group {0, 4}; same position as 12.
        const QString tip = scene.deviceToolTip(0, 4);
        QVERIFY2(tip.contains(QStringLiteral("member e1 of an expert group of 2 (ranks 0, 4) holds experts 4 to 7")),
            qPrintable(tip));
        QVERIFY2(tip.contains(QStringLiteral("reduced with ranks 4, 12")), qPrintable(tip));
        MapLegend legend;
        legend.setLayout(l, 2);
        QVERIFY(legend.texts().contains(
            QStringLiteral("expert group member e0 … e1 (label and mark): which experts a device holds")));
        TopologyView view(&scene);
        view.resize(900, 520);
        view.show();
        view.fitAll();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        save(view, "map-ep.png");
    }
};

QTEST_MAIN(TestContextViews)
#include "tst_contextviews.moc"
