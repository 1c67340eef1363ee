// Shared by the Slurm launcher tests (tst_launcher_slurm, tst_launcher_sbatch): a launch request for the
// test cluster's partition "loomtest", one node, `dp` ranks of data parallelism.
#pragma once

#include "launcher/LaunchCommands.h"

#include <QString>

#include <cstdint>

namespace loomtest {

inline loom::launcher::LaunchRequest slurmRequest(const char* name, std::int64_t dp, const QString& engine)
{
    loom::launcher::LaunchRequest r;
    r.layout.name = name;
    r.layout.nodes = 1;
    r.layout.parallel.dp = dp;
    r.layout.cluster.launch.method = "slurm";
    r.layout.cluster.launch.partition = "loomtest";
    r.engine = engine;
    return r;
}

} // namespace loomtest
