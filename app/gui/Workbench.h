#pragma once

#include <QStringList>

namespace loom::app {

// Whether the arguments ask for the workbench window: no subcommand, at most one layout file, no
// --headless (`loom`, `loom FILE.json`, `loom FILE.json --screenshot PNG`).
bool wantsWorkbench(const QStringList& args);

// Runs the workbench window until it is closed. Without a display it says so and describes the layout in
// the terminal instead. `--screenshot PNG` saves the window once the first prediction is shown, and exits.
int runWorkbench(int& argc, char** argv, const QStringList& args);

} // namespace loom::app
