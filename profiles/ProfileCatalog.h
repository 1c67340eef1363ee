#pragma once

#include "engine/plan/ProfileResolver.h"
#include "engine/profiles/BuiltinProfiles.h"
#include "profiles/Store.h"

#include <string>
#include <vector>

namespace loom::profiles {

// Every profile a user can name: the built-in ones and those saved in the store. User profiles may not
// reuse a built-in name, so a name always means the same thing to the GUI, the CLI and the engine.
class ProfileCatalog final : public plan::ProfileResolver {
public:
    enum class Origin { Builtin, User };
    struct Entry {
        Profile profile;
        Origin origin;
    };

    // `store` may be null (built-in profiles only); it must outlive the catalog.
    explicit ProfileCatalog(Store* store);

    // Built-in first, then user; each group sorted by kind and name.
    std::vector<Entry> entries() const;
    // Every profile called `name` (a model and a cluster may share a name).
    std::vector<Entry> find(std::string_view name) const;

    // Checks and saves a user profile; returns an empty string or a sentence saying why it was refused (a
    // built-in name, a name that looks like an option, or a profile that would not read back).
    std::string add(const Profile& profile);
    // Removes a user profile by name (of `kind` only, when given); returns false when there is none
    // (built-ins cannot be removed).
    bool remove(std::string_view name, std::optional<Profile::Kind> kind = std::nullopt);

    std::optional<plan::ModelSpec> findModel(std::string_view name) const override;
    std::optional<plan::ClusterSpec> findCluster(std::string_view name) const override;
    std::vector<std::string> modelNames() const override;
    std::vector<std::string> clusterNames() const override;

private:
    std::vector<std::string> names(Profile::Kind kind) const;
    std::vector<Profile> userProfiles() const;
    Store* m_store;
};

std::string_view toString(ProfileCatalog::Origin origin);

// Empty, or why `name` cannot name a user profile: it starts with '-' (it would read as an option) or holds
// control characters.
std::string profileNameProblem(const std::string& name);

} // namespace loom::profiles
