#include "profiles/Store.h"

#include "profiles/StoreQuery.h"

#include <QDeadlineTimer>
#include <QDir>
#include <QFileInfo>
#include <QSqlDatabase>
#include <QSqlError>
#include <QSqlQuery>
#include <QStandardPaths>
#include <QThread>
#include <QUuid>

#include <algorithm>

#include <unistd.h>

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
        { 4, "the process that follows each run", { "ALTER TABLE runs ADD COLUMN owner TEXT NOT NULL DEFAULT ''" } },
        // The whole step frame: FLOP rates and each rank's memory high-water mark ("[b0, b1, ...]", bytes).
        { 5, "the step frame's FLOP rates and memory",
            { "ALTER TABLE step_metrics ADD COLUMN flops_per_s REAL",
                "ALTER TABLE step_metrics ADD COLUMN hardware_flops_per_s REAL",
                "ALTER TABLE step_metrics ADD COLUMN memory_high_water TEXT NOT NULL DEFAULT ''" } },
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

// SQLITE_BUSY ("database is locked").
bool busyError(const QSqlError& error)
{
    return error.nativeErrorCode() == QLatin1String("5") || error.text().contains(QLatin1String("database is locked"));
}

// Switching a store to WAL needs SQLite's exclusive lock. When two processes open the same new store at once,
// both hold the shared lock while asking for it, and SQLite answers one of them SQLITE_BUSY at once instead
// of calling the busy handler (waiting there could deadlock). That one lets its lock go and asks again, until
// the busy timeout has passed; the other has switched the file by then.
QSqlQuery execWhenUnlocked(const QString& connection, const QString& path, const QString& sql, int timeoutMs)
{
    const QDeadlineTimer deadline(timeoutMs);
    for (;;) {
        QSqlQuery q(database(connection));
        if (q.exec(sql))
            return q;
        if (!busyError(q.lastError()) || deadline.hasExpired())
            fail(path, QStringLiteral("\"%1\" failed").arg(sql.left(60)), q.lastError());
        q.finish();
        QThread::msleep(5);
    }
}

bool readOnlyError(const QSqlError& error)
{
    return error.nativeErrorCode() == QLatin1String("8") || error.text().contains(QLatin1String("readonly"))
        || error.text().contains(QLatin1String("read-only"));
}

// The file, or the folder where SQLite puts its -wal and -shm files, cannot be written (permissions or a
// read-only file system; access() says so for root too on a read-only mount).
bool readOnlyPlace(const QString& path)
{
    const QByteArray file = QFile::encodeName(path), folder = QFile::encodeName(QFileInfo(path).absolutePath());
    return QFileInfo::exists(path)
        && (::access(file.constData(), W_OK) != 0 || ::access(folder.constData(), W_OK) != 0);
}

[[noreturn]] void failReadOnly(const QString& path, const QSqlError& error)
{
    throw StoreError(
        QStringLiteral("store %1 is read-only (%2); Loom writes its store: make the file and its folder writable, "
                       "or set LOOM_DB to a writable file")
            .arg(path, error.text())
            .toStdString());
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
    // A device (/dev/null), FIFO or socket: SQLite would open it, then create NAME-journal beside it.
    if (info.exists() && !info.isFile())
        throw StoreError(QStringLiteral("store %1 is not a regular file (a device, pipe or socket); set LOOM_DB to a "
                                        "file path")
                             .arg(m_path)
                             .toStdString());
    if (!QDir().mkpath(info.absolutePath()))
        throw StoreError(
            QStringLiteral("cannot create the folder %1 for the store; check its permissions or set LOOM_DB")
                .arg(info.absolutePath())
                .toStdString());

    QSqlDatabase db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), m_connection);
    db.setDatabaseName(m_path);
    // Another Loom may be creating or migrating the same store: wait for its lock instead of failing.
    db.setConnectOptions(QStringLiteral("QSQLITE_BUSY_TIMEOUT=%1").arg(kBusyTimeoutMs));
    if (!db.open())
        fail(m_path, QStringLiteral("cannot open the database; check the path and its permissions or set LOOM_DB"),
            db.lastError());

    // The first real read tells an SQLite file from anything else.
    QSqlQuery q(db);
    if (!q.exec(QStringLiteral("PRAGMA user_version")) || !q.next()) {
        if (readOnlyError(q.lastError()) || readOnlyPlace(m_path))
            failReadOnly(m_path, q.lastError());
        fail(m_path, QStringLiteral("is not a Loom database; move it away or set LOOM_DB to another file"),
            q.lastError());
    }
    const int version = q.value(0).toInt();
    q.finish();
    checkOwnership();
    if (version > kSchemaVersion)
        throw StoreError(QStringLiteral("store %1 has schema version %2, newer than this Loom understands (%3); use a "
                                        "newer Loom or set LOOM_DB to another file")
                             .arg(m_path)
                             .arg(version)
                             .arg(kSchemaVersion)
                             .toStdString());

    try {
        execWhenUnlocked(m_connection, m_path, QStringLiteral("PRAGMA journal_mode = WAL"), kBusyTimeoutMs);
    } catch (const StoreError&) {
        QSqlQuery probe(db); // a read-only file or folder fails here first: say so
        if (!probe.exec(QStringLiteral("PRAGMA user_version = %1").arg(version)) && readOnlyError(probe.lastError()))
            failReadOnly(m_path, probe.lastError());
        throw;
    }
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
        // BEGIN IMMEDIATE takes the write lock first (waiting for another Loom migrating the same file),
        // then the version is read again: the other process may have done this step already.
        QSqlQuery begin(db);
        if (!begin.exec(QStringLiteral("BEGIN IMMEDIATE")))
            fail(
                m_path, QStringLiteral("cannot start migration %1 (%2)").arg(m.version).arg(m.what), begin.lastError());
        try {
            if (schemaVersion() >= m.version) {
                exec(m_connection, m_path, QStringLiteral("COMMIT"));
                continue;
            }
            if (m.version == 1)
                exec(m_connection, m_path, QStringLiteral("PRAGMA application_id = %1").arg(kApplicationId));
            for (const char* sql : m.statements)
                exec(m_connection, m_path, QString::fromUtf8(sql));
            exec(m_connection, m_path, QStringLiteral("PRAGMA user_version = %1").arg(m.version));
        } catch (...) {
            QSqlQuery(db).exec(QStringLiteral("ROLLBACK"));
            throw;
        }
        exec(m_connection, m_path, QStringLiteral("COMMIT"));
    }
}

void Store::checkOwnership()
{
    // One read transaction, so the id, the version and the tables are one snapshot even while another Loom
    // is creating the same store.
    exec(m_connection, m_path, QStringLiteral("BEGIN"));
    QSqlQuery q = exec(m_connection, m_path, QStringLiteral("PRAGMA application_id"));
    const qint64 id = q.next() ? q.value(0).toLongLong() : 0;
    q.finish();
    QSqlQuery v = exec(m_connection, m_path, QStringLiteral("PRAGMA user_version"));
    const int version = v.next() ? v.value(0).toInt() : 0;
    v.finish();
    QStringList tables;
    QSqlQuery t = exec(
        m_connection, m_path, QStringLiteral("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"));
    while (t.next())
        tables << t.value(0).toString();
    t.finish();
    exec(m_connection, m_path, QStringLiteral("COMMIT"));
    static const QStringList loomTables { QStringLiteral("checkpoints"), QStringLiteral("events"),
        QStringLiteral("layouts"), QStringLiteral("profiles"), QStringLiteral("runs"), QStringLiteral("step_metrics") };
    const bool empty = id == 0 && version == 0 && tables.isEmpty();
    // Stores made before Loom set its application id: version 1..3 and only Loom's tables.
    const bool olderLoom = id == 0 && version >= 1 && version <= kSchemaVersion
        && tables.contains(QStringLiteral("profiles"))
        && std::all_of(tables.begin(), tables.end(), [](const QString& n) { return loomTables.contains(n); });
    if (id == kApplicationId || empty || olderLoom) {
        if (olderLoom) // claim it, so later opens need no guessing
            exec(m_connection, m_path, QStringLiteral("PRAGMA application_id = %1").arg(kApplicationId));
        return;
    }
    throw StoreError(
        QStringLiteral("store %1 is not a Loom database (%2); Loom left it untouched: set LOOM_DB to another file")
            .arg(m_path,
                id != 0 ? QStringLiteral("its SQLite application id is %1, another program's").arg(id)
                        : QStringLiteral("it holds tables Loom did not make: %1")
                              .arg(tables.mid(0, 5).join(QStringLiteral(", "))))
            .toStdString());
}

int Store::schemaVersion() const
{
    QSqlQuery q = exec(m_connection, m_path, QStringLiteral("PRAGMA user_version"));
    return q.next() ? q.value(0).toInt() : 0;
}

void Store::saveProfile(const Profile& profile)
{
    QSqlQuery q(database(m_connection));
    prepareQuery(m_path, q,
        QStringLiteral("INSERT INTO profiles (kind, name, json) VALUES (?, ?, ?) "
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
    prepareQuery(m_path, q, QStringLiteral("DELETE FROM profiles WHERE kind = ? AND name = ?"));
    q.addBindValue(QString::fromUtf8(toString(kind).data()));
    q.addBindValue(name);
    if (!q.exec())
        fail(m_path, QStringLiteral("cannot remove profile %1").arg(name), q.lastError());
    return q.numRowsAffected() > 0;
}

void Store::saveLayout(const QString& name, const QString& json)
{
    QSqlQuery q(database(m_connection));
    prepareQuery(m_path, q,
        QStringLiteral("INSERT INTO layouts (name, json) VALUES (?, ?) "
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
    prepareQuery(m_path, q, QStringLiteral("SELECT name, json, updated_at FROM layouts WHERE name = ?"));
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
    prepareQuery(m_path, q, QStringLiteral("DELETE FROM layouts WHERE name = ?"));
    q.addBindValue(name);
    if (!q.exec())
        fail(m_path, QStringLiteral("cannot remove layout %1").arg(name), q.lastError());
    return q.numRowsAffected() > 0;
}

} // namespace loom::profiles
