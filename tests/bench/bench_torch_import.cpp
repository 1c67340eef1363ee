// bench_torch_import [MB]: writes a synthetic Kineto trace of about MB megabytes (default 1000) shaped like a
// real GPU training trace (per step: ops with their args, launches, kernels with correlation, NCCL kernels
// inside record_param_comms), then times `loom trace import` on it in a child process and prints the wall
// time and the child's peak resident memory (getrusage). The target: 1 GB in under 20 s holding under 2 GB.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace {

void writeTrace(const std::string& path, double megabytes)
{
    std::ofstream out(path, std::ios::trunc);
    out << "{\"schemaVersion\": 1, \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 0, \"world_size\": 8},\n"
           "\"baseTimeNanoseconds\": 1711964646000000000, \"traceEvents\": [\n";
    const auto target = static_cast<std::streamoff>(megabytes * 1e6);
    long long ts = 1000, correlation = 1;
    int step = 0;
    bool first = true;
    char buf[1024];
    auto emit = [&](const char* s) {
        out << (first ? "" : ",\n") << s;
        first = false;
    };
    while (out.tellp() < target) {
        const long long stepStart = ts;
        std::snprintf(buf, sizeof buf,
            "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#%d\", \"pid\": 1, \"tid\": 1, "
            "\"ts\": %lld.000, \"dur\": 40000.000, \"args\": {\"External id\": %lld}}",
            step, ts, correlation);
        emit(buf);
        for (int op = 0; op < 2000; ++op, ts += 20, ++correlation) {
            std::snprintf(buf, sizeof buf,
                "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", \"pid\": 1, \"tid\": 1, \"ts\": "
                "%lld.125, \"dur\": 15.250, \"args\": {\"External id\": %lld, \"Record function id\": 0, \"Ev Idx\": "
                "%lld, \"Input Dims\": [[4096, 4096], [4096, 4096]], \"Input type\": [\"float\", \"float\"], "
                "\"Input Strides\": [[4096, 1], [4096, 1]], \"Concrete Inputs\": [\"\", \"\"]}}",
                ts, correlation, correlation);
            emit(buf);
            std::snprintf(buf, sizeof buf,
                "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 1, \"tid\": 1, "
                "\"ts\": %lld.500, \"dur\": 4.000, \"args\": {\"External id\": %lld, \"cbid\": 211, \"correlation\": "
                "%lld}}",
                ts + 2, correlation, correlation);
            emit(buf);
            std::snprintf(buf, sizeof buf,
                "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"%s\", \"pid\": 0, \"tid\": 7, \"ts\": %lld.750, "
                "\"dur\": 12.333, \"args\": {\"External id\": %lld, \"queued\": 0, \"device\": 0, \"context\": 1, "
                "\"stream\": %d, \"correlation\": %lld, \"registers per thread\": 128, \"shared memory\": 49152, "
                "\"blocks per SM\": 1.5, \"warps per SM\": 12.0, \"grid\": [128, 1, 1], \"block\": [256, 1, 1], "
                "\"est. achieved occupancy %%\": 25}}",
                op % 50 == 0 ? "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)"
                             : "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params)",
                ts + 8, correlation, op % 50 == 0 ? 20 : 7, correlation);
            emit(buf);
            if (op % 50 == 0) {
                std::snprintf(buf, sizeof buf,
                    "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"record_param_comms\", \"pid\": 1, \"tid\": 1, "
                    "\"ts\": %lld.000, \"dur\": 10.000, \"args\": {\"Collective name\": \"allreduce\", \"dtype\": "
                    "\"Float\", \"In msg nelems\": 1048576, \"Out msg nelems\": 1048576, \"Group size\": 8, "
                    "\"Process Group Name\": \"0\", \"Process Group Ranks\": \"[0, 1, 2, 3, 4, 5, 6, 7]\"}}",
                    ts);
                emit(buf);
            }
        }
        ts = stepStart + 40001;
        ++step;
    }
    out << "\n]}\n";
}

} // namespace

int main(int argc, char** argv)
{
    const double megabytes = argc > 1 ? std::atof(argv[1]) : 1000.0;
    char dir[] = "/tmp/bench_torch_import-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    const std::string trace = std::string(dir) + "/rank0.json", out = std::string(dir) + "/loom.json";
    writeTrace(trace, megabytes);
    std::ifstream size(trace, std::ios::ate);
    const double bytes = double(size.tellg());
    const auto start = std::chrono::steady_clock::now();
    const pid_t child = fork();
    if (child == 0) {
        execl(LOOM_EXE, LOOM_EXE, "trace", "import", trace.c_str(), "--out", out.c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    int status = 0;
    rusage usage {};
    wait4(child, &status, 0, &usage);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double cpu = double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
        + double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
    // CPU time too: on a machine whose cores are shared, wall time also counts the others' work.
    std::printf("bench_torch_import: %.0f MB trace imported in %.1f s (%.1f s of CPU), peak RSS %.0f MB (exit %d); "
                "target < 20 s, < 2000 MB\n",
        bytes / 1e6, seconds, cpu, double(usage.ru_maxrss) / 1024.0, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    std::remove(trace.c_str());
    std::remove(out.c_str());
    rmdir(dir);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
