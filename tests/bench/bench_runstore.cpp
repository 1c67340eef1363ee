// The run store's bulk event insert: a million events stored through RunStore::addEvents (WAL mode),
// in transactions of 10,000 (about one step's worth of a large run), against the same rows inserted with
// SQLite's C API (one prepared statement, the same schema, pragmas and transaction size) in the same run.
// Prints both rates and their ratio; fails when the million take more than 5 s ("a few seconds").
//   Run: build/dev/bin/bench_runstore [--events N] [--batch N] [--json]
#include "profiles/RunStore.h"
#include "profiles/Store.h"

#include <QCoreApplication>
#include <QTemporaryDir>

#include <sqlite3.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

using namespace loom;

namespace {

std::vector<trace::TraceEvent> makeEvents(std::size_t count)
{
    std::vector<trace::TraceEvent> events(count);
    for (std::size_t i = 0; i < count; ++i) {
        trace::TraceEvent& e = events[i];
        e.rank = static_cast<int>(i % 64);
        e.lane = static_cast<trace::Lane>(i % 2);
        e.kind = static_cast<trace::EventKind>(i % 4);
        e.step = static_cast<int>(i / 10000);
        e.microBatch = static_cast<int>(i % 8);
        e.stage = static_cast<int>(i % 4);
        e.startNs = static_cast<std::int64_t>(i) * 1000;
        e.endNs = e.startNs + 750;
        e.bytes = i % 3 == 0 ? 1u << 20 : 0;
        e.wireBytes = e.bytes;
        e.group = static_cast<int>(i % 5);
        e.groupSize = 8;
        e.peer = -1;
        e.codec = i % 7 == 0 ? "int8" : "";
    }
    return events;
}

double seconds(std::chrono::steady_clock::time_point since)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

void check(int rc, sqlite3* db, const char* what)
{
    if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
        std::fprintf(stderr, "bench_runstore: sqlite3 %s: %s\n", what, sqlite3_errmsg(db));
        std::exit(1);
    }
}

// The reference: the same table and rows through sqlite3's C API, nothing in between.
double rawInsert(const std::string& path, const std::vector<trace::TraceEvent>& events, std::size_t batch)
{
    sqlite3* db = nullptr;
    check(sqlite3_open(path.c_str(), &db), db, "open");
    for (const char* sql : { "PRAGMA journal_mode = WAL", "PRAGMA synchronous = NORMAL", "PRAGMA foreign_keys = ON",
             "CREATE TABLE events (run_id INTEGER NOT NULL, rank INTEGER, lane INTEGER, kind INTEGER, source INTEGER,"
             " step INTEGER, micro_batch INTEGER, stage INTEGER, chunk INTEGER, start_ns INTEGER, end_ns INTEGER,"
             " bytes INTEGER, wire_bytes INTEGER, grp INTEGER, group_size INTEGER, peer INTEGER, algorithm INTEGER,"
             " codec TEXT)",
             "CREATE INDEX events_by_run ON events (run_id, rank, start_ns)" })
        check(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), db, sql);
    sqlite3_stmt* st = nullptr;
    check(sqlite3_prepare_v2(db, profiles::kInsertEventSql, -1, &st, nullptr), db, "prepare");
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < events.size(); ++i) {
        if (i % batch == 0)
            check(sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr), db, "begin");
        const auto& e = events[i];
        profiles::bindEventRow(st, 1, e);
        check(sqlite3_step(st), db, "step");
        sqlite3_reset(st);
        if ((i + 1) % batch == 0 || i + 1 == events.size())
            check(sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr), db, "commit");
    }
    const double t = seconds(start);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return t;
}

} // namespace

int main(int argc, char** argv)
{
    QCoreApplication app(argc, argv);
    std::size_t count = 1000000, batch = 10000;
    bool json = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--events" && i + 1 < argc)
            count = std::stoul(argv[++i]);
        else if (a == "--batch" && i + 1 < argc)
            batch = std::stoul(argv[++i]);
        else if (a == "--json")
            json = true;
        else {
            std::fprintf(stderr, "usage: bench_runstore [--events N] [--batch N] [--json]\n");
            return 64;
        }
    }
    QTemporaryDir dir;
    const std::vector<trace::TraceEvent> events = makeEvents(count);

    double storeSeconds = 0;
    std::size_t stored = 0;
    {
        profiles::Store store(dir.filePath(QStringLiteral("loom.db")));
        profiles::RunStore runs(store);
        const qint64 run = runs.startRun(
            QStringLiteral("bench"), QStringLiteral("{}"), QStringLiteral("local"), QStringLiteral("bench"));
        const auto start = std::chrono::steady_clock::now();
        for (std::size_t i = 0; i < events.size(); i += batch) {
            const std::vector<trace::TraceEvent> chunk(events.begin() + static_cast<std::ptrdiff_t>(i),
                events.begin() + static_cast<std::ptrdiff_t>(std::min(events.size(), i + batch)));
            runs.addEvents(run, chunk);
        }
        storeSeconds = seconds(start);
        stored = runs.events(run).size();
    }
    const double rawSeconds = rawInsert(dir.filePath(QStringLiteral("raw.db")).toStdString(), events, batch);
    const double storeRate = double(count) / storeSeconds, rawRate = double(count) / rawSeconds;
    if (json)
        std::printf(
            "{\"events\": %zu, \"batch\": %zu, \"store_s\": %.3f, \"store_events_per_s\": %.0f, \"raw_s\": %.3f, "
            "\"raw_events_per_s\": %.0f, \"ratio\": %.3f}\n",
            count, batch, storeSeconds, storeRate, rawSeconds, rawRate, storeSeconds / rawSeconds);
    else
        std::printf("bench_runstore: %zu events in transactions of %zu\n"
                    "  RunStore::addEvents   %7.3f s  %10.0f events/s\n"
                    "  sqlite3 C API (ref.)  %7.3f s  %10.0f events/s\n"
                    "  ratio store/raw time  %7.2f\n",
            count, batch, storeSeconds, storeRate, rawSeconds, rawRate, storeSeconds / rawSeconds);
    if (stored != count) {
        std::fprintf(stderr, "bench_runstore: %zu events read back, expected %zu\n", stored, count);
        return 1;
    }
    if (count >= 1000000 && storeSeconds > 5.0) {
        std::fprintf(
            stderr, "bench_runstore: a million events took %.1f s; the goal is a few seconds (<= 5 s)\n", storeSeconds);
        return 1;
    }
    return 0;
}
