#include "profiles/ProfileCatalog.h"

#include <algorithm>

namespace loom::profiles {

std::string_view toString(ProfileCatalog::Origin origin)
{
    return origin == ProfileCatalog::Origin::Builtin ? "built-in" : "user";
}

ProfileCatalog::ProfileCatalog(Store* store)
    : m_store(store)
{
}

std::vector<Profile> ProfileCatalog::userProfiles() const
{
    return m_store ? m_store->profiles() : std::vector<Profile> {};
}

std::vector<ProfileCatalog::Entry> ProfileCatalog::entries() const
{
    std::vector<Entry> out;
    for (const auto& p : BuiltinProfiles::instance().all())
        out.push_back({ p, Origin::Builtin });
    for (auto& p : userProfiles())
        out.push_back({ std::move(p), Origin::User });
    return out;
}

std::vector<ProfileCatalog::Entry> ProfileCatalog::find(std::string_view name) const
{
    std::vector<Entry> out;
    for (auto& e : entries())
        if (e.profile.name() == name)
            out.push_back(std::move(e));
    return out;
}

std::string ProfileCatalog::add(const Profile& profile)
{
    if (!m_store)
        return "there is no store to save user profiles in";
    if (profile.name().empty())
        return "the profile has no name";
    if (const std::string bad = profileNameProblem(profile.name()); !bad.empty())
        return bad;
    if (BuiltinProfiles::instance().find(profile.kind(), profile.name()))
        return "\"" + profile.name() + "\" is a built-in " + std::string(toString(profile.kind()))
            + " profile; give yours another name";
    // Save only what reads back: the saved text goes through the same reader as every later use.
    const auto back = readProfile(writeProfile(profile));
    if (!back.profile || back.diagnostics.hasErrors())
        return "the profile would not read back, so it was not saved:\n" + back.diagnostics.format();
    m_store->saveProfile(profile);
    return {};
}

bool ProfileCatalog::remove(std::string_view name, std::optional<Profile::Kind> kind)
{
    if (!m_store)
        return false;
    const QString n = QString::fromUtf8(name.data(), static_cast<qsizetype>(name.size()));
    bool removedModel = kind != Profile::Kind::Cluster && m_store->removeProfile(Profile::Kind::Model, n);
    bool removedCluster = kind != Profile::Kind::Model && m_store->removeProfile(Profile::Kind::Cluster, n);
    return removedModel || removedCluster;
}

std::string profileNameProblem(const std::string& name)
{
    if (!name.empty() && name.front() == '-')
        return "the name \"" + name.substr(0, 60)
            + "\" starts with '-', so on a command line it would read as an option; "
              "give the profile a name that starts with a letter or digit";
    for (unsigned char c : name)
        if (c < 0x20 || c == 0x7f)
            return "the name holds a control character (code " + std::to_string(c)
                + "); write it in plain letters, digits and "
                  "punctuation";
    return {};
}

std::optional<plan::ModelSpec> ProfileCatalog::findModel(std::string_view name) const
{
    if (auto m = BuiltinProfiles::instance().findModel(name))
        return m;
    for (const auto& p : userProfiles())
        if (p.kind() == Profile::Kind::Model && p.name() == name)
            return std::get<plan::ModelSpec>(p.spec);
    return std::nullopt;
}

std::optional<plan::ClusterSpec> ProfileCatalog::findCluster(std::string_view name) const
{
    if (auto c = BuiltinProfiles::instance().findCluster(name))
        return c;
    for (const auto& p : userProfiles())
        if (p.kind() == Profile::Kind::Cluster && p.name() == name)
            return std::get<plan::ClusterSpec>(p.spec);
    return std::nullopt;
}

std::vector<std::string> ProfileCatalog::names(Profile::Kind kind) const
{
    std::vector<std::string> out;
    for (const auto& e : entries())
        if (e.profile.kind() == kind)
            out.push_back(e.profile.name());
    std::sort(out.begin(), out.end());
    return out;
}

std::vector<std::string> ProfileCatalog::modelNames() const
{
    return names(Profile::Kind::Model);
}

std::vector<std::string> ProfileCatalog::clusterNames() const
{
    return names(Profile::Kind::Cluster);
}

} // namespace loom::profiles
