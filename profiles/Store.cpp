#include "profiles/Store.h"

#include <QDir>
#include <QFileInfo>
#include <QSqlDatabase>
#include <QSqlError>
#include <QSqlQuery>
#include <QStandardPaths>
#include <QUuid>

namespace loom::profiles {

namespace {

// One migration: the statements that take the schema from version - 1 to version.
struct Migration {
    int version;
    const char* what;
    std::vector<const char*> statements;
};

const std::vector<Migration>& migrations()
{
    static const std::vector<Migration> list = {
        { 1, "user profiles",
            { "CREATE TABLE profiles ("
              " id INTEGER PRIMARY KEY,"
              " kind TEXT NOT NULL CHECK (kind IN ('model', 'cluster')),"
              " name TEXT NOT NULL,"
              " json TEXT NOT NULL,"
              " created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),"
              " updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),"
              " UNIQUE (kind, name))" } },
        { 2, "saved layouts",
            { "CREATE TABLE layouts ("
              " id INTEGER PRIMARY KEY,"
              " name TEXT NOT NULL UNIQUE,"
              " json TEXT NOT NULL,"
              " created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),"
              " updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')))" } },
        { 3, "runs, their step metrics and events",
            { "CREATE TABLE runs ("
              " id INTEGER PRIMARY KEY,"
              " name TEXT NOT NULL,"
              " layout_json TEXT NOT NULL,"
              " cluster TEXT NOT NULL,"
              " command TEXT NOT NULL,"
              " started_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),"
              " ended_at TEXT,"
              " state TEXT NOT NULL CHECK (state IN ('running', 'finished', 'failed', 'cancelled', 'interrupted')),"
              " exit_cause TEXT NOT NULL DEFAULT '',"
              " steps INTEGER NOT NULL DEFAULT 0)",
                "CREATE TABLE step_metrics ("
                " run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,"
                " step INTEGER NOT NULL,"
                " loss REAL, tokens_per_s REAL, step_time_s REAL, grad_norm REAL, lr REAL,"
                " PRIMARY KEY (run_id, step))",
                "CREATE TABLE events ("
                " run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,"
                " rank INTEGER, lane INTEGER, kind INTEGER, source INTEGER, step INTEGER, micro_batch INTEGER,"
                " stage INTEGER, chunk INTEGER, start_ns INTEGER, end_ns INTEGER, bytes INTEGER, wire_bytes INTEGER,"
                " grp INTEGER, group_size INTEGER, peer INTEGER, algorithm INTEGER, codec TEXT)",
                "CREATE INDEX events_by_run ON events (run_id, rank, start_ns)",
                "CREATE TABLE checkpoints ("
                " run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,"
                " step INTEGER NOT NULL, path TEXT NOT NULL,"
                " PRIMARY KEY (run_id, step))" } },
    };
    return list;
}

QSqlDatabase database(const QString& connection)
{
    return QSqlDatabase::database(connection, false);
}

[[noreturn]] void fail(const QString& path, const QString& what, const QSqlError& error)
{
    throw StoreError(QStringLiteral("store %1: %2 (%3)").arg(path, what, error.text()).toStdString());
}

QSqlQuery exec(const QString& connection, const QString& path, const QString& sql)
{
    QSqlQuery q(database(connection));
    if (!q.exec(sql))
        fail(path, QStringLiteral("\"%1\" failed").arg(sql.left(60)), q.lastError());
    return q;
}

} // namespace

Store::Store(const QString& path)
    : Store(path, kSchemaVersion)
{
}

Store::Store(const QString& path, int targetVersion)
    : m_path(path)
    , m_connection(QStringLiteral("loom-store-") + QUuid::createUuid().toString(QUuid::WithoutBraces))
{
    try {
        open(targetVersion);
    } catch (...) {
        QSqlDatabase::removeDatabase(m_connection);
        throw;
    }
}

Store::~Store()
{
    {
        QSqlDatabase db = database(m_connection);
        if (db.isOpen())
            db.close();
    }
    QSqlDatabase::removeDatabase(m_connection);
}

QString Store::defaultPath()
{
    const QString fromEnv = qEnvironmentVariable("LOOM_DB");
    if (!fromEnv.isEmpty())
        return fromEnv;
    return QStandardPaths::writableLocation(QStandardPaths::GenericDataLocation) + QStringLiteral("/loom/loom.db");
}

void Store::open(int targetVersion)
{
    if (!QSqlDatabase::isDriverAvailable(QStringLiteral("QSQLITE")))
        throw StoreError("the Qt SQLite driver (QSQLITE) is missing; install libqt6sql6-sqlite "
                         "(installer/bootstrap.sh does)");
    QFileInfo info(m_path);
    if (info.exists() && info.isDir())
        throw StoreError(QStringLiteral("store %1 is a folder; set LOOM_DB to a file path").arg(m_path).toStdString());
    if (!QDir().mkpath(info.absolutePath()))
        throw StoreError(
            QStringLiteral("cannot create the folder %1 for the store; check its permissions or set LOOM_DB")
                .arg(info.absolutePath())
                .toStdString());

    QSqlDatabase db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), m_connection);
    db.setDatabaseName(m_path);
    if (!db.open())
        fail(m_path, QStringLiteral("cannot open the database; check the path and its permissions or set LOOM_DB"),
            db.lastError());

    // The first real read tells an SQLite file from anything else.
    QSqlQuery q(db);
    if (!q.exec(QStringLiteral("PRAGMA user_version")) || !q.next())
        fail(m_path, QStringLiteral("is not a Loom database; move it away or set LOOM_DB to another file"),
            q.lastError());
    const int version = q.value(0).toInt();
    q.finish();
    if (version > kSchemaVersion)
        throw StoreError(QStringLiteral("store %1 has schema version %2, newer than this Loom understands (%3); use a "
                                        "newer Loom or set LOOM_DB to another file")
                             .arg(m_path)
                             .arg(version)
                             .arg(kSchemaVersion)
                             .toStdString());

    exec(m_connection, m_path, QStringLiteral("PRAGMA busy_timeout = 5000"));
    exec(m_connection, m_path, QStringLiteral("PRAGMA journal_mode = WAL"));
    // WAL with synchronous=NORMAL: a commit survives Loom being killed (the database stays readable with
    // every committed step); only a power loss may drop the last commits. Saves an fsync per commit.
    exec(m_connection, m_path, QStringLiteral("PRAGMA synchronous = NORMAL"));
    exec(m_connection, m_path, QStringLiteral("PRAGMA foreign_keys = ON"));
    if (version < targetVersion)
        migrate(version, std::min(targetVersion, kSchemaVersion));
}

void Store::migrate(int from, int to)
{
    QSqlDatabase db = database(m_connection);
    for (const auto& m : migrations()) {
        if (m.version <= from || m.version > to)
            continue;
        if (!db.transaction())
            fail(m_path, QStringLiteral("cannot start migration %1 (%2)").arg(m.version).arg(m.what), db.lastError());
        try {
            for (const char* sql : m.statements)
                exec(m_connection, m_path, QString::fromUtf8(sql));
            exec(m_connection, m_path, QStringLiteral("PRAGMA user_version = %1").arg(m.version));
        } catch (...) {
            db.rollback();
            throw;
        }
        if (!db.commit())
            fail(m_path, QStringLiteral("cannot commit migration %1 (%2)").arg(m.version).arg(m.what), db.lastError());
    }
}

int Store::schemaVersion() const
{
    QSqlQuery q = exec(m_connection, m_path, QStringLiteral("PRAGMA user_version"));
    return q.next() ? q.value(0).toInt() : 0;
}

void Store::saveProfile(const Profile& profile)
{
    QSqlQuery q(database(m_connection));
    q.prepare(QStringLiteral("INSERT INTO profiles (kind, name, json) VALUES (?, ?, ?) "
                             "ON CONFLICT (kind, name) DO UPDATE SET json = excluded.json, "
                             "updated_at = strftime('%Y-%m-%dT%H:%M:%SZ', 'now')"));
    q.addBindValue(QString::fromUtf8(toString(profile.kind()).data()));
    q.addBindValue(QString::fromStdString(profile.name()));
    q.addBindValue(QString::fromStdString(writeProfile(profile)));
    if (!q.exec())
        fail(m_path, QStringLiteral("cannot save profile %1").arg(QString::fromStdString(profile.name())),
            q.lastError());
}

std::vector<Profile> Store::profiles() const
{
    std::vector<Profile> out;
    QSqlQuery q = exec(m_connection, m_path, QStringLiteral("SELECT json, name FROM profiles ORDER BY kind, name"));
    while (q.next()) {
        auto read = readProfile(q.value(0).toString().toStdString());
        if (read.profile)
            out.push_back(*read.profile);
        else
            qWarning("store %s: profile %s is unreadable and skipped: %s", qPrintable(m_path),
                qPrintable(q.value(1).toString()), read.diagnostics.format().c_str());
    }
    return out;
}

bool Store::removeProfile(Profile::Kind kind, const QString& name)
{
    QSqlQuery q(database(m_connection));
    q.prepare(QStringLiteral("DELETE FROM profiles WHERE kind = ? AND name = ?"));
    q.addBindValue(QString::fromUtf8(toString(kind).data()));
    q.addBindValue(name);
    if (!q.exec())
        fail(m_path, QStringLiteral("cannot remove profile %1").arg(name), q.lastError());
    return q.numRowsAffected() > 0;
}

void Store::saveLayout(const QString& name, const QString& json)
{
    QSqlQuery q(database(m_connection));
    q.prepare(QStringLiteral("INSERT INTO layouts (name, json) VALUES (?, ?) "
                             "ON CONFLICT (name) DO UPDATE SET json = excluded.json, "
                             "updated_at = strftime('%Y-%m-%dT%H:%M:%SZ', 'now')"));
    q.addBindValue(name);
    q.addBindValue(json);
    if (!q.exec())
        fail(m_path, QStringLiteral("cannot save layout %1").arg(name), q.lastError());
}

std::vector<SavedLayout> Store::layouts() const
{
    std::vector<SavedLayout> out;
    QSqlQuery q
        = exec(m_connection, m_path, QStringLiteral("SELECT name, json, updated_at FROM layouts ORDER BY name"));
    while (q.next())
        out.push_back({ q.value(0).toString(), q.value(1).toString(), q.value(2).toString() });
    return out;
}

std::optional<SavedLayout> Store::layout(const QString& name) const
{
    QSqlQuery q(database(m_connection));
    q.prepare(QStringLiteral("SELECT name, json, updated_at FROM layouts WHERE name = ?"));
    q.addBindValue(name);
    if (!q.exec())
        fail(m_path, QStringLiteral("cannot read layout %1").arg(name), q.lastError());
    if (!q.next())
        return std::nullopt;
    return SavedLayout { q.value(0).toString(), q.value(1).toString(), q.value(2).toString() };
}

bool Store::removeLayout(const QString& name)
{
    QSqlQuery q(database(m_connection));
    q.prepare(QStringLiteral("DELETE FROM layouts WHERE name = ?"));
    q.addBindValue(name);
    if (!q.exec())
        fail(m_path, QStringLiteral("cannot remove layout %1").arg(name), q.lastError());
    return q.numRowsAffected() > 0;
}

} // namespace loom::profiles
