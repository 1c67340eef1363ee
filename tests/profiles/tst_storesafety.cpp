// The store among other programs and other Looms: another application's SQLite file is refused untouched,
// two processes creating one store at once both succeed, a live run of another Loom is never marked
// interrupted, a read-only store is called read-only, and the catalog saves only profiles that read back.
#include "engine/profiles/BuiltinProfiles.h"
#include "profiles/ProfileCatalog.h"
#include "profiles/RunStore.h"
#include "profiles/Store.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QProcess>
#include <QSqlDatabase>
#include <QSqlQuery>
#include <QStandardPaths>
#include <QSysInfo>
#include <QTemporaryDir>
#include <QTest>

#include <cstdio>
#include <unistd.h>

using namespace loom::profiles;

namespace {

// Runs SQL on `path` through a connection of its own (not Store's).
void rawExec(const QString& path, const QStringList& statements)
{
    {
        QSqlDatabase db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), QStringLiteral("raw"));
        db.setDatabaseName(path);
        QVERIFY(db.open());
        for (const QString& sql : statements) {
            QSqlQuery q(db);
            QVERIFY2(q.exec(sql), qPrintable(sql));
        }
        db.close();
    }
    QSqlDatabase::removeDatabase(QStringLiteral("raw"));
}

QByteArray bytesOf(const QString& path)
{
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

template <typename F> QString storeError(F&& f)
{
    try {
        f();
    } catch (const StoreError& e) {
        return QString::fromStdString(e.what());
    }
    return {};
}

Profile model(const std::string& name)
{
    auto m = *BuiltinProfiles::instance().findModel("gpt-tiny");
    m.name = name;
    return Profile { m, "" };
}

Profile cluster(const std::string& name)
{
    auto c = *BuiltinProfiles::instance().findCluster("dgx-a100");
    c.name = name;
    return Profile { c, "" };
}

QString runState(RunStore& runs, qint64 id)
{
    return toString(runs.run(id)->state);
}

class TestStoreSafety : public QObject {
    Q_OBJECT

private slots:
    void anotherProgramsDatabaseIsLeftUntouched_data()
    {
        QTest::addColumn<QStringList>("statements");
        QTest::newRow("tables of its own")
            << QStringList { QStringLiteral("CREATE TABLE notes (id INTEGER, text TEXT)"),
                   QStringLiteral("INSERT INTO notes VALUES (1, 'mine')") };
        QTest::newRow("another application id") << QStringList { QStringLiteral("PRAGMA application_id = 1234") };
        QTest::newRow("a user_version but no Loom tables") << QStringList { QStringLiteral("PRAGMA user_version = 2"),
            QStringLiteral("CREATE TABLE profiles (x)"), QStringLiteral("CREATE TABLE accounts (y)") };
    }
    void anotherProgramsDatabaseIsLeftUntouched()
    {
        QFETCH(QStringList, statements);
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("other.db"));
        rawExec(path, statements);
        const QByteArray before = bytesOf(path);
        const QString message = storeError([&] { Store s(path); });
        QVERIFY2(
            message.contains(QLatin1String("is not a Loom database")) && message.contains(QLatin1String("untouched")),
            qPrintable(message));
        QCOMPARE(bytesOf(path), before);
        QVERIFY(!QFile::exists(path + QStringLiteral("-wal")));
    }

    void emptyAndOlderLoomStoresAreOpened()
    {
        QTemporaryDir dir;
        const QString empty = dir.filePath(QStringLiteral("empty.db"));
        QFile(empty).open(QIODevice::WriteOnly);
        {
            Store s(empty);
            QCOMPARE(s.schemaVersion(), Store::kSchemaVersion);
        }
        const QString older = dir.filePath(QStringLiteral("older.db"));
        {
            Store s(older, 3);
        }
        rawExec(older, { QStringLiteral("PRAGMA application_id = 0") }); // as an older Loom left it
        Store s(older);
        QCOMPARE(s.schemaVersion(), Store::kSchemaVersion);
    }

    // Two processes creating the same new store at once: both succeed (each waits for the other's lock).
    void concurrentCreation()
    {
        for (int attempt = 0; attempt < 5; ++attempt) {
            QTemporaryDir dir;
            const QString path = dir.filePath(QStringLiteral("new.db"));
            QProcess a, b;
            for (QProcess* p : { &a, &b }) {
                p->setProcessChannelMode(QProcess::MergedChannels);
                p->start(QCoreApplication::applicationFilePath(), { QStringLiteral("--open-store"), path });
            }
            for (QProcess* p : { &a, &b }) {
                QVERIFY(p->waitForFinished(60000));
                QVERIFY2(p->exitCode() == 0, p->readAll().constData());
            }
            QCOMPARE(Store(path).schemaVersion(), Store::kSchemaVersion);
        }
    }

    // A run is marked interrupted only when its owner is provably gone.
    void liveRunsAreNotInterrupted()
    {
        QTemporaryDir dir;
        Store store(dir.filePath(QStringLiteral("runs.db")));
        RunStore runs(store);
        const qint64 live
            = runs.startRun(QStringLiteral("live"), QStringLiteral("{}"), QStringLiteral("local"), QStringLiteral("x"));
        const qint64 dead
            = runs.startRun(QStringLiteral("dead"), QStringLiteral("{}"), QStringLiteral("local"), QStringLiteral("x"));
        const qint64 legacy = runs.startRun(
            QStringLiteral("legacy"), QStringLiteral("{}"), QStringLiteral("local"), QStringLiteral("x"));
        const qint64 remote = runs.startRun(
            QStringLiteral("remote"), QStringLiteral("{}"), QStringLiteral("local"), QStringLiteral("x"));
        rawExec(store.path(),
            { QStringLiteral("UPDATE runs SET owner = '%1 999999999 1' WHERE id = %2")
                    .arg(QSysInfo::machineHostName())
                    .arg(dead),
                QStringLiteral("UPDATE runs SET owner = '' WHERE id = %1").arg(legacy),
                QStringLiteral("UPDATE runs SET owner = 'another-host-xyz 1 1' WHERE id = %1").arg(remote) });
        QCOMPARE(runs.markInterrupted(), 2);
        QCOMPARE(runState(runs, live), QStringLiteral("running"));
        QCOMPARE(runState(runs, dead), QStringLiteral("interrupted"));
        QCOMPARE(runState(runs, legacy), QStringLiteral("interrupted"));
        QCOMPARE(runState(runs, remote), QStringLiteral("running"));
        // Another process (a second Loom) sees this one alive too.
        QProcess other;
        other.start(QCoreApplication::applicationFilePath(), { QStringLiteral("--mark-interrupted"), store.path() });
        QVERIFY(other.waitForFinished(60000));
        QCOMPARE(other.exitCode(), 0);
        QCOMPARE(runState(runs, live), QStringLiteral("running"));
    }

    void readOnlyStoreIsCalledReadOnly()
    {
        QTemporaryDir dir;
        const QString folder = dir.filePath(QStringLiteral("ro"));
        QDir().mkpath(folder);
        const QString path = folder + QStringLiteral("/loom.db");
        {
            Store s(path);
        }
        QProcess p;
        p.setProcessChannelMode(QProcess::MergedChannels);
        const QString self = QCoreApplication::applicationFilePath();
        if (::geteuid() == 0) { // root writes anywhere: a read-only bind mount in a mount namespace of its own
            if (QStandardPaths::findExecutable(QStringLiteral("unshare")).isEmpty())
                QSKIP("root without unshare: no way to make a read-only folder here");
            p.start(QStringLiteral("unshare"),
                { QStringLiteral("-m"), QStringLiteral("sh"), QStringLiteral("-c"),
                    QStringLiteral("mount --bind \"$1\" \"$1\" && mount -o remount,ro,bind \"$1\" && exec \"$2\" "
                                   "--open-store \"$3\""),
                    QStringLiteral("sh"), folder, self, path });
        } else {
            QFile::setPermissions(path, QFileDevice::ReadOwner);
            QFile::setPermissions(folder, QFileDevice::ReadOwner | QFileDevice::ExeOwner);
            p.start(self, { QStringLiteral("--open-store"), path });
        }
        QVERIFY(p.waitForFinished(60000));
        const QString out = QString::fromUtf8(p.readAll());
        if (out.contains(QLatin1String("mount:")) || out.contains(QLatin1String("unshare:")))
            QSKIP(qPrintable(QStringLiteral("cannot make a read-only mount here: ") + out));
        QFile::setPermissions(folder, QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ExeOwner);
        QVERIFY2(p.exitCode() == 1 && out.contains(QLatin1String("is read-only")), qPrintable(out));
    }

    // The catalog saves only what reads back, refuses names that read as options, and removes by kind.
    void catalogSavesOnlyWhatReadsBack()
    {
        QTemporaryDir dir;
        Store store(dir.filePath(QStringLiteral("cat.db")));
        ProfileCatalog catalog(&store);
        QVERIFY(!catalog.add(cluster(std::string(200, 'c'))).empty());
        auto broken = model("broken");
        std::get<loom::plan::ModelSpec>(broken.spec).layers = -3;
        const std::string refused = catalog.add(broken);
        QVERIFY2(refused.find("would not read back") != std::string::npos, refused.c_str());
        QVERIFY(catalog.find("broken").empty());
        QVERIFY(catalog.add(model("--json")).find("starts with '-'") != std::string::npos);
        QVERIFY(catalog.add(model("twin")).empty());
        QVERIFY(catalog.add(cluster("twin")).empty());
        QVERIFY(catalog.remove("twin", Profile::Kind::Model));
        const auto left = catalog.find("twin");
        QCOMPARE(left.size(), std::size_t(1));
        QVERIFY(left[0].profile.kind() == Profile::Kind::Cluster);
    }
};

} // namespace

// Child modes for the tests above: open a store (and report its error), or mark interrupted runs.
int main(int argc, char** argv)
{
    QCoreApplication app(argc, argv);
    if (argc == 3 && (std::string(argv[1]) == "--open-store" || std::string(argv[1]) == "--mark-interrupted")) {
        try {
            Store store(QString::fromLocal8Bit(argv[2]));
            if (std::string(argv[1]) == "--mark-interrupted")
                RunStore(store).markInterrupted();
        } catch (const StoreError& e) {
            std::fprintf(stdout, "%s\n", e.what());
            return 1;
        }
        return 0;
    }
    TestStoreSafety test;
    return QTest::qExec(&test, argc, argv);
}
#include "tst_storesafety.moc"
