#pragma once

#include <functional>
#include <string>

namespace loom::comm {

// Where a rendezvous happens (LOOM_RENDEZVOUS): "host:port" is a TCP store that rank 0 serves; anything
// with a '/' is a folder on a file system every rank sees (the run folder), used through a file store.
struct Rendezvous {
    enum class Kind { None, Tcp, Folder };
    Kind kind = Kind::None;
    std::string host;
    int port = 0;
    std::string folder;
};

// How this process was started: its rank, the world size and its rank among the processes of its node, from
// whichever starter set them. One process is started per rank by mpirun, srun, Loom's launcher or any
// process starter; nothing here needs MPI.
struct ProcessStart {
    int rank = 0;
    int size = 1;
    int localRank = 0;
    Rendezvous rendezvous; // LOOM_RENDEZVOUS; Kind::None when unset
    std::string jobId; // the starter's job id ("" when none): names a default rendezvous folder
    std::string source; // "LOOM_RANK", "mpirun", "slurm" or "one process", for messages
};

// Reads the start from environment variables through `env` (getenv's contract: null when unset), in this
// order: LOOM_RANK, LOOM_WORLD_SIZE, LOOM_LOCAL_RANK (an explicit start, e.g. Loom's launcher); mpirun's
// OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK; Slurm's SLURM_PROCID,
// SLURM_NTASKS, SLURM_LOCALID; none of them: one process. LOOM_RENDEZVOUS is read in every case. Throws
// std::invalid_argument naming the variable when a value is not a number, a rank is outside the world,
// or a variable of a set is missing.
ProcessStart processStartFrom(const std::function<const char*(const char*)>& env);
ProcessStart processStartFromEnvironment();

// Parses LOOM_RENDEZVOUS's value; throws std::invalid_argument saying what is expected.
Rendezvous parseRendezvous(const std::string& text);

} // namespace loom::comm
