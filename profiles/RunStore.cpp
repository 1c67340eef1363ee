#include "profiles/RunStore.h"

#include "profiles/RunLock.h"
#include "profiles/StoreQuery.h"

#include <algorithm>

#include <QFile>
#include <QSqlDatabase>
#include <QSqlDriver>
#include <QSqlError>
#include <QSqlQuery>
#include <QSysInfo>
#include <QVariant>

#include <cerrno>
#include <cmath>
#include <csignal>
#include <limits>
#include <unistd.h>

#include <sqlite3.h>

namespace loom::profiles {

namespace {

[[noreturn]] void fail(const Store& store, const QString& what, const QSqlError& error)
{
    throw StoreError(QStringLiteral("store %1: %2 (%3)").arg(store.path(), what, error.text()).toStdString());
}

QSqlDatabase db(const Store& store)
{
    return QSqlDatabase::database(store.connectionName(), false);
}

RunRecord runFrom(const QSqlQuery& q)
{
    RunRecord r;
    r.id = q.value(0).toLongLong();
    r.name = q.value(1).toString();
    r.layoutJson = q.value(2).toString();
    r.cluster = q.value(3).toString();
    r.command = q.value(4).toString();
    r.startedAt = q.value(5).toString();
    r.endedAt = q.value(6).toString();
    // The schema's CHECK admits only the five words; anything else would be a newer Loom's, shown as failed.
    r.state = runStateFromString(q.value(7).toString()).value_or(RunState::Failed);
    r.exitCause = q.value(8).toString();
    r.steps = q.value(9).toLongLong();
    return r;
}

// The process following a run: "host pid start", start being its start time in clock ticks after boot
// (field 22 of /proc/PID/stat), so a pid that the system has given to another process is not mistaken for it.
QString processStart(qint64 pid)
{
    QFile f(QStringLiteral("/proc/%1/stat").arg(pid));
    if (!f.open(QIODevice::ReadOnly))
        return {};
    const QString text = QString::fromLatin1(f.readAll());
    const QStringList fields = text.mid(text.lastIndexOf(QLatin1Char(')')) + 2).split(QLatin1Char(' '));
    return fields.value(19); // fields after "(comm)" start at field 3; field 22 is index 19
}

QString thisOwner()
{
    const qint64 pid = ::getpid();
    return QStringLiteral("%1 %2 %3").arg(QSysInfo::machineHostName()).arg(pid).arg(processStart(pid));
}

// True only when the run's owner is provably gone: it ran on this host and its process has ended (or the
// pid now belongs to a process started at another time). Runs recorded by a Loom older than schema 4 have
// no owner and count as gone; runs owned on another host are left alone.
bool ownerGone(const QString& owner)
{
    if (owner.isEmpty())
        return true;
    const QStringList parts = owner.split(QLatin1Char(' '));
    if (parts.size() < 2 || parts[0] != QSysInfo::machineHostName())
        return false;
    const qint64 pid = parts[1].toLongLong();
    if (pid <= 0)
        return false;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
        return true;
    const QString start = processStart(pid);
    return !start.isEmpty() && !parts.value(2).isEmpty() && start != parts.value(2);
}

// Room kept on the store's disk for each live run's last write: a run stopped because the disk filled up
// must still be recorded as failed (with the cause), not left "running" to read "interrupted" later.
constexpr qint64 kRoomBytes = 256 << 10;

QString roomFile(const Store& store, qint64 run)
{
    return store.path() + QStringLiteral(".room-%1").arg(run);
}

void keepRoom(const Store& store, qint64 run)
{
    QFile f(roomFile(store, run));
    if (f.open(QIODevice::WriteOnly | QIODevice::Truncate) && f.write(QByteArray(kRoomBytes, '\0')) == kRoomBytes)
        return;
    f.remove(); // no room even for this: the run's own writes will say so
}

const char* kRunColumns = "id, name, layout_json, cluster, command, started_at, ended_at, state, exit_cause, steps";

} // namespace

qint64 RunStore::startRun(
    const QString& name, const QString& layoutJson, const QString& cluster, const QString& command)
{
    QSqlQuery q(db(m_store));
    prepareQuery(m_store.path(), q,
        QStringLiteral(
            "INSERT INTO runs (name, layout_json, cluster, command, state, owner) VALUES (?, ?, ?, ?, 'running', ?)"));
    q.addBindValue(name);
    q.addBindValue(layoutJson);
    q.addBindValue(cluster);
    q.addBindValue(command);
    q.addBindValue(thisOwner());
    if (!q.exec())
        fail(m_store, QStringLiteral("cannot record the run"), q.lastError());
    const qint64 id = q.lastInsertId().toLongLong();
    keepRoom(m_store, id);
    m_locks[id] = std::make_shared<RunLock>(m_store.path(), id);
    return id;
}

QString lossText(double loss)
{
    return std::isfinite(loss) ? QString::number(loss, 'f', 4) : QStringLiteral("diverged (null)");
}

qint64 StepRecord::peakMemoryBytes() const
{
    return memoryHighWaterBytes.empty() ? 0
                                        : *std::max_element(memoryHighWaterBytes.begin(), memoryHighWaterBytes.end());
}

namespace {

// Per-rank bytes as the column keeps them: "[b0,b1,...]" ("" when not measured).
QString memoryText(const std::vector<qint64>& bytes)
{
    if (bytes.empty())
        return {};
    QStringList parts;
    for (qint64 b : bytes)
        parts << QString::number(b);
    return QLatin1Char('[') + parts.join(QLatin1Char(',')) + QLatin1Char(']');
}

// The column read back; what is not a list of whole numbers (a damaged row) reads as not measured.
std::vector<qint64> memoryFromText(const QString& text)
{
    std::vector<qint64> out;
    if (!text.startsWith(QLatin1Char('[')) || !text.endsWith(QLatin1Char(']')) || text.size() > (1 << 26))
        return out;
    for (const QString& part : QStringView(text).mid(1, text.size() - 2).toString().split(QLatin1Char(','))) {
        bool ok = false;
        const qint64 v = part.trimmed().toLongLong(&ok);
        if (!ok || v < 0)
            return {};
        out.push_back(v);
    }
    return out;
}

} // namespace

void RunStore::addStep(qint64 run, const StepRecord& s)
{
    QSqlQuery q(db(m_store));
    prepareQuery(m_store.path(), q,
        QStringLiteral("INSERT OR REPLACE INTO step_metrics (run_id, step, loss, tokens_per_s, step_time_s, "
                       "grad_norm, lr, flops_per_s, hardware_flops_per_s, memory_high_water) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
    const QVariant loss = std::isfinite(s.loss) ? QVariant(s.loss) : QVariant(QMetaType(QMetaType::Double));
    for (const QVariant& v : { QVariant(run), QVariant(s.step), loss, QVariant(s.tokensPerSecond),
             QVariant(s.stepTimeSeconds), QVariant(s.gradNorm), QVariant(s.lr), QVariant(s.flopsPerSecond),
             QVariant(s.hardwareFlopsPerSecond), QVariant(memoryText(s.memoryHighWaterBytes)) })
        q.addBindValue(v);
    if (!q.exec())
        fail(m_store, QStringLiteral("cannot store step %1 of run %2").arg(s.step).arg(run), q.lastError());
    QSqlQuery u(db(m_store));
    prepareQuery(m_store.path(), u, QStringLiteral("UPDATE runs SET steps = MAX(steps, ?) WHERE id = ?"));
    u.addBindValue(s.step);
    u.addBindValue(run);
    if (!u.exec())
        fail(m_store, QStringLiteral("cannot update run %1").arg(run), u.lastError());
}

const char* const kInsertEventSql
    = "INSERT INTO events (run_id, rank, lane, kind, source, step, micro_batch, stage, chunk, start_ns, "
      "end_ns, bytes, wire_bytes, grp, group_size, peer, algorithm, codec) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

void bindEventRow(sqlite3_stmt* st, qint64 run, const trace::TraceEvent& e)
{
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_int(st, 2, e.rank);
    sqlite3_bind_int(st, 3, static_cast<int>(e.lane));
    sqlite3_bind_int(st, 4, static_cast<int>(e.kind));
    sqlite3_bind_int(st, 5, static_cast<int>(e.source));
    sqlite3_bind_int(st, 6, e.step);
    sqlite3_bind_int(st, 7, e.microBatch);
    sqlite3_bind_int(st, 8, e.stage);
    sqlite3_bind_int(st, 9, e.chunk);
    sqlite3_bind_int64(st, 10, static_cast<sqlite3_int64>(e.startNs));
    sqlite3_bind_int64(st, 11, static_cast<sqlite3_int64>(e.endNs));
    sqlite3_bind_int64(st, 12, static_cast<sqlite3_int64>(e.bytes));
    sqlite3_bind_int64(st, 13, static_cast<sqlite3_int64>(e.wireBytes));
    sqlite3_bind_int(st, 14, e.group);
    sqlite3_bind_int(st, 15, e.groupSize);
    sqlite3_bind_int(st, 16, e.peer);
    sqlite3_bind_int(st, 17, static_cast<int>(e.algorithm));
    sqlite3_bind_text(st, 18, e.codec.c_str(), static_cast<int>(e.codec.size()), SQLITE_TRANSIENT);
}

void RunStore::addEvents(qint64 run, const std::vector<trace::TraceEvent>& events)
{
    if (events.empty())
        return;
    QSqlDatabase d = db(m_store);
    // Qt's SQLite driver wraps the system libsqlite3; its handle lets the bulk insert bind values directly
    // (4x faster than QSqlQuery's QVariant binding, see tests/bench/bench_runstore.cpp).
    const QVariant handle = d.driver()->handle();
    sqlite3* h = handle.isValid() && qstrcmp(handle.typeName(), "sqlite3*") == 0
        ? *static_cast<sqlite3* const*>(handle.constData())
        : nullptr;
    if (!h)
        throw StoreError(QStringLiteral("store %1: the Qt SQL driver is not SQLite; cannot store events")
                             .arg(m_store.path())
                             .toStdString());
    auto sqliteFail = [&](const QString& what) {
        const QString message = QString::fromUtf8(sqlite3_errmsg(h));
        throw StoreError(QStringLiteral("store %1: %2 (%3)").arg(m_store.path(), what, message).toStdString());
    };
    if (!d.transaction())
        fail(m_store, QStringLiteral("cannot start storing events"), d.lastError());
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(h, kInsertEventSql, -1, &st, nullptr) != SQLITE_OK) {
        d.rollback();
        sqliteFail(QStringLiteral("cannot store events of run %1").arg(run));
    }
    for (const auto& e : events) {
        bindEventRow(st, run, e);
        if (sqlite3_step(st) != SQLITE_DONE) {
            const QString message = QString::fromUtf8(sqlite3_errmsg(h));
            sqlite3_finalize(st);
            d.rollback();
            throw StoreError(QStringLiteral("store %1: cannot store events of run %2 (%3)")
                                 .arg(m_store.path())
                                 .arg(run)
                                 .arg(message)
                                 .toStdString());
        }
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    if (!d.commit())
        fail(m_store, QStringLiteral("cannot commit events of run %1").arg(run), d.lastError());
}

void RunStore::addCheckpoint(qint64 run, qint64 step, const QString& path)
{
    QSqlQuery q(db(m_store));
    prepareQuery(
        m_store.path(), q, QStringLiteral("INSERT OR REPLACE INTO checkpoints (run_id, step, path) VALUES (?, ?, ?)"));
    q.addBindValue(run);
    q.addBindValue(step);
    q.addBindValue(path);
    if (!q.exec())
        fail(m_store, QStringLiteral("cannot record a checkpoint of run %1").arg(run), q.lastError());
}

void RunStore::setCommand(qint64 run, const QString& command)
{
    QSqlQuery q(db(m_store));
    prepareQuery(m_store.path(), q, QStringLiteral("UPDATE runs SET command = ? WHERE id = ?"));
    q.addBindValue(command);
    q.addBindValue(run);
    if (!q.exec())
        fail(m_store, QStringLiteral("cannot update run %1").arg(run), q.lastError());
}

std::vector<CheckpointRecord> RunStore::checkpoints(qint64 run) const
{
    std::vector<CheckpointRecord> out;
    QSqlQuery q(db(m_store));
    prepareQuery(
        m_store.path(), q, QStringLiteral("SELECT step, path FROM checkpoints WHERE run_id = ? ORDER BY step"));
    q.addBindValue(run);
    if (!q.exec())
        fail(m_store, QStringLiteral("cannot read the checkpoints of run %1").arg(run), q.lastError());
    while (q.next())
        out.push_back({ q.value(0).toLongLong(), q.value(1).toString() });
    return out;
}

void RunStore::finishRun(qint64 run, RunState state, const QString& exitCause)
{
    // Whatever happens below the run is no longer followed: a failed update leaves it for markInterrupted.
    const auto lock = m_locks.extract(run);
    // Tried twice: the second time with the room kept for it given back to the disk.
    for (int attempt = 0;; ++attempt) {
        QSqlQuery q(db(m_store));
        prepareQuery(m_store.path(), q,
            QStringLiteral(
                "UPDATE runs SET state = ?, exit_cause = ?, ended_at = strftime('%Y-%m-%dT%H:%M:%SZ', 'now') "
                "WHERE id = ?"));
        q.addBindValue(toString(state));
        q.addBindValue(exitCause.isNull() ? QStringLiteral("") : exitCause);
        q.addBindValue(run);
        const bool ok = q.exec();
        if (ok || attempt == 1)
            QFile::remove(roomFile(m_store, run));
        if (ok)
            return;
        if (attempt == 1)
            fail(m_store, QStringLiteral("cannot finish run %1").arg(run), q.lastError());
        q.finish();
        QFile::remove(roomFile(m_store, run));
    }
}

int RunStore::markInterrupted()
{
    QSqlQuery q(db(m_store));
    if (!q.exec(QStringLiteral("SELECT id, owner FROM runs WHERE state = 'running'")))
        fail(m_store, QStringLiteral("cannot list running runs"), q.lastError());
    QList<qint64> gone;
    while (q.next()) {
        const qint64 id = q.value(0).toLongLong();
        const RunLock::Owner owner = RunLock::owner(m_store.path(), id);
        if (owner == RunLock::Owner::Gone || (owner == RunLock::Owner::Unknown && ownerGone(q.value(1).toString())))
            gone << id;
    }
    int marked = 0;
    for (const qint64 id : gone) {
        QSqlQuery u(db(m_store));
        prepareQuery(m_store.path(), u,
            QStringLiteral(
                "UPDATE runs SET state = 'interrupted', exit_cause = 'Loom stopped while the run was going', "
                "ended_at = strftime('%Y-%m-%dT%H:%M:%SZ', 'now') WHERE id = ? AND state = 'running'"));
        u.addBindValue(id);
        if (!u.exec())
            fail(m_store, QStringLiteral("cannot mark run %1 interrupted").arg(id), u.lastError());
        marked += u.numRowsAffected();
        QFile::remove(roomFile(m_store, id)); // its Loom died before giving the room back
    }
    return marked;
}

std::vector<RunRecord> RunStore::runs() const
{
    std::vector<RunRecord> out;
    QSqlQuery q(db(m_store));
    if (!q.exec(QStringLiteral("SELECT %1 FROM runs ORDER BY id").arg(QLatin1String(kRunColumns))))
        fail(m_store, QStringLiteral("cannot list runs"), q.lastError());
    while (q.next())
        out.push_back(runFrom(q));
    return out;
}

std::optional<RunRecord> RunStore::run(qint64 id) const
{
    QSqlQuery q(db(m_store));
    prepareQuery(m_store.path(), q, QStringLiteral("SELECT %1 FROM runs WHERE id = ?").arg(QLatin1String(kRunColumns)));
    q.addBindValue(id);
    if (!q.exec())
        fail(m_store, QStringLiteral("cannot read run %1").arg(id), q.lastError());
    if (!q.next())
        return std::nullopt;
    return runFrom(q);
}

std::vector<StepRecord> RunStore::steps(qint64 run) const
{
    std::vector<StepRecord> out;
    QSqlQuery q(db(m_store));
    prepareQuery(m_store.path(), q,
        QStringLiteral("SELECT step, loss, tokens_per_s, step_time_s, grad_norm, lr, flops_per_s, "
                       "hardware_flops_per_s, memory_high_water FROM step_metrics WHERE run_id = ? ORDER BY step"));
    q.addBindValue(run);
    if (!q.exec())
        fail(m_store, QStringLiteral("cannot read the steps of run %1").arg(run), q.lastError());
    while (q.next()) {
        StepRecord s;
        s.step = q.value(0).toLongLong();
        // A diverged loss is stored as NULL (SQLite keeps no NaN): it reads back as NaN, never as 0.
        s.loss = q.value(1).isNull() ? std::numeric_limits<double>::quiet_NaN() : q.value(1).toDouble();
        s.tokensPerSecond = q.value(2).toDouble();
        s.stepTimeSeconds = q.value(3).toDouble();
        s.gradNorm = q.value(4).toDouble();
        s.lr = q.value(5).toDouble();
        s.flopsPerSecond = q.value(6).toDouble();
        s.hardwareFlopsPerSecond = q.value(7).toDouble();
        s.memoryHighWaterBytes = memoryFromText(q.value(8).toString());
        out.push_back(std::move(s));
    }
    return out;
}

std::map<qint64, StepRecord> RunStore::lastSteps() const
{
    std::map<qint64, StepRecord> out;
    QSqlQuery q(db(m_store));
    if (!q.exec(QStringLiteral("SELECT s.run_id, s.step, s.loss, s.tokens_per_s FROM step_metrics s JOIN "
                               "(SELECT run_id, MAX(step) AS last FROM step_metrics GROUP BY run_id) m "
                               "ON s.run_id = m.run_id AND s.step = m.last")))
        fail(m_store, QStringLiteral("cannot read the runs' last steps"), q.lastError());
    while (q.next()) {
        StepRecord s;
        s.step = q.value(1).toLongLong();
        s.loss = q.value(2).isNull() ? std::numeric_limits<double>::quiet_NaN() : q.value(2).toDouble();
        s.tokensPerSecond = q.value(3).toDouble();
        out[q.value(0).toLongLong()] = std::move(s);
    }
    return out;
}

std::vector<trace::TraceEvent> RunStore::events(qint64 run) const
{
    std::vector<trace::TraceEvent> out;
    QSqlQuery q(db(m_store));
    q.setForwardOnly(true);
    prepareQuery(m_store.path(), q,
        QStringLiteral(
            "SELECT rank, lane, kind, source, step, micro_batch, stage, chunk, start_ns, end_ns, bytes, wire_bytes, "
            "grp, group_size, peer, algorithm, codec FROM events WHERE run_id = ? ORDER BY rank, start_ns"));
    q.addBindValue(run);
    if (!q.exec())
        fail(m_store, QStringLiteral("cannot read the events of run %1").arg(run), q.lastError());
    while (q.next()) {
        trace::TraceEvent e;
        e.rank = q.value(0).toInt();
        e.lane = static_cast<trace::Lane>(q.value(1).toInt());
        e.kind = static_cast<trace::EventKind>(q.value(2).toInt());
        e.source = static_cast<trace::EventSource>(q.value(3).toInt());
        e.step = q.value(4).toInt();
        e.microBatch = q.value(5).toInt();
        e.stage = q.value(6).toInt();
        e.chunk = q.value(7).toInt();
        e.startNs = q.value(8).toLongLong();
        e.endNs = q.value(9).toLongLong();
        e.bytes = static_cast<std::uint64_t>(q.value(10).toLongLong());
        e.wireBytes = static_cast<std::uint64_t>(q.value(11).toLongLong());
        e.group = q.value(12).toInt();
        e.groupSize = q.value(13).toInt();
        e.peer = q.value(14).toInt();
        e.algorithm = static_cast<trace::Algorithm>(q.value(15).toInt());
        e.codec = q.value(16).toString().toStdString();
        out.push_back(std::move(e));
    }
    return out;
}

bool RunStore::removeRun(qint64 id)
{
    QSqlQuery q(db(m_store));
    prepareQuery(m_store.path(), q, QStringLiteral("DELETE FROM runs WHERE id = ?"));
    q.addBindValue(id);
    if (!q.exec())
        fail(m_store, QStringLiteral("cannot delete run %1").arg(id), q.lastError());
    return q.numRowsAffected() > 0;
}

} // namespace loom::profiles
