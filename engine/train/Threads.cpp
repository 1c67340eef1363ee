#include "engine/train/Threads.h"

#include <cblas.h>
#include <sched.h>

#include <cstdlib>

namespace loom::train {

int computeThreads()
{
    return std::max(1, openblas_get_num_threads());
}

void setComputeThreads(int threads)
{
    openblas_set_num_threads(std::max(1, threads));
}

std::string blasCoreName()
{
    const char* name = openblas_get_corename();
    return name ? name : "";
}

int availableCores()
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        return std::max(1, CPU_COUNT(&set));
    return std::max(1u, std::thread::hardware_concurrency());
}

int threadsPerRank(int coresOnNode, int ranksOnNode, int requested)
{
    if (requested > 0)
        return requested;
    return std::max(1, coresOnNode / std::max(1, ranksOnNode));
}

int configureComputeThreads(int ranksOnNode, std::string& note)
{
    note.clear();
    int requested = 0;
    for (const char* name : { "LOOM_THREADS", "OPENBLAS_NUM_THREADS" })
        if (const char* v = std::getenv(name); v && requested == 0)
            requested = std::clamp(std::atoi(v), 0, 4096);
    const int node = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    int threads = threadsPerRank(node, ranksOnNode, requested);
    const int bound = availableCores();
    if (requested == 0 && bound < threads) {
        note = "this rank may run on " + std::to_string(bound) + " of the node's " + std::to_string(node)
            + " cores (its share is " + std::to_string(threads)
            + "): mpirun binds each rank to one core by default; start it with --bind-to none "
            + "or --map-by slot:PE=" + std::to_string(threads) + " to use the rest";
        threads = bound;
    }
    setComputeThreads(threads);
    return threads;
}

} // namespace loom::train
