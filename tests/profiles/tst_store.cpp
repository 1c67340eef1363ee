// The store: created from nothing, migrated from an older schema with its data kept, refused clearly
// when it is not a Loom database or is newer than this Loom; and the catalog that merges user profiles.
#include "engine/plan/LayoutParser.h"
#include "profiles/ProfileCatalog.h"
#include "profiles/Store.h"

#include <QFile>
#include <QSqlDatabase>
#include <QSqlQuery>
#include <QTemporaryDir>
#include <QTest>

using namespace loom::profiles;

namespace {

Profile userModel(const std::string& name)
{
    loom::plan::ModelSpec m;
    m.name = name;
    m.layers = 2;
    m.hidden = 32;
    m.heads = 2;
    m.ffnHidden = 128;
    m.vocab = 256;
    m.seqLen = 16;
    m.description = "a user model";
    return Profile { m, "my notes" };
}

// Reads one value with a raw SQLite connection, independent of Store.
QVariant rawQuery(const QString& path, const QString& sql)
{
    QVariant value;
    {
        QSqlDatabase db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), QStringLiteral("raw"));
        db.setDatabaseName(path);
        if (db.open()) {
            QSqlQuery q(db);
            if (q.exec(sql) && q.next())
                value = q.value(0);
        }
        db.close();
    }
    QSqlDatabase::removeDatabase(QStringLiteral("raw"));
    return value;
}

template <typename F> QString storeError(F&& f)
{
    try {
        f();
    } catch (const StoreError& e) {
        return QString::fromUtf8(e.what());
    }
    return {};
}

} // namespace

class TestStore : public QObject {
    Q_OBJECT
private slots:
    void createdFromNothing()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("nested/folders/loom.db"));
        {
            Store store(path);
            QCOMPARE(store.schemaVersion(), Store::kSchemaVersion);
            QVERIFY(store.profiles().empty());
            QVERIFY(store.layouts().empty());
        }
        QVERIFY(QFile::exists(path));
        QCOMPARE(rawQuery(path, QStringLiteral("PRAGMA journal_mode")).toString(), QStringLiteral("wal"));
        QCOMPARE(rawQuery(path, QStringLiteral("PRAGMA user_version")).toInt(), Store::kSchemaVersion);
        // Opening again is a no-op: no migration runs twice.
        Store again(path);
        QCOMPARE(again.schemaVersion(), Store::kSchemaVersion);
    }

    void migratedKeepingData()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("loom.db"));
        {
            Store v1(path, 1); // an earlier Loom: profiles but no saved layouts
            QCOMPARE(v1.schemaVersion(), 1);
            v1.saveProfile(userModel("kept"));
            QVERIFY(!rawQuery(path, QStringLiteral("SELECT name FROM sqlite_master WHERE name = 'layouts'")).isValid());
        }
        Store current(path);
        QCOMPARE(current.schemaVersion(), Store::kSchemaVersion);
        const auto profiles = current.profiles();
        QCOMPARE(profiles.size(), std::size_t(1));
        QCOMPARE(profiles[0].name(), std::string("kept"));
        QCOMPARE(profiles[0].source, std::string("my notes"));
        current.saveLayout(QStringLiteral("mine"), QStringLiteral("{\"loom_layout\": 1}"));
        QCOMPARE(current.layouts().size(), std::size_t(1));
    }

    void profilesAndLayouts()
    {
        QTemporaryDir dir;
        Store store(dir.filePath(QStringLiteral("loom.db")));
        store.saveProfile(userModel("a"));
        Profile changed = userModel("a");
        std::get<loom::plan::ModelSpec>(changed.spec).layers = 6;
        store.saveProfile(changed); // same kind and name: replaced
        QCOMPARE(store.profiles().size(), std::size_t(1));
        QCOMPARE(std::get<loom::plan::ModelSpec>(store.profiles()[0].spec).layers, 6);
        QVERIFY(store.removeProfile(Profile::Kind::Model, QStringLiteral("a")));
        QVERIFY(!store.removeProfile(Profile::Kind::Model, QStringLiteral("a")));

        const QString tricky = QStringLiteral("$(touch pwned); DROP TABLE layouts; --'\"");
        store.saveLayout(tricky, QStringLiteral("{}"));
        store.saveLayout(tricky, QStringLiteral("{\"v\": 2}"));
        QCOMPARE(store.layouts().size(), std::size_t(1));
        QCOMPARE(store.layout(tricky)->json, QStringLiteral("{\"v\": 2}"));
        QVERIFY(!store.layout(QStringLiteral("absent")));
        QVERIFY(store.removeLayout(tricky));
        QVERIFY(store.layouts().empty());
    }

    void refusesWhatItCannotUse()
    {
        QTemporaryDir dir;
        const QString garbage = dir.filePath(QStringLiteral("garbage.db"));
        QFile f(garbage);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(QByteArray(4096, 'x'));
        f.close();
        QString message = storeError([&] { Store s(garbage); });
        QVERIFY2(message.contains(QStringLiteral("is not a Loom database")) && message.contains(garbage),
            qPrintable(message));

        const QString newer = dir.filePath(QStringLiteral("newer.db"));
        {
            Store s(newer);
        }
        rawQuery(newer, QStringLiteral("PRAGMA user_version = 99"));
        message = storeError([&] { Store s(newer); });
        QVERIFY2(message.contains(QStringLiteral("schema version 99, newer than this Loom understands (5)")),
            qPrintable(message));

        message = storeError([&] { Store s(dir.path()); });
        QVERIFY2(message.contains(QStringLiteral("is a folder")), qPrintable(message));
    }

    void defaultPathFollowsLoomDb()
    {
        qputenv("LOOM_DB", "/tmp/somewhere/else.db");
        QCOMPARE(Store::defaultPath(), QStringLiteral("/tmp/somewhere/else.db"));
        qunsetenv("LOOM_DB");
        qputenv("XDG_DATA_HOME", "/tmp/xdg-data");
        QCOMPARE(Store::defaultPath(), QStringLiteral("/tmp/xdg-data/loom/loom.db"));
    }

    void catalogMergesUserProfiles()
    {
        QTemporaryDir dir;
        Store store(dir.filePath(QStringLiteral("loom.db")));
        ProfileCatalog catalog(&store);
        QCOMPARE(catalog.add(userModel("gpt2-124m")),
            std::string("\"gpt2-124m\" is a built-in model profile; give yours another name"));
        QVERIFY(catalog.add(userModel("my-model")).empty());
        const auto names = catalog.modelNames();
        QVERIFY(std::find(names.begin(), names.end(), "my-model") != names.end());
        QVERIFY(catalog.find("my-model").at(0).origin == ProfileCatalog::Origin::User);
        QCOMPARE(catalog.entries().size(), BuiltinProfiles::instance().all().size() + 1);

        // A layout may name the user profile.
        const char* layout = R"({"loom_layout": 1, "name": "u", "model": "my-model", "cluster": "local",
                                 "parallel": {"tp": 2, "pp": 2, "dp": 1, "micro_batch": 1, "global_batch": 2}})";
        auto r = loom::plan::readLayout(layout, catalog);
        QVERIFY2(r.ok(), r.diagnostics.format().c_str());
        QCOMPARE(r.layout->model.hidden, 32);
        QVERIFY(!catalog.remove("gpt2-124m"));
        QVERIFY(catalog.remove("my-model"));
        QVERIFY(!loom::plan::readLayout(layout, catalog).ok());
    }
};

QTEST_GUILESS_MAIN(TestStore)
#include "tst_store.moc"
