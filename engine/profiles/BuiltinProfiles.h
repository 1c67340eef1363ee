#pragma once

#include "engine/plan/ProfileResolver.h"
#include "engine/profiles/ProfileFile.h"

#include <string_view>
#include <vector>

namespace loom::profiles {

// The profiles that ship with Loom (engine/profiles/builtin/*.json, compiled into the binary). Pure C++: the
// engine resolves layout profile names through this without Qt or a database.
class BuiltinProfiles final : public plan::ProfileResolver {
public:
    // The shared, parsed set. The files are checked by tests, so a broken one is a build bug; it is
    // skipped (and listed by loadErrors()) rather than taking the program down.
    static const BuiltinProfiles& instance();

    const std::vector<Profile>& all() const { return m_profiles; }
    const Profile* find(Profile::Kind kind, std::string_view name) const;
    const std::vector<std::string>& loadErrors() const { return m_errors; }

    std::optional<plan::ModelSpec> findModel(std::string_view name) const override;
    std::optional<plan::ClusterSpec> findCluster(std::string_view name) const override;
    std::vector<std::string> modelNames() const override;
    std::vector<std::string> clusterNames() const override;

private:
    BuiltinProfiles();
    std::vector<Profile> m_profiles;
    std::vector<std::string> m_errors;
};

// The embedded files: {file name, JSON text}. Generated at configure time from engine/profiles/builtin/.
struct EmbeddedFile {
    std::string_view name;
    std::string_view text;
};
const std::vector<EmbeddedFile>& builtinProfileFiles();

} // namespace loom::profiles
