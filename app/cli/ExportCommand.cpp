// loom export LAYOUT.json --to megatron|deepspeed|torchtitan [--out FILE]: the layout in a framework's own
// arguments or config, with a launch script for the cluster profile's launch method.
#include "app/cli/CommandLine.h"
#include "app/cli/Commands.h"

#include "engine/bridges/Export.h"
#include "engine/plan/LayoutParser.h"

#include <QFile>

#include <cstdio>
#include <fstream>

namespace loom::app {

namespace {

const char* kUsage
    = "usage: loom export LAYOUT.json --to megatron|deepspeed|torchtitan [--out FILE] [--framework-version V]\n"
      "  without --out the files are printed; with it the first goes to FILE and a separate launch\n"
      "  script beside it (FILE's name with .<target>.sh)\n"
      "  --framework-version: megatron core_v0.12 .. core_v0.19 (default) or main; torchtitan v0.2;\n"
      "  deepspeed main\n";

// A file name in a "==> NAME <==" header: control characters as \xNN, so that a name cannot end the line
// and forge the next file's header.
std::string headerName(const std::string& name)
{
    std::string out;
    for (char c : name) {
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u == 0x7f || c == '\\') {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", unsigned(u));
            out += buf;
        } else {
            out += c;
        }
    }
    return out;
}

bool writeFile(const plan::ExportFile& f, std::ostream& err)
{
    std::ofstream out(f.name, std::ios::trunc | std::ios::binary);
    if (!out || !(out << f.text) || !out.flush()) {
        err << "error: cannot write " << f.name << "\n";
        return false;
    }
    out.close();
    if (f.executable) {
        QFile file(QString::fromStdString(f.name));
        file.setPermissions(file.permissions() | QFileDevice::ExeOwner | QFileDevice::ExeGroup | QFileDevice::ExeOther);
    }
    return true;
}

} // namespace

int exportCommand(CliContext& context, const QStringList& args)
{
    QString layoutFile, target, outFile, version;
    for (int i = 0; i < args.size(); ++i) {
        if (args[i] == QLatin1String("--to") && i + 1 < args.size())
            target = args[++i];
        else if (args[i] == QLatin1String("--out") && i + 1 < args.size())
            outFile = args[++i];
        else if (args[i] == QLatin1String("--framework-version") && i + 1 < args.size())
            version = args[++i];
        else if (layoutFile.isEmpty() && !args[i].startsWith(QLatin1String("--")))
            layoutFile = args[i];
        else {
            context.err << "loom export: unexpected argument \"" << args[i].toStdString() << "\"\n" << kUsage;
            return ExitUsage;
        }
    }
    const auto kind = plan::exportTargetFromString(target.toStdString());
    if (layoutFile.isEmpty() || !kind) {
        if (!target.isEmpty() && !kind)
            context.err << "loom export: unknown target \"" << target.toStdString() << "\"\n";
        context.err << kUsage;
        return ExitUsage;
    }
    const auto read = plan::readLayoutFile(layoutFile.toStdString(), context.catalog());
    if (!read.ok()) {
        context.err << read.diagnostics.format();
        return ExitInvalid;
    }
    plan::ExportOptions options;
    options.frameworkVersion = version.toStdString();
    const auto result = plan::exportLayout(*read.layout, *kind, outFile.toStdString(), options);
    if (!result.ok()) {
        context.err << "error: " << layoutFile.toStdString() << " cannot be exported to " << plan::toString(*kind)
                    << ":\n";
        for (const auto& r : result.refusals)
            context.err << "  - " << r << "\n";
        return ExitInvalid;
    }
    for (const auto& n : result.notes)
        context.err << "note: " << n << "\n";
    if (outFile.isEmpty()) {
        for (const auto& f : result.files)
            context.out << (result.files.size() > 1 ? "==> " + headerName(f.name) + " <==\n" : std::string()) << f.text;
        return ExitOk;
    }
    for (const auto& f : result.files) {
        if (!writeFile(f, context.err))
            return ExitFailure;
        context.out << "wrote " << f.name << "\n";
    }
    return ExitOk;
}

} // namespace loom::app
