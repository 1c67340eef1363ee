#include "app/cli/CommandLine.h"
#include "app/cli/Commands.h"

#include "engine/plan/EngineSupport.h"
#include "engine/plan/LayoutParser.h"
#include "engine/plan/LayoutSummary.h"
#include "launcher/LaunchCommands.h"

#include <QFile>

#include <nlohmann/json.hpp>

namespace loom::app {

namespace {

nlohmann::ordered_json problemsJson(const std::vector<plan::Problem>& problems)
{
    auto list = nlohmann::ordered_json::array();
    for (const auto& p : problems)
        list.push_back({ { "field", p.field }, { "message", p.message } });
    return list;
}

// Reads a layout from a file path, or from the built-in example when `path` starts with ":/".
plan::LayoutReadResult readAnyLayout(CliContext& context, const QString& path)
{
    if (path.startsWith(QLatin1String(":/"))) {
        QFile file(path);
        plan::LayoutReadResult missing;
        if (!file.open(QIODevice::ReadOnly)) {
            missing.diagnostics.error("", "the built-in example " + path.toStdString() + " is missing from this build");
            return missing;
        }
        return plan::readLayout(file.readAll().toStdString(), context.catalog());
    }
    return plan::readLayoutFile(path.toStdString(), context.catalog());
}

// What `loom run` would refuse on this machine (launcher::launchRefusal): warnings, as the layout itself is
// valid and may be run elsewhere or with --cluster / --max-local-ranks.
void addLaunchWarnings(plan::LayoutReadResult& result)
{
    if (!result.layout)
        return;
    for (const QString& p : launcher::launchPolicyProblems(*result.layout))
        result.diagnostics.warning("cluster.launch", "loom run would refuse this: " + p.toStdString());
    // The rank cap concerns layouts made to run here (a cluster like "local", whose devices are the ranks
    // asked for); a plan for a GPU cluster is not a run on this machine.
    const QString many = result.layout->cluster.autoDevices()
        ? launcher::localRanksProblem(*result.layout, launcher::defaultMaxLocalRanks())
        : QString();
    if (!many.isEmpty())
        result.diagnostics.warning("parallel", "loom run would refuse this: " + many.toStdString());
    // Valid for the planner, beyond the bundled engine (plan::engineSupport): loom run refuses it too.
    for (const std::string& p : plan::engineSupport(*result.layout).problems)
        result.diagnostics.warning("engine", plan::kEngineCannotTrain + p);
}

} // namespace

int validateCommand(CliContext& context, const QStringList& args)
{
    bool json = false;
    QStringList files;
    for (const auto& a : args) {
        if (a == QLatin1String("--json"))
            json = true;
        else if (a.startsWith(QLatin1String("--")))
            return context.err << "loom validate: unknown option " << a.toStdString() << "\n", ExitUsage;
        else
            files << a;
    }
    if (files.isEmpty()) {
        context.err << "usage: loom validate LAYOUT.json... [--json]\n";
        return ExitUsage;
    }
    bool allValid = true;
    auto report = nlohmann::ordered_json::array();
    for (const auto& file : files) {
        auto result = readAnyLayout(context, file);
        addLaunchWarnings(result);
        const bool valid = result.ok();
        allValid = allValid && valid;
        if (json) {
            report.push_back({ { "file", file.toStdString() }, { "valid", valid },
                { "errors", problemsJson(result.diagnostics.errors()) },
                { "warnings", problemsJson(result.diagnostics.warnings()) } });
            continue;
        }
        const std::string prefix = files.size() > 1 ? file.toStdString() + ": " : "";
        for (const auto& p : result.diagnostics.errors())
            context.out << prefix << "error: " << p.message << "\n";
        for (const auto& p : result.diagnostics.warnings())
            context.out << prefix << "warning: " << p.message << "\n";
        if (valid)
            context.out << prefix << "valid\n";
        else
            context.out << prefix << result.diagnostics.errors().size() << " problem"
                        << (result.diagnostics.errors().size() == 1 ? "" : "s") << "; the layout is not valid\n";
    }
    if (json)
        context.out << (files.size() == 1 ? report[0] : report).dump(2) << "\n";
    return allValid ? ExitOk : ExitInvalid;
}

int describeCommand(CliContext& context, const QStringList& args)
{
    QString path;
    for (const auto& a : args) {
        if (a == QLatin1String("--headless"))
            continue; // main() sends everything but --headless (and runs without a display) to the window
        if (a.startsWith(QLatin1String("-"))) {
            context.err << "loom: unknown option " << a.toStdString() << "; see loom --help\n";
            return ExitUsage;
        }
        if (!path.isEmpty()) {
            context.err << "loom: one layout at a time; see loom --help\n";
            return ExitUsage;
        }
        path = a;
    }
    const bool example = path.isEmpty();
    if (example)
        path = QStringLiteral(":/examples/tiny-local.json");

    const auto result = readAnyLayout(context, path);
    context.out << "loom " << LOOM_VERSION << ": "
                << (example ? std::string("the built-in example layout (resources/examples/tiny-local.json)")
                            : "layout " + path.toStdString())
                << "\n";
    if (result.ok())
        context.out << "valid\n";
    else
        context.out << result.diagnostics.errors().size() << " problem(s); the layout is not valid\n";
    context.out << result.diagnostics.format();
    if (result.layout)
        context.out << "\n" << plan::describeLayout(*result.layout);
    return result.ok() ? ExitOk : ExitInvalid;
}

} // namespace loom::app
