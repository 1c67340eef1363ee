// RunController's reading of a failed run's log, for callers that know no run (tests, the CLI's replay of a
// stored log): launcher::causeFromLog with a world that accepts every rank and host name.
#include "launcher/RunController.h"

#include <limits>

namespace loom::launcher {

QString RunController::causeFromLog(const QString& log)
{
    return launcher::causeFromLog(log, RunWorld { std::numeric_limits<std::int32_t>::max(), {} });
}

} // namespace loom::launcher
