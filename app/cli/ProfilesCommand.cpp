#include "app/cli/CommandLine.h"
#include "app/cli/Commands.h"

#include "engine/plan/HfConfig.h"
#include "engine/plan/LayoutSummary.h"
#include "engine/plan/TextUtil.h"
#include "launcher/LaunchCommands.h"

#include <nlohmann/json.hpp>

#include <QDir>
#include <QFileInfo>

#include <cctype>
#include <variant>

namespace loom::app {

namespace {

using profiles::Profile;
using profiles::ProfileCatalog;

// One line that says what a profile is: shape and size for a model, devices and links for a cluster.
std::string summary(const Profile& profile)
{
    if (const auto* m = std::get_if<plan::ModelSpec>(&profile.spec))
        return std::to_string(m->layers) + " layers, hidden " + std::to_string(m->hidden) + ", "
            + std::to_string(m->heads) + " heads, seq " + std::to_string(m->seqLen) + ", vocab "
            + std::to_string(m->vocab) + "; " + plan::humanCount(static_cast<double>(m->parameterCount()))
            + " parameters";
    const auto& c = std::get<plan::ClusterSpec>(profile.spec);
    std::string s = (c.autoDevices() ? std::string("processes as devices") : std::to_string(c.devicesPerNode) + "× ")
        + (c.autoDevices() ? "" : c.device.name) + ", " + plan::text::number(c.device.memoryGB) + " GB, "
        + std::string(plan::toString(c.intraNode.kind)) + " " + plan::text::number(c.intraNode.bandwidthGBs) + " GB/s";
    if (c.interNode)
        s += ", " + std::string(plan::toString(c.interNode->kind)) + " " + plan::text::number(c.interNode->bandwidthGBs)
            + " GB/s per device";
    return s;
}

nlohmann::ordered_json entryJson(const ProfileCatalog::Entry& e)
{
    nlohmann::ordered_json j;
    j["name"] = e.profile.name();
    j["kind"] = toString(e.profile.kind());
    j["origin"] = toString(e.origin);
    j["description"] = e.profile.description();
    j["summary"] = summary(e.profile);
    if (const auto* m = std::get_if<plan::ModelSpec>(&e.profile.spec))
        j["parameters"] = m->parameterCount();
    j["profile"] = nlohmann::ordered_json::parse(profiles::writeProfile(e.profile));
    return j;
}

std::string pad(const std::string& s, std::size_t width)
{
    return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

int list(CliContext& context, bool json)
{
    const auto entries = context.catalog().entries();
    if (json) {
        auto array = nlohmann::ordered_json::array();
        for (const auto& e : entries)
            array.push_back(entryJson(e));
        context.out << array.dump(2) << "\n";
        return ExitOk;
    }
    context.out << pad("KIND", 9) << pad("NAME", 14) << pad("ORIGIN", 10) << "SUMMARY\n";
    for (const auto& e : entries)
        context.out << pad(std::string(toString(e.profile.kind())), 9) << pad(e.profile.name(), 14)
                    << pad(std::string(toString(e.origin)), 10) << summary(e.profile) << "\n";
    return ExitOk;
}

int show(CliContext& context, const QString& name, bool json)
{
    const auto found = context.catalog().find(name.toStdString());
    if (found.empty()) {
        auto known = context.catalog().modelNames();
        auto clusters = context.catalog().clusterNames();
        known.insert(known.end(), clusters.begin(), clusters.end());
        context.err << "error: no profile is called \"" << name.toStdString() << "\"";
        if (auto guess = plan::text::closest(name.toStdString(), known); !guess.empty())
            context.err << " (did you mean \"" << guess << "\"?)";
        context.err << "; known: " << plan::text::join(known) << "\n";
        return ExitFailure;
    }
    if (json) {
        auto array = nlohmann::ordered_json::array();
        for (const auto& e : found)
            array.push_back(entryJson(e));
        context.out << (found.size() == 1 ? array[0] : array).dump(2) << "\n";
        return ExitOk;
    }
    for (const auto& e : found) {
        context.out << toString(e.profile.kind()) << " " << e.profile.name() << " (" << toString(e.origin) << ")\n";
        if (!e.profile.description().empty())
            context.out << "  " << e.profile.description() << "\n";
        context.out << "  " << summary(e.profile) << "\n";
        if (!e.profile.source.empty())
            context.out << "  source: " << e.profile.source << "\n";
        context.out << profiles::writeProfile(e.profile);
    }
    return ExitOk;
}

int save(CliContext& context, const profiles::ProfileReadResult& read);

int import(CliContext& context, const QString& file)
{
    std::string why;
    auto text = readTextFile(file, &why);
    if (!text) {
        context.err << "error: " << why << "\n";
        return ExitFailure;
    }
    return save(context, profiles::readProfile(*text));
}

// A profile name from a folder name: letters, digits, '.', '-' and '_' kept, the rest '-'.
std::string profileNameFrom(const QString& file)
{
    const QFileInfo info(file);
    std::string s = (info.fileName() == QLatin1String("config.json") ? info.dir().dirName() : info.baseName())
                        .toLower()
                        .toStdString();
    for (char& ch : s)
        if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '-' && ch != '_')
            ch = '-';
    return s.empty() || s == "." ? std::string("hf-model") : s.substr(0, 100);
}

// loom profiles import --hf config.json [--name NAME]: transformers' config as a model profile.
int importHf(CliContext& context, const QString& file, QString name)
{
    std::string why;
    auto text = readTextFile(file, &why);
    if (!text) {
        context.err << "error: " << why << "\n";
        return ExitFailure;
    }
    const auto config = nlohmann::json::parse(*text, nullptr, false);
    if (config.is_discarded() || !config.is_object()) {
        context.err << "error: " << file.toStdString() << " is not a JSON object (transformers' config.json)\n";
        return ExitInvalid;
    }
    plan::Diagnostics d;
    const std::string profileName = name.isEmpty() ? profileNameFrom(file) : name.toStdString();
    const auto model = plan::modelFromHfConfig(config, profileName, d);
    if (!model) {
        context.err << file.toStdString() << ":\n" << d.format();
        return ExitInvalid;
    }
    auto profile = plan::toJson(*model);
    profile["loom_profile"] = 1;
    profile["kind"] = "model";
    profile["source"] = "transformers config.json " + file.toStdString().substr(0, 1000);
    return save(context, profiles::readProfile(profile.dump()));
}

int save(CliContext& context, const profiles::ProfileReadResult& read)
{
    if (!read.profile || read.diagnostics.hasErrors()) {
        context.err << read.diagnostics.format();
        return ExitInvalid;
    }
    context.err << read.diagnostics.format(); // warnings only
    if (!context.requireStore())
        return ExitFailure;
    if (auto refused = context.catalog().add(*read.profile); !refused.empty()) {
        context.err << "error: " << refused << "\n";
        return ExitInvalid;
    }
    context.out << "saved " << toString(read.profile->kind()) << " profile \"" << read.profile->name() << "\" in "
                << context.store()->path().toStdString() << "\n";
    // Launch options come only from profiles in the store (docs/launcher.md): say which ones this one brings.
    if (const auto* cluster = std::get_if<plan::ClusterSpec>(&read.profile->spec)) {
        plan::Layout probe;
        probe.cluster = *cluster;
        if (const QStringList beyond = launcher::launchPolicyProblems(probe); !beyond.isEmpty())
            context.err << "note: cluster " << cluster->name << " brings " << beyond.size()
                        << " launch setting(s) that a layout file may not (ssh or mpirun options that can run "
                           "commands); they are "
                           "passed as given whenever it runs, so keep only profiles you trust in your store\n";
    }
    return ExitOk;
}

int remove(CliContext& context, const QString& name, const QString& kindWord)
{
    if (!context.requireStore())
        return ExitFailure;
    std::optional<profiles::Profile::Kind> kind;
    if (kindWord == QLatin1String("model"))
        kind = profiles::Profile::Kind::Model;
    else if (kindWord == QLatin1String("cluster"))
        kind = profiles::Profile::Kind::Cluster;
    int users = 0;
    for (const auto& e : context.catalog().find(name.toStdString()))
        users += e.origin == profiles::ProfileCatalog::Origin::User;
    if (!kind && users > 1) {
        context.err << "error: \"" << name.toStdString()
                    << "\" names both a model and a cluster profile; say which: loom profiles "
                    << "remove " << name.toStdString() << " --kind model (or --kind cluster)\n";
        return ExitUsage;
    }
    if (context.catalog().remove(name.toStdString(), kind)) {
        context.out << "removed user " << (kind ? kindWord.toStdString() + " " : std::string()) << "profile \""
                    << name.toStdString() << "\"\n";
        return ExitOk;
    }
    const bool builtin = !context.catalog().find(name.toStdString()).empty();
    context.err << "error: "
                << (builtin ? "\"" + name.toStdString() + "\" is a built-in profile and cannot be removed"
                            : "there is no user profile called \"" + name.toStdString() + "\"")
                << "\n";
    return ExitFailure;
}

} // namespace

int profilesCommand(CliContext& context, const QStringList& argsIn)
{
    // After "--" every word is a name, even one that starts with '-' (loom profiles remove -- --json).
    const qsizetype dashes = argsIn.indexOf(QStringLiteral("--"));
    QStringList args = dashes < 0 ? argsIn : argsIn.mid(0, dashes);
    const QStringList literal = dashes < 0 ? QStringList() : argsIn.mid(dashes + 1);
    const bool json = args.removeAll(QStringLiteral("--json")) > 0;
    QString kind;
    if (const qsizetype k = args.indexOf(QStringLiteral("--kind"));
        k >= 0 && args.value(0) == QLatin1String("remove")) {
        kind = args.value(k + 1);
        if (kind != QLatin1String("model") && kind != QLatin1String("cluster")) {
            context.err << "loom profiles remove: --kind is model or cluster\n";
            return ExitUsage;
        }
        args.remove(k, 2);
    }
    args += literal;
    const QString verb = args.value(0);
    if (verb == QLatin1String("list") && args.size() == 1)
        return list(context, json);
    if (verb == QLatin1String("show") && args.size() == 2)
        return show(context, args[1], json);
    if (verb == QLatin1String("import") && args.size() == 2 && !json)
        return import(context, args[1]);
    if (verb == QLatin1String("import") && args.value(1) == QLatin1String("--hf") && !json
        && (args.size() == 3 || (args.size() == 5 && args[3] == QLatin1String("--name"))))
        return importHf(context, args[2], args.value(4));
    if (verb == QLatin1String("remove") && args.size() == 2 && !json)
        return remove(context, args[1], kind);
    context.err << "usage: loom profiles list [--json] | show NAME [--json] | import FILE.json | import --hf "
                   "config.json [--name NAME] | remove NAME [--kind "
                   "model|cluster]\n";
    return ExitUsage;
}

} // namespace loom::app
