// loom trace import FILE... [--layout LAYOUT.json] [--out TRACE.json]: PyTorch profiler traces as a Loom trace.
#include "app/cli/CommandLine.h"
#include "app/cli/Commands.h"
#include "app/cli/TraceImport.h"

#include "engine/plan/LayoutParser.h"
#include "engine/plan/RankGrid.h"
#include "engine/trace/ChromeTrace.h"
#include "engine/trace/PlainWhat.h"

#include <QFile>
#include <QFileInfo>

#include <nlohmann/json.hpp>

#include <fstream>
#include <set>

namespace loom::app {

namespace {

const char* kUsage
    = "usage: loom trace import FILE... [--layout LAYOUT.json] [--out TRACE.json]\n"
      "  FILE: a PyTorch profiler trace (torch.profiler export_chrome_trace, .json or .json.gz), one per\n"
      "        rank; \"-\" reads standard input\n";

// Recorded groups whose ranks are one of the layout's TP, PP or DP groups take that name and kind.
void nameGroups(std::vector<trace::GroupInfo>& groups, const plan::RankGrid& grid)
{
    const std::pair<plan::GroupKind, trace::GroupKind> kinds[] = { { plan::GroupKind::Tensor,
                                                                       trace::GroupKind::Tensor },
        { plan::GroupKind::Pipeline, trace::GroupKind::Pipeline }, { plan::GroupKind::Data, trace::GroupKind::Data } };
    for (auto& g : groups) {
        if (g.ranks.empty() || g.kind == trace::GroupKind::World)
            continue;
        const std::set<std::int64_t> mine(g.ranks.begin(), g.ranks.end());
        for (const auto& [planKind, traceKind] : kinds) {
            for (const auto& members : grid.groups(planKind)) {
                if (std::set<std::int64_t>(members.begin(), members.end()) != mine || members.size() < 2)
                    continue;
                g.kind = traceKind;
                g.name = std::string(trace::toString(traceKind)) + " group " + g.name;
            }
        }
    }
}

} // namespace

ImportedTrace importTraceFiles(const QStringList& files, const std::optional<plan::Layout>& layout)
{
    std::vector<trace::TorchTraceFile> inputs;
    for (const auto& f : files) // streamed from the file (plain or gzip), a regular file or "-" only
        inputs.push_back({ f.toStdString(), std::string(), f.toStdString() });
    trace::TorchImportOptions options;
    std::optional<plan::RankGrid> grid;
    if (layout) {
        grid = plan::RankGrid::forLayout(*layout);
        if (grid->size() != static_cast<std::int64_t>(files.size()))
            throw trace::TorchTraceError("the layout \"" + layout->name + "\" has " + std::to_string(grid->size())
                + " ranks (tp·pp·dp) but " + std::to_string(files.size())
                + " traces were given; expected one trace per rank");
        for (std::int64_t r = 0; r < grid->size(); ++r)
            options.stageOfRank.push_back(static_cast<std::int32_t>(grid->coordOf(r).pp));
    }
    ImportedTrace out;
    out.import = trace::importTorchTraces(inputs, options);
    if (grid)
        nameGroups(out.import.groups, *grid);
    nlohmann::ordered_json names = nlohmann::ordered_json::array();
    for (const auto& f : files)
        names.push_back(QFileInfo(f).fileName().toStdString());
    nlohmann::ordered_json other = { { "generator", "loom trace import" }, { "loom_trace", 1 },
        { "imported",
            { { "from", "PyTorch profiler" }, { "form", out.import.form }, { "files", names },
                { "ranks", out.import.ranks }, { "steps", out.import.steps }, { "lacks", out.import.lacks },
                { "notes", out.import.notes } } } };
    auto steps = nlohmann::ordered_json::array(); // what loom trace stats times steps and HTA's window by
    for (const auto& st : out.import.profilerSteps)
        steps.push_back(
            { { "rank", st.rank }, { "step", st.step }, { "start_ns", st.startNs }, { "end_ns", st.endNs } });
    other["imported"]["profiler_steps"] = steps;
    if (layout)
        other["layout"] = nlohmann::ordered_json::parse(plan::writeLayout(*layout));
    out.otherData = other.dump();
    return out;
}

std::string describeImport(const ImportedTrace& imported, const QStringList& files)
{
    const auto& i = imported.import;
    std::size_t compute = 0, comm = 0, device = 0, launches = 0;
    for (const auto& e : i.events) {
        if (e.kind == trace::EventKind::Launch) {
            ++launches;
            continue;
        }
        (e.lane == trace::Lane::Comm ? comm : compute) += 1;
        device += e.stream >= 0 ? 1 : 0;
    }
    std::string s = "imported " + std::to_string(files.size()) + " PyTorch profiler trace"
        + (files.size() == 1 ? "" : "s") + " (" + i.form + "): " + std::to_string(i.ranks) + " ranks, "
        + std::to_string(i.steps) + " steps, " + std::to_string(compute) + " compute and " + std::to_string(comm)
        + " communication events" + (device ? " (" + std::to_string(device) + " on GPU streams)" : std::string())
        + (launches ? ", " + std::to_string(launches) + " launches on the host" : std::string()) + "\n";
    for (const auto& n : i.notes)
        s += "  note: " + n + "\n";
    for (const auto& l : i.lacks)
        s += "  lacks: " + l + "\n";
    return s;
}

int traceImportCommand(CliContext& context, const QStringList& args)
{
    QStringList files;
    QString out, layoutFile;
    for (int i = 0; i < args.size(); ++i) {
        if (args[i] == QLatin1String("--out") && i + 1 < args.size())
            out = args[++i];
        else if (args[i] == QLatin1String("--layout") && i + 1 < args.size())
            layoutFile = args[++i];
        else if (!args[i].startsWith(QLatin1String("--")) || args[i] == QLatin1String("-"))
            files << args[i];
        else {
            context.err << "loom trace import: unexpected argument \"" << args[i].toStdString() << "\"\n" << kUsage;
            return ExitUsage;
        }
    }
    if (files.isEmpty()) {
        context.err << kUsage;
        return ExitUsage;
    }
    std::optional<plan::Layout> layout;
    if (!layoutFile.isEmpty()) {
        const auto read = plan::readLayoutFile(layoutFile.toStdString(), context.catalog());
        if (!read.ok()) {
            context.err << read.diagnostics.format();
            return ExitInvalid;
        }
        layout = read.layout;
    }
    ImportedTrace imported;
    try {
        imported = importTraceFiles(files, layout);
    } catch (const trace::TorchTraceError& e) {
        context.err << "error: " << plainWhat(e) << "\n";
        return ExitInvalid;
    }
    context.err << describeImport(imported, files);
    if (out.isEmpty()) {
        trace::writeChromeTrace(context.out, imported.import.events, imported.import.groups, imported.otherData);
        return ExitOk;
    }
    std::ofstream file(out.toStdString(), std::ios::trunc);
    trace::writeChromeTrace(file, imported.import.events, imported.import.groups, imported.otherData);
    if (!file.flush()) {
        context.err << "error: cannot write " << out.toStdString() << "\n";
        return ExitFailure;
    }
    context.err << "wrote " << out.toStdString() << "; see it with loom trace stats " << out.toStdString() << "\n";
    return ExitOk;
}

} // namespace loom::app
