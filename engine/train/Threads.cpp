#include "engine/train/Threads.h"

#include <cblas.h>
#include <sched.h>
#include <unistd.h>

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

std::string betterBlasCore()
{
    if (std::getenv("OPENBLAS_CORETYPE") || blasCoreName() != "Prescott")
        return {};
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq")
        && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512cd"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return "Haswell";
    return {};
}

void restartWithBetterBlasKernels(char** argv)
{
    const std::string core = betterBlasCore();
    if (core.empty() || !argv || !argv[0])
        return;
    if (setenv("OPENBLAS_CORETYPE", core.c_str(), 1) != 0 || setenv("LOOM_BLAS_CORE_CHOSEN", "1", 1) != 0)
        return;
    // The program's own path, not /proc/self/exe: the process's name (ps, pgrep, the launcher) comes from it.
    char self[4096];
    const ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
    if (length > 0) {
        self[length] = '\0';
        execv(self, argv);
    }
    unsetenv("OPENBLAS_CORETYPE"); // the exec failed: carry on with the kernels this process has
    unsetenv("LOOM_BLAS_CORE_CHOSEN");
}

bool blasCoreChosenByLoom()
{
    const char* v = std::getenv("LOOM_BLAS_CORE_CHOSEN");
    return v && std::string(v) == "1";
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
