#include "engine/profiles/BuiltinProfiles.h"

#include <algorithm>

namespace loom::profiles {

BuiltinProfiles::BuiltinProfiles()
{
    for (const auto& file : builtinProfileFiles()) {
        auto result = readProfile(file.text);
        if (result.profile && !result.diagnostics.hasErrors())
            m_profiles.push_back(*result.profile);
        else
            m_errors.push_back(std::string(file.name) + ": " + result.diagnostics.format());
    }
    std::sort(m_profiles.begin(), m_profiles.end(), [](const Profile& a, const Profile& b) {
        return std::pair(a.kind(), a.name()) < std::pair(b.kind(), b.name());
    });
}

const BuiltinProfiles& BuiltinProfiles::instance()
{
    static const BuiltinProfiles profiles; // immutable after construction; thread-safe initialisation
    return profiles;
}

const Profile* BuiltinProfiles::find(Profile::Kind kind, std::string_view name) const
{
    for (const auto& p : m_profiles)
        if (p.kind() == kind && p.name() == name)
            return &p;
    return nullptr;
}

std::optional<plan::ModelSpec> BuiltinProfiles::findModel(std::string_view name) const
{
    if (const Profile* p = find(Profile::Kind::Model, name))
        return std::get<plan::ModelSpec>(p->spec);
    return std::nullopt;
}

std::optional<plan::ClusterSpec> BuiltinProfiles::findCluster(std::string_view name) const
{
    if (const Profile* p = find(Profile::Kind::Cluster, name))
        return std::get<plan::ClusterSpec>(p->spec);
    return std::nullopt;
}

std::vector<std::string> BuiltinProfiles::modelNames() const
{
    std::vector<std::string> out;
    for (const auto& p : m_profiles)
        if (p.kind() == Profile::Kind::Model)
            out.push_back(p.name());
    return out;
}

std::vector<std::string> BuiltinProfiles::clusterNames() const
{
    std::vector<std::string> out;
    for (const auto& p : m_profiles)
        if (p.kind() == Profile::Kind::Cluster)
            out.push_back(p.name());
    return out;
}

} // namespace loom::profiles
