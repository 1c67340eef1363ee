// The run panel after Cancel: the ranks finish the step they are in, and the steps that still arrive do not
// overwrite "Cancelling…" with a step line and an ETA (they did at once). A stand-in for mpirun (first on
// PATH) streams steps and ignores the cancel's SIGTERM, so steps go on arriving after Cancel (as a slow
// rank's last steps do) until the grace period's SIGKILL ends it.
#include "ViewsTest.h"
#include "engine/trace/TelemetryFrames.h"
#include "profiles/Store.h"
#include "views/RunMonitor.h"
#include "views/RunPanel.h"

#include <QDir>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>

using namespace loom;
using namespace loom::views;

namespace {
bool writeBytes(const QString& path, const std::string& data)
{
    QFile f(path);
    return f.open(QIODevice::WriteOnly | QIODevice::Truncate)
        && f.write(data.data(), qint64(data.size())) == qint64(data.size());
}

std::string stepFrame(std::int64_t step)
{
    return trace::encode(trace::StepFrame { step, 3.0 - 1e-3 * double(step), 1000, 0.05, 1, 1e-3, 1e9, {} });
}
} // namespace

class TestRunPanelCancel : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

private slots:
    void cancellingStaysShownWhileStepsArrive()
    {
        constexpr int kStreamed = 1000;
        QVERIFY(writeBytes(m_dir.filePath(QStringLiteral("head.bin")),
            trace::encode(trace::RunFrame { 2, R"({"name":"cancel"})", 2, 1, kStreamed })));
        for (int s = 1; s <= kStreamed; ++s)
            QVERIFY(writeBytes(m_dir.filePath(QStringLiteral("step-%1.bin").arg(s)), stepFrame(s)));
        const QString bin = m_dir.filePath(QStringLiteral("bin"));
        QVERIFY(QDir().mkpath(bin));
        const QString script = QStringLiteral("#!/bin/sh\ncd '%1'\ntrap '' TERM\ncat head.bin\n"
                                              "for n in $(seq 1 %2); do cat step-$n.bin; sleep 0.05; done\n"
                                              "while :; do sleep 1; done\n")
                                   .arg(m_dir.path())
                                   .arg(kStreamed);
        QVERIFY(writeBytes(bin + QStringLiteral("/mpirun"), script.toStdString()));
        QFile::setPermissions(bin + QStringLiteral("/mpirun"), QFileDevice::ReadOwner | QFileDevice::ExeOwner);
        qputenv("PATH", (bin + QLatin1Char(':')).toUtf8() + qgetenv("PATH"));
        qputenv("LOOM_TRAIN", (bin + QStringLiteral("/mpirun")).toUtf8()); // must exist; never started

        profiles::Store store(m_dir.filePath(QStringLiteral("loom.db")));
        RunMonitor monitor(&store);
        RunPanel panel(&monitor);
        panel.show();
        panel.setLayout(test::tinyLayout(), true);
        panel.stepsBox()->setValue(kStreamed);
        QSignalSpy finished(&monitor, &RunMonitor::finished);
        QTest::mouseClick(panel.runButton(), Qt::LeftButton);
        QTRY_VERIFY2_WITH_TIMEOUT(monitor.steps().size() >= 2, qPrintable(panel.status()), 30000);
        QVERIFY2(panel.status().contains(QLatin1String("ETA")), qPrintable(panel.status()));
        QTest::mouseClick(panel.cancelButton(), Qt::LeftButton);
        QVERIFY2(panel.status().startsWith(QLatin1String("Cancelling")), qPrintable(panel.status()));
        // Steps that arrive after the cancel: shown as steps done while cancelling, not with an ETA.
        const std::int64_t atCancel = monitor.steps().back().step;
        QTRY_VERIFY_WITH_TIMEOUT(monitor.steps().back().step > atCancel + 1, 30000);
        const std::int64_t later = monitor.steps().back().step;
        QVERIFY2(panel.status().startsWith(QLatin1String("Cancelling run")), qPrintable(panel.status()));
        QVERIFY2(panel.status().contains(QStringLiteral("step %1 done").arg(later)), qPrintable(panel.status()));
        QVERIFY(!panel.status().contains(QLatin1String("ETA")));
        QVERIFY(finished.wait(30000) || !finished.isEmpty());
        QCOMPARE(profiles::toString(monitor.state()), QStringLiteral("cancelled"));
        QVERIFY2(panel.status().contains(QLatin1String("cancelled")), qPrintable(panel.status()));
        QVERIFY(panel.runButton()->isEnabled());
    }
};

QTEST_MAIN(TestRunPanelCancel)
#include "tst_runpanelcancel.moc"
