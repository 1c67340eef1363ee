#include "profiles/ProfileCatalog.h"

#include <QList>
#include <QString>

#include <algorithm>

namespace loom::profiles {

namespace {

// Names that print like another name are refused: "local " and "local\u200b" list as "local", and so does
// "lоcal" with a Cyrillic о. So no space at either end, no invisible or format character (zero-width
// spaces, joiners, bidirectional controls), no space but the plain one, and letters of one script only.
std::string lookAlikeProblem(const std::string& name)
{
    const QString n = QString::fromUtf8(name.data(), static_cast<qsizetype>(name.size()));
    const std::string shown = "the name \"" + name.substr(0, 60) + "\"";
    if (!n.isEmpty() && (n.front().isSpace() || n.back().isSpace()))
        return shown + " starts or ends with a space; write it without";
    QChar::Script script = QChar::Script_Unknown;
    for (const char32_t c : n.toUcs4()) {
        const QChar::Category category = QChar::category(c);
        if (category == QChar::Other_Format || category == QChar::Other_NotAssigned
            || category == QChar::Other_PrivateUse || (QChar::isSpace(c) && c != U' '))
            return shown + " holds an invisible or special character (U+"
                + QString::number(c, 16).toUpper().toStdString()
                + "), so it would look like another name; write it in plain letters, digits and punctuation";
        const QChar::Script s = QChar::script(c);
        if (!QChar::isLetter(c) || s == QChar::Script_Common || s == QChar::Script_Inherited)
            continue;
        if (script != QChar::Script_Unknown && s != script)
            return shown
                + " mixes letters of two scripts (such as Latin and Cyrillic), so it would look like "
                  "another name; write it in one script";
        script = s;
    }
    return {};
}

// Names equal up to case and compatibility forms ("LOCAL", "ｌocal" and "local").
QString foldedName(const std::string& name)
{
    return QString::fromUtf8(name.data(), static_cast<qsizetype>(name.size()))
        .normalized(QString::NormalizationForm_KC)
        .toCaseFolded();
}

} // namespace

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
    for (const auto& e : entries()) // replacing one's own profile is fine; a look-alike of another is not
        if (e.profile.kind() == profile.kind() && e.profile.name() != profile.name()
            && foldedName(e.profile.name()) == foldedName(profile.name()))
            return "\"" + profile.name() + "\" differs from the " + std::string(toString(profile.kind()))
                + " profile \"" + e.profile.name() + "\" only in case or character forms; give yours another name";
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
    return lookAlikeProblem(name);
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
