#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <thread>
#include <vector>

namespace loom::train {

// Compute threads of this process: the OpenBLAS threads that run the GEMMs, also used by the optimizer and
// the gradient norm. Set once at the start (loom-train: threadsPerRank of the machine), read where needed.
int computeThreads();
void setComputeThreads(int threads);

// The kernels OpenBLAS runs the matrix products with ("Haswell", "Zen", "SkylakeX", ...): chosen when the
// library loads, from the CPU or from OPENBLAS_CORETYPE.
std::string blasCoreName();

// OpenBLAS runs its generic kernels ("Prescott", SSE3) on a processor newer than its build knows (Debian 12's
// 0.3.21 on Intel Sapphire Rapids: a third of the matrix-product rate of its AVX-512 kernels). The kernels
// to ask for instead: "SkylakeX" on a CPU with AVX-512 (F, BW, DQ, VL, CD), "Haswell" with AVX2 and FMA;
// empty when OpenBLAS chose other kernels itself or OPENBLAS_CORETYPE is set (a choice made by hand stands).
std::string betterBlasCore();
// Before anything else in main (before MPI starts): where betterBlasCore() names kernels, runs this program
// again (execv of its own file, the same arguments and process) with OPENBLAS_CORETYPE set to them and
// LOOM_BLAS_CORE_CHOSEN=1; returns only when there is nothing to change or the exec failed.
void restartWithBetterBlasKernels(char** argv);
// Whether this process runs the kernels restartWithBetterBlasKernels chose (for the banner).
bool blasCoreChosenByLoom();

// The cores this process may run on (its CPU affinity mask; mpirun's binding narrows it).
int availableCores();

// Threads each rank should run: the cores of this node shared evenly by the ranks on it, at least one.
// `requested` > 0 (the user's OPENBLAS_NUM_THREADS or LOOM_THREADS) wins.
int threadsPerRank(int coresOnNode, int ranksOnNode, int requested = 0);

// Sets this process's compute threads for `ranksOnNode` ranks sharing this node: LOOM_THREADS or
// OPENBLAS_NUM_THREADS when set, else threadsPerRank of the node's cores, but never more than the cores this
// process may run on (mpirun binds each rank to one core unless told --bind-to none or --map-by ...:PE=k).
// Returns the count and, in `note`, a sentence when the binding held the rank below its share (else empty).
int configureComputeThreads(int ranksOnNode, std::string& note);

// Runs fn(part, begin, end) over at most `threads` contiguous, equal parts of [0, n) (the last may be
// shorter), part 0 on the calling thread. The split depends only on n and threads, so results are reproducible.
// Below `grain` elements per thread the work is not worth a thread start and runs on fewer threads.
template <typename Fn> void parallelFor(std::size_t n, int threads, Fn&& fn, std::size_t grain = 1 << 16)
{
    const std::size_t parts = std::clamp<std::size_t>(
        n / std::max<std::size_t>(grain, 1), 1, static_cast<std::size_t>(std::max(threads, 1)));
    if (parts == 1) {
        fn(std::size_t(0), std::size_t(0), n);
        return;
    }
    const std::size_t per = (n + parts - 1) / parts;
    std::vector<std::thread> workers;
    workers.reserve(parts - 1);
    for (std::size_t p = 1; p < parts; ++p)
        workers.emplace_back([&fn, p, per, n] { fn(p, std::min(n, p * per), std::min(n, (p + 1) * per)); });
    fn(std::size_t(0), std::size_t(0), std::min(n, per));
    for (auto& w : workers)
        w.join();
}

} // namespace loom::train
