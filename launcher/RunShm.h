#pragma once

#include <QString>

namespace loom::launcher {

// Open MPI's shared-memory transport keeps a file per rank in /dev/shm and removes it when the rank
// finalises: a rank that is killed leaves its file, and the memory behind it, until the machine restarts.
// A local mpirun run therefore gets a folder of its own there (btl_vader_backing_directory), removed when
// the run ends. Folders left by a Loom that was itself killed (their name holds its process id) are removed
// the next time a run starts.

// Makes /dev/shm/loom-mpi-PID-XXXXXX (PID: this process) after removing the folders of Loom processes that
// are gone; empty when /dev/shm cannot hold it (the run then uses Open MPI's default).
QString makeRunShmDir();
// Removes the folder and what the ranks left in it.
void removeRunShmDir(const QString& dir);

} // namespace loom::launcher
