// The run panel's Logs: each rank's log of the shown run, listed by rank and stream from the folder its stored
// command names (mpirun's --output-filename, srun's --error), read from its end with a size limit and without
// telemetry frames; a run over ssh says that the logs are on the head node.
#include "ViewsTest.h"
#include "profiles/RunStore.h"
#include "profiles/Store.h"
#include "views/RankLogsDialog.h"
#include "views/RunMonitor.h"
#include "views/RunPanel.h"

#include <QDir>
#include <QLabel>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QTemporaryDir>

using namespace loom;
using namespace loom::views;

namespace {
bool write(const QString& path, const QByteArray& data)
{
    QDir().mkpath(QFileInfo(path).absolutePath());
    QFile f(path);
    return f.open(QIODevice::WriteOnly) && f.write(data) == data.size();
}

qint64 storeRun(profiles::Store& store, const QString& command)
{
    profiles::RunStore runs(store);
    const qint64 id = runs.startRun(QStringLiteral("tiny"),
        QString::fromStdString(plan::writeLayout(test::tinyLayout())), QStringLiteral("local"), command);
    runs.finishRun(id, profiles::RunState::Failed, QStringLiteral("rank 1 failed: out of memory"));
    return id;
}

RankLogsDialog* openLogs(RunPanel& panel)
{
    QTest::mouseClick(panel.logsButton(), Qt::LeftButton);
    const auto dialogs = panel.findChildren<RankLogsDialog*>();
    return dialogs.isEmpty() ? nullptr : dialogs.last();
}
} // namespace

class TestRankLogsDialog : public QObject {
    Q_OBJECT
private slots:
    void listsEachRanksLog_data()
    {
        QTest::addColumn<bool>("srun");
        QTest::newRow("mpirun") << false;
        QTest::newRow("srun") << true;
    }
    void listsEachRanksLog()
    {
        QFETCH(bool, srun);
        QTemporaryDir dir;
        profiles::Store store(dir.filePath(QStringLiteral("loom.db")));
        const QString logs = dir.filePath(QStringLiteral("runs/1/logs"));
        QString command;
        if (srun) {
            QVERIFY(write(logs + "/rank.0.stderr", "rank 0 says hello\n"));
            QVERIFY(write(logs + "/rank.1.stderr", "loom-train: rank 1: out of memory\n"));
            command = QStringLiteral("srun --mpi=pmix --error=%1/rank.%t.stderr loom-train --layout x").arg(logs);
        } else {
            QVERIFY(write(logs + "/1/rank.0/stdout", "\x1e{\"type\":\"step\"} 0badc0de\nrank 0 out\n"));
            QVERIFY(write(logs + "/1/rank.0/stderr", "rank 0 says hello\n"));
            QVERIFY(write(logs + "/1/rank.1/stderr", "loom-train: rank 1: out of memory\n"));
            command = QStringLiteral("mpirun -np 2 --output-filename %1 loom-train --layout x").arg(logs);
        }
        const qint64 id = storeRun(store, command);
        RunMonitor monitor(&store);
        RunPanel panel(&monitor);
        panel.show();
        QVERIFY(!panel.logsButton()->isEnabled()); // no run shown yet
        QString error;
        QVERIFY2(monitor.open(id, &error), qPrintable(error));
        QTRY_VERIFY(panel.logsButton()->isEnabled());
        RankLogsDialog* d = openLogs(panel);
        QVERIFY(d);
        QVERIFY(d->isVisible());
        QStringList rows;
        for (int i = 0; i < d->files()->count(); ++i)
            rows << d->files()->item(i)->text();
        const QStringList expected = srun ? QStringList { "rank 0 · stderr", "rank 1 · stderr" }
                                          : QStringList { "rank 0 · stderr", "rank 0 · stdout", "rank 1 · stderr" };
        QCOMPARE(rows, expected);
        QCOMPARE(d->text()->toPlainText(), QStringLiteral("rank 0 says hello\n"));
        d->files()->setCurrentRow(d->files()->count() - 1);
        QCOMPARE(d->text()->toPlainText(), QStringLiteral("loom-train: rank 1: out of memory\n"));
        if (!srun) { // rank 0's stdout without its telemetry frame
            d->files()->setCurrentRow(1);
            QVERIFY2(
                d->text()->toPlainText().endsWith(QLatin1String("rank 0 out\n")), qPrintable(d->text()->toPlainText()));
            QVERIFY(!d->text()->toPlainText().contains(QChar(0x1e)));
        }
        QVERIFY(d->where()->text().contains(logs));
    }

    // A log larger than the dialog shows: its end, from a whole line, and how much was left out.
    void bigLogShownFromItsEnd()
    {
        QTemporaryDir dir;
        profiles::Store store(dir.filePath(QStringLiteral("loom.db")));
        const QString logs = dir.filePath(QStringLiteral("logs"));
        QByteArray big;
        for (int i = 0; big.size() < 3 * RankLogsDialog::kShownBytes; ++i)
            big += "line " + QByteArray::number(i) + " of a chatty rank\n";
        big += "the last line\n";
        QVERIFY(write(logs + "/1/rank.0/stderr", big));
        RankLogsDialog d(1, QStringLiteral("mpirun --output-filename %1 loom-train").arg(logs));
        const QString shown = d.text()->toPlainText();
        QVERIFY(shown.size() <= RankLogsDialog::kShownBytes + 200);
        QVERIFY(shown.startsWith(QLatin1String("[stderr: the first ")));
        QVERIFY(shown.endsWith(QLatin1String("the last line\n")));
    }

    void sshLogsAreOnTheHeadNode()
    {
        RankLogsDialog d(3,
            QStringLiteral("ssh -o BatchMode=yes -- hosta <head-node script running mpirun, each rank's output in "
                           "loom-runs/20260101-000000-000/logs>"));
        QCOMPARE(d.files()->count(), 0);
        QVERIFY2(d.where()->text().contains(QLatin1String("head node, in loom-runs/20260101-000000-000/logs/1/rank.N")),
            qPrintable(d.where()->text()));
        RankLogsDialog none(4,
            QStringLiteral("ssh -- hosta <head-node script running mpirun; no rank logs: run_dir "
                           "holds characters a shell reads>"));
        QVERIFY(none.where()->text().contains(QLatin1String("kept no log per rank")));
    }
};

QTEST_MAIN(TestRankLogsDialog)
#include "tst_ranklogsdialog.moc"
