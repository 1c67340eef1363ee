#pragma once

#include <QString>
#include <QStringList>

#include <vector>

namespace loom::launcher {

// Each rank's log of a run, found from its stored command: where mpirun (--output-filename) or srun (--error)
// kept them, or where they are on a head node (ssh). For `loom runs show` and the workbench's Logs.
struct RankLogs {
    QString dir; // the run's log folder; empty: the command keeps no rank logs
    bool onCluster = false; // ssh: the folder is on the head node, not here
};
RankLogs rankLogsOf(const QString& command);

// One rank's log file.
struct RankLogFile {
    int rank = -1;
    QString stream; // "stdout" or "stderr"
    QString path;
};
// The rank log files under `dir`, by rank then stream: Open MPI's 1/rank.N/stdout and stderr and srun's
// rank.N.stderr. At most `limit` files (a folder of a million ranks is not listed whole).
std::vector<RankLogFile> rankLogFiles(const QString& dir, int limit = 4096);

// The last `maxBytes` of a log file as text, starting at a line break when it was cut (and saying so),
// without the telemetry frames (rank 0's standard output carries them); empty with *error set when the file cannot be
// read or is not a regular file (a FIFO would block).
QString readLogTail(const QString& path, qint64 maxBytes, QString* error);

} // namespace loom::launcher
