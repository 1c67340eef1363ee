#pragma once

#include "app/cli/Output.h"

#include <QStringList>

namespace loom::app {

// Each returns an ExitCode. `args` excludes the subcommand's own name.
int validateCommand(CliContext& context, const QStringList& args);
int profilesCommand(CliContext& context, const QStringList& args);
int describeCommand(CliContext& context, const QStringList& args);
int planCommand(CliContext& context, const QStringList& args);
int calibrateCommand(CliContext& context, const QStringList& args, bool json); // loom plan calibrate
int simulateCommand(CliContext& context, const QStringList& args);
int traceCommand(CliContext& context, const QStringList& args);
int runCommand(CliContext& context, const QStringList& args);
int runsCommand(CliContext& context, const QStringList& args);
int lessonsCommand(CliContext& context, const QStringList& args); // loom lessons list | validate
int exportCommand(CliContext& context, const QStringList& args); // loom export (bridges to other frameworks)
int traceImportCommand(CliContext& context, const QStringList& args); // loom trace import

} // namespace loom::app
