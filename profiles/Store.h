#pragma once

#include "engine/profiles/ProfileFile.h"

#include <QString>

#include <optional>
#include <stdexcept>
#include <vector>

namespace loom::profiles {

// A store problem a user can act on: the message names the file and what to do.
class StoreError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct SavedLayout {
    QString name;
    QString json;
    QString updatedAt; // ISO 8601, UTC
};

// Loom's SQLite database (WAL mode): user profiles and saved layouts; later issues add runs and events.
// The schema is versioned with PRAGMA user_version and upgraded in place by numbered migrations, each in
// one transaction, so a crash mid-upgrade leaves the previous version intact.
//
// One Store is one connection; use it from the thread that opened it.
class Store {
public:
    static constexpr int kSchemaVersion = 5;
    // PRAGMA application_id of every store Loom makes ("LOOM"): only such a file, an empty one, or a store
    // of an older Loom (schema 1..3 with Loom's tables only) is opened and migrated; anything else is
    // refused untouched.
    static constexpr qint64 kApplicationId = 0x4C4F4F4D;
    // How long an open waits for another Loom holding the database's lock (creating or migrating it).
    static constexpr int kBusyTimeoutMs = 10000;

    // Opens the database at `path`, creating it (and its folder) when missing, and migrates it to
    // kSchemaVersion. Throws StoreError when the file cannot be opened, is not a Loom database (another
    // program's SQLite file is left untouched), is read-only, or was written by a newer Loom. Safe when
    // several Loom processes open a new store at once.
    explicit Store(const QString& path);
    // For tests of the migrations: opens and migrates only up to `targetVersion`.
    Store(const QString& path, int targetVersion);
    ~Store();
    Store(const Store&) = delete;
    Store& operator=(const Store&) = delete;

    // $LOOM_DB when set, else $XDG_DATA_HOME/loom/loom.db (~/.local/share/loom/loom.db).
    static QString defaultPath();

    QString path() const { return m_path; }
    // The Qt SQL connection (for RunStore, which shares the database).
    QString connectionName() const { return m_connection; }
    int schemaVersion() const;

    // User profiles, keyed by (kind, name). saveProfile replaces one of the same kind and name.
    void saveProfile(const Profile& profile);
    std::vector<Profile> profiles() const;
    bool removeProfile(Profile::Kind kind, const QString& name);

    // Saved layouts, keyed by name (the layout JSON as text).
    void saveLayout(const QString& name, const QString& json);
    std::vector<SavedLayout> layouts() const;
    std::optional<SavedLayout> layout(const QString& name) const;
    bool removeLayout(const QString& name);

private:
    void open(int targetVersion);
    void migrate(int from, int to);
    void checkOwnership();
    QString m_path;
    QString m_connection;
};

} // namespace loom::profiles
