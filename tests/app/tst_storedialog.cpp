// The run store survives the file dialog: File ▸ Open shown on the folder that holds the store must not open
// and close a descriptor of the store's files outside SQLite (closing any descriptor of a file drops every
// POSIX lock the process holds on it, so the next `loom` command beside the window would take the store's
// WAL away from under the window). The window runs as a child process (this program with --gui-child), so
// it can be killed with SIGKILL as a crash would; every run it recorded must be in the store afterwards.

#include "app/gui/MainWindow.h"
#include "engine/profiles/BuiltinProfiles.h"
#include "profiles/RunStore.h"
#include "profiles/Store.h"
#include "views/FileDialogs.h"

#include <QAbstractItemView>
#include <QApplication>
#include <QFileDialog>
#include <QFileSystemModel>
#include <QProcess>
#include <QSocketNotifier>
#include <QSqlDatabase>
#include <QSqlQuery>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>

#include <iostream>

#include <signal.h>
#include <unistd.h>

using namespace loom;

namespace {

constexpr int kWaitMs = 120000; // waits end when the line comes; the bound only stops a hang

// A run as the launcher records one: a few steps, a few events, finished.
void recordRun(profiles::Store& store, const QString& name)
{
    profiles::RunStore runs(store);
    const qint64 id = runs.startRun(name, QStringLiteral("{}"), QStringLiteral("local"), QStringLiteral("test"));
    for (int s = 0; s < 3; ++s) {
        profiles::StepRecord step;
        step.step = s;
        step.loss = 5.0 - s;
        runs.addStep(id, step);
    }
    std::vector<trace::TraceEvent> events(10);
    for (int i = 0; i < 10; ++i) {
        events[std::size_t(i)].startNs = i * 100;
        events[std::size_t(i)].endNs = i * 100 + 50;
    }
    runs.addEvents(id, events);
    runs.finishRun(id, profiles::RunState::Finished, QString());
}

void say(const char* line)
{
    std::cout << line << std::endl;
}

// The window's side: record a run, show File ▸ Open on the store's folder (the working folder) until the
// folder is listed and drawn in detail, cancel it, then record a second run when the parent says so.
int guiChild(int& argc, char** argv)
{
    QApplication app(argc, argv);
    profiles::Store store(profiles::Store::defaultPath());
    app::MainWindow window(profiles::BuiltinProfiles::instance(), &store);
    window.show();
    recordRun(store, QStringLiteral("before-dialog"));

    QTimer poll;
    poll.setInterval(20);
    QObject::connect(&poll, &QTimer::timeout, [&poll] {
        auto* dialog = qobject_cast<QFileDialog*>(QApplication::activeModalWidget());
        auto* model = dialog ? dialog->findChild<QFileSystemModel*>() : nullptr;
        if (!model)
            return;
        if (dialog->selectedNameFilter() != dialog->nameFilters().constLast())
            dialog->selectNameFilter(dialog->nameFilters().constLast()); // "All files (*)", as a user looking
        if (model->rowCount(model->index(QDir::currentPath())) == 0)
            return; // not listed yet
        poll.stop();
        dialog->setViewMode(QFileDialog::Detail); // the type column, as a user switching views sees it
        dialog->grab(); // draws every row: icons and types are asked for
        for (auto* view : dialog->findChildren<QAbstractItemView*>())
            view->grab();
        QTimer::singleShot(200, dialog, [dialog] {
            dialog->grab();
            dialog->reject();
        });
    });
    poll.start();
    for (QAction* a : window.findChildren<QAction*>())
        if (a->shortcut() == QKeySequence(QKeySequence::Open)) {
            a->trigger(); // returns once the dialog is cancelled
            break;
        }
    say("dialog-closed");

    QSocketNotifier input(STDIN_FILENO, QSocketNotifier::Read);
    QObject::connect(&input, &QSocketNotifier::activated, [&store, &input] {
        char c = 0;
        if (::read(STDIN_FILENO, &c, 1) != 1 || c != 'w')
            return;
        input.setEnabled(false);
        recordRun(store, QStringLiteral("after-dialog"));
        say("written");
    });
    return app.exec(); // until killed
}

bool waitForLine(QProcess& p, const QByteArray& line)
{
    QByteArray seen;
    while (!seen.contains(line)) {
        if (!p.waitForReadyRead(kWaitMs))
            return false;
        seen += p.readAllStandardOutput();
    }
    return true;
}

} // namespace

class TestStoreDialog : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

    QString storePath() const { return m_dir.filePath(QStringLiteral("store/loom.db")); }

    QProcessEnvironment env() const
    {
        QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
        e.insert(QStringLiteral("LOOM_DB"), storePath());
        e.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
        e.insert(QStringLiteral("XDG_CONFIG_HOME"), m_dir.filePath(QStringLiteral("config")));
        return e;
    }

    // `loom runs list` beside the window, on the same store.
    QString cliRunsList() const
    {
        QProcess cli;
        cli.setProcessEnvironment(env());
        cli.start(QStringLiteral(LOOM_EXE), { QStringLiteral("runs"), QStringLiteral("list") });
        if (!cli.waitForFinished(kWaitMs))
            return QStringLiteral("(timed out)");
        return QString::fromUtf8(cli.readAllStandardOutput() + cli.readAllStandardError());
    }

private slots:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        QVERIFY(QDir().mkpath(m_dir.filePath(QStringLiteral("store"))));
    }

    // The provider the dialogs use never reads a file: it names types from the file name alone.
    void iconProviderReadsNoFile()
    {
        const QString path = m_dir.filePath(QStringLiteral("unreadable.db"));
        QFile f(path);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("SQLite format 3");
        f.close();
        QVERIFY(f.setPermissions(QFileDevice::Permissions()));
        views::NameOnlyIconProvider provider;
        QVERIFY(!provider.type(QFileInfo(path)).isEmpty());
        QVERIFY(!provider.type(QFileInfo(m_dir.path())).isEmpty());
        QFileDialog dialog;
        views::configureFileDialog(dialog);
        QVERIFY(dialog.testOption(QFileDialog::DontUseNativeDialog));
        QVERIFY(dynamic_cast<const views::NameOnlyIconProvider*>(dialog.iconProvider()));
    }

    void storeSurvivesTheDialog()
    {
        QProcess gui;
        gui.setProcessEnvironment(env());
        gui.setWorkingDirectory(m_dir.filePath(QStringLiteral("store")));
        gui.setProcessChannelMode(QProcess::ForwardedErrorChannel);
        gui.start(QCoreApplication::applicationFilePath(), { QStringLiteral("--gui-child") });
        QVERIFY(gui.waitForStarted());
        QVERIFY2(waitForLine(gui, "dialog-closed"), "the window never showed and closed the dialog");

        const QString listed = cliRunsList();
        QVERIFY2(listed.contains(QLatin1String("before-dialog")), qPrintable(listed));
        // SQLite keeps a WAL store's -wal and -shm while any connection is open: the window's still is.
        QVERIFY2(QFile::exists(storePath() + QStringLiteral("-shm")),
            "the command beside the window removed the store's -shm: the window's locks were dropped");

        gui.write("w");
        QVERIFY2(waitForLine(gui, "written"), "the window did not record its second run");
        const QString listedAfter = cliRunsList();
        QVERIFY2(listedAfter.contains(QLatin1String("after-dialog")), qPrintable(listedAfter));

        ::kill(pid_t(gui.processId()), SIGKILL);
        QVERIFY(gui.waitForFinished(kWaitMs));

        {
            QSqlDatabase db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), QStringLiteral("check"));
            db.setDatabaseName(storePath());
            QVERIFY(db.open());
            QSqlQuery q(db);
            QVERIFY(q.exec(QStringLiteral("PRAGMA integrity_check")) && q.next());
            QCOMPARE(q.value(0).toString(), QStringLiteral("ok"));
            QVERIFY(q.exec(QStringLiteral("SELECT name, state, (SELECT COUNT(*) FROM step_metrics s WHERE s.run_id = "
                                          "r.id), (SELECT COUNT(*) FROM events e WHERE e.run_id = r.id) FROM runs r "
                                          "ORDER BY id")));
            QStringList rows;
            while (q.next())
                rows << QStringLiteral("%1 %2 %3 %4")
                            .arg(q.value(0).toString(), q.value(1).toString(), q.value(2).toString(),
                                q.value(3).toString());
            QCOMPARE(rows,
                QStringList(
                    { QStringLiteral("before-dialog finished 3 10"), QStringLiteral("after-dialog finished 3 10") }));
        }
        QSqlDatabase::removeDatabase(QStringLiteral("check"));
    }
};

int main(int argc, char** argv)
{
    if (argc > 1 && qstrcmp(argv[1], "--gui-child") == 0)
        return guiChild(argc, argv);
    QApplication app(argc, argv);
    TestStoreDialog test;
    QTEST_SET_MAIN_SOURCE_PATH
    return QTest::qExec(&test, argc, argv);
}

#include "tst_storedialog.moc"
