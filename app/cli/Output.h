#pragma once

#include "engine/plan/Diagnostics.h"
#include "profiles/ProfileCatalog.h"
#include "profiles/Store.h"

#include <QString>

#include <memory>
#include <ostream>
#include <string>

namespace loom::app {

// What every subcommand shares: the output streams and a lazily opened store and profile catalog.
class CliContext {
public:
    CliContext(std::ostream& out, std::ostream& err)
        : out(out)
        , err(err)
    {
    }

    // The store named by LOOM_DB (or the default path). When it cannot be opened, says so once on `err`
    // and returns null; commands then work with the built-in profiles.
    profiles::Store* store();
    // Like store(), but a failure is fatal for the caller: returns null after printing the reason.
    profiles::Store* requireStore();
    profiles::ProfileCatalog& catalog();

    std::ostream& out;
    std::ostream& err;

private:
    void openStore();
    bool m_tried = false;
    std::string m_storeError;
    std::unique_ptr<profiles::Store> m_store;
    std::unique_ptr<profiles::ProfileCatalog> m_catalog;
};

// The largest file readTextFile reads (loom trace stats streams traces of any size instead).
constexpr int kMaxTextFileMiB = 64;
// Reads a whole file as text; on failure (missing, unreadable, over kMaxTextFileMiB) returns nullopt and
// sets `why`.
std::optional<std::string> readTextFile(const QString& path, std::string* why);

} // namespace loom::app
