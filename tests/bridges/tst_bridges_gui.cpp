// The workbench's bridges: File → Export To writes the open layout (or says what the target cannot express),
// File → Open Trace reads PyTorch profiler traces in the background into the Trace dock's timeline.
#include "app/gui/Bridges.h"
#include "app/gui/MainWindow.h"
#include "engine/profiles/BuiltinProfiles.h"
#include "views/TimelineView.h"

#include <QAction>
#include <QDockWidget>
#include <QFile>
#include <QMenu>
#include <QMenuBar>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

using namespace loom;

namespace {
const QString kDir = QStringLiteral(LOOM_SOURCE_DIR "/tests/bridges/");
}

class TestBridgesGui : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

private slots:
    void initTestCase()
    {
        qputenv("XDG_CONFIG_HOME", m_dir.filePath(QStringLiteral("config")).toLocal8Bit());
        QCoreApplication::setOrganizationName(QStringLiteral("loom-test"));
        QCoreApplication::setApplicationName(QStringLiteral("tst_bridges_gui"));
    }

    void menuEntries()
    {
        app::MainWindow w(profiles::BuiltinProfiles::instance());
        QStringList texts;
        for (auto* a : w.menuBar()->actions().first()->menu()->actions())
            texts << a->text();
        QVERIFY2(texts.contains(QStringLiteral("Open &Trace…")), qPrintable(texts.join('|')));
        QVERIFY2(texts.contains(QStringLiteral("&Export To")), qPrintable(texts.join('|')));
    }

    void exportWritesFiles()
    {
        app::MainWindow w(profiles::BuiltinProfiles::instance());
        QVERIFY(w.openFile(kDir + "layouts/gpt-mini-local.json"));
        const QString out = m_dir.filePath(QStringLiteral("mini.ds_config.json"));
        bool ok = false;
        const QString message = w.bridges()->exportTo(plan::ExportTarget::DeepSpeed, out, &ok);
        QVERIFY2(ok, qPrintable(message));
        QVERIFY(QFile::exists(out));
        QVERIFY(QFile::exists(m_dir.filePath(QStringLiteral("mini.deepspeed.sh"))));
        QVERIFY(QFile(m_dir.filePath(QStringLiteral("mini.deepspeed.sh"))).permissions() & QFileDevice::ExeOwner);
        // torchtitan cannot take a GPT: the reasons, and no file.
        const QString refused = m_dir.filePath(QStringLiteral("mini.toml"));
        const QString why = w.bridges()->exportTo(plan::ExportTarget::TorchTitan, refused, &ok);
        QVERIFY(!ok);
        QVERIFY(why.contains(QStringLiteral("torchtitan cannot express this layout")));
        QVERIFY(why.contains(QStringLiteral("torchtitan trains Llama-style models")));
        QVERIFY(!QFile::exists(refused));
    }

    void openTraceShowsTimeline()
    {
        app::MainWindow w(profiles::BuiltinProfiles::instance());
        QVERIFY(w.openFile(kDir + "layouts/pipeline-2-gloo.json"));
        QSignalSpy opened(w.bridges(), &app::Bridges::traceOpened);
        w.bridges()->openTraces({ kDir + "fixtures/pipeline-2.rank0.json", kDir + "fixtures/pipeline-2.rank1.json" });
        QVERIFY(opened.wait(30000));
        QCOMPARE(opened.first().at(0).toBool(), true);
        QVERIFY(opened.first().at(1).toString().contains(QStringLiteral("2 ranks, 3 steps")));
        auto* dock = w.findChild<QDockWidget*>(QStringLiteral("traceDock"));
        QVERIFY(dock && !dock->isHidden());
        QVERIFY(w.bridges()->traceView() != nullptr);

        // A file that is not a trace: the reason, no crash.
        const auto bad = app::Bridges::readTraces({ kDir + "layouts/pipeline-2-gloo.json" }, std::nullopt);
        QVERIFY(!bad.ok);
        QVERIFY(bad.summary.contains(QStringLiteral("traceEvents: missing")));
    }
};

QTEST_MAIN(TestBridgesGui)
#include "tst_bridges_gui.moc"
