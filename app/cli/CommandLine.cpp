#include "app/cli/CommandLine.h"

#include "app/cli/Commands.h"
#include "app/cli/SafeOutput.h"
#include "engine/json/JsonLimits.h"
#include "engine/trace/PlainWhat.h"

#include <exception>

namespace loom::app {

namespace {
const char* kUsage
    = "usage: loom [LAYOUT.json] [--run N] [--show schedule|timeline|metrics|runs] [--lesson ID] [--screenshot PNG]\n"
      "                                              the workbench window (the example when no layout); --run N "
      "trains\n"
      "                                              N steps at once, --show raises a dock, --screenshot saves the "
      "window\n"
      "       loom --headless [LAYOUT.json]         describe a layout in the terminal\n"
      "       loom validate LAYOUT.json... [--json]  check layouts; exit 0 when valid, 2 with every problem listed\n"
      "       loom profiles list [--json]            built-in and user model and cluster profiles\n"
      "       loom profiles show NAME [--json]       one profile in full\n"
      "       loom profiles import FILE.json         save a model or cluster profile in the store\n"
      "       loom profiles remove NAME [--kind model|cluster]  delete a user profile from the store\n"
      "       loom plan predict LAYOUT.json [--stack NAME] [--json]\n"
      "                                              predicted step time, TFLOP/s, bubble, memory per device;\n"
      "                                              --stack prices another framework's kernels\n"
      "       loom plan search --model M --cluster C --nodes N --global-batch B [--top K] [--json]\n"
      "                                              the fastest layouts that fit, and why the first wins\n"
      "       loom plan calibrate TRACE.json --cluster C [--name NAME] [--json]\n"
      "                                              fit C's efficiency and links to a run measured with\n"
      "                                              loom-train --trace-out; saves C-calibrated (or NAME)\n"
      "       loom simulate LAYOUT.json --out FILE    the simulated step as a Chrome trace (Perfetto)\n"
      "       loom trace stats TRACE.json [--json]    bubble per stage, bandwidth per collective, overlap, tokens/s\n"
      "       loom run LAYOUT.json [--steps N] [--cluster NAME] [--checkpoint-dir DIR] [--max-local-ranks N]\n"
      "                                              train (here, over ssh or under Slurm) with live progress; Ctrl-C "
      "cancels\n"
      "       loom runs list [--json] | show ID | export ID --chrome FILE\n"
      "       loom lessons list [--json] | validate LESSON.json...\n"
      "                                              the workbench's lessons (open one with loom --lesson ID)\n"
      "       loom export LAYOUT.json --to megatron|deepspeed|torchtitan [--out FILE] [--framework-version V]\n"
      "                                              the layout as the framework's arguments or config + launch "
      "script\n"
      "       loom trace import FILE... [--layout LAYOUT.json] [--out TRACE.json]\n"
      "                                              PyTorch profiler traces (one per rank) as a Loom trace\n"
      "       loom --version | --help\n"
      "\n"
      "The store is $LOOM_DB when set, else $XDG_DATA_HOME/loom/loom.db.\n"
      "Exit codes: 0 success, 1 failure, 2 invalid layout or profile, 64 wrong command line.\n";
} // namespace

int runCommandLine(const QStringList& args, std::ostream& rawOut, std::ostream& rawErr)
{
    // Names from files and the store reach the terminal: everything is written through an escaping buffer.
    TerminalSafeBuffer outBuffer(rawOut), errBuffer(rawErr);
    std::ostream out(&outBuffer), err(&errBuffer);
    CliContext context(out, err);
    try {
        if (args.value(0) == QLatin1String("--version") || args.value(0) == QLatin1String("-V")) {
            out << "loom " << LOOM_VERSION << "\n";
            return ExitOk;
        }
        if (args.value(0) == QLatin1String("--help") || args.value(0) == QLatin1String("-h")) {
            out << kUsage;
            return ExitOk;
        }
        const QString command = args.value(0);
        if (command == QLatin1String("validate"))
            return validateCommand(context, args.mid(1));
        if (command == QLatin1String("profiles"))
            return profilesCommand(context, args.mid(1));
        if (command == QLatin1String("plan"))
            return planCommand(context, args.mid(1));
        if (command == QLatin1String("simulate"))
            return simulateCommand(context, args.mid(1));
        if (command == QLatin1String("trace"))
            return traceCommand(context, args.mid(1));
        if (command == QLatin1String("run"))
            return runCommand(context, args.mid(1));
        if (command == QLatin1String("runs"))
            return runsCommand(context, args.mid(1));
        if (command == QLatin1String("lessons"))
            return lessonsCommand(context, args.mid(1));
        if (command == QLatin1String("export"))
            return exportCommand(context, args.mid(1));
        if (command.isEmpty() || command.startsWith(QLatin1Char('-')) || command.endsWith(QLatin1String(".json"))
            || command.contains(QLatin1Char('/')))
            return describeCommand(context, args);
        err << "loom: unknown command \"" << command.toStdString() << "\"\n" << kUsage;
        return ExitUsage;
    } catch (const std::exception& e) {
        // Never the libraries' own words ("std::bad_alloc", "[json.exception...]", "filesystem error: ...").
        err << "error: "
            << plainWhat(e,
                   "out of memory: loom could not allocate what this command needs; give it a smaller input or "
                   "free memory")
            << "\n";
        return ExitFailure;
    }
}

} // namespace loom::app
