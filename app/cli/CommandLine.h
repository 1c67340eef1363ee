#pragma once

#include <QStringList>

#include <ostream>

namespace loom::app {

// Exit codes of the `loom` command line.
enum ExitCode : int {
    ExitOk = 0,
    ExitFailure = 1, // something outside the input went wrong (the store, a file that cannot be written)
    ExitInvalid = 2, // the layout or profile has problems; each is listed
    ExitUsage = 64, // the command line itself is wrong (sysexits' EX_USAGE)
};

// Runs `loom <args>` (without the program name), writing results to `out` and problems to `err`.
// Needs a QCoreApplication. Never throws.
int runCommandLine(const QStringList& args, std::ostream& out, std::ostream& err);

} // namespace loom::app
