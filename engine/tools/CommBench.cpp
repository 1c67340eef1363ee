// loom-commbench: bandwidth of Loom's communicators, in the manner of nccl-tests. Run under mpirun.
#include "engine/comm/GradientCodec.h"
#include "engine/comm/AlgorithmTuner.h"
#include "engine/comm/MpiCommunicator.h"
#include "engine/tools/CommBenchOptions.h"
#if LOOM_WITH_NCCL
#include "engine/comm/NcclCommunicator.h"
#include <cuda_runtime_api.h>
#endif

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>
#include <vector>

using namespace loom;
using namespace loom::comm;

namespace {

// Integer-valued inputs make every lossless sum exact in any order; lossy codecs get fractional values
// in [-1, 1] so quantisation has something to round.
float inputValue(int rank, std::size_t i, bool fractional)
{
    if (!fractional)
        return static_cast<float>((rank + 1) * static_cast<int>(i % 7 + 1));
    std::uint64_t h = (static_cast<std::uint64_t>(rank) + 1) * 0x9E3779B97F4A7C15ull ^ (i * 0xBF58476D1CE4E5B9ull);
    h ^= h >> 31;
    return static_cast<float>(static_cast<int>(h % 2001) - 1000) / 1000.0f;
}

void fill(std::vector<std::uint8_t>& buf, std::size_t count, DType type, int rank, std::size_t offset, bool fractional)
{
    for (std::size_t i = 0; i < count; ++i) {
        const float v = inputValue(rank, offset + i, fractional);
        if (type == DType::F32)
            std::memcpy(buf.data() + 4 * i, &v, 4);
        else {
            const std::uint16_t h = type == DType::F16 ? floatToHalf(v) : floatToBf16(v);
            std::memcpy(buf.data() + 2 * i, &h, 2);
        }
    }
}

float load(const std::vector<std::uint8_t>& buf, std::size_t i, DType type)
{
    if (type == DType::F32) {
        float v;
        std::memcpy(&v, buf.data() + 4 * i, 4);
        return v;
    }
    std::uint16_t h;
    std::memcpy(&h, buf.data() + 2 * i, 2);
    return type == DType::F16 ? halfToFloat(h) : bf16ToFloat(h);
}

struct Result {
    double seconds = 0;  // mean
    double median = 0;
    std::uint64_t wrong = 0;
    std::uint64_t wire = 0;
};

class Bench {
public:
    Bench(const tools::CommBenchOptions& o, Communicator& c, int nodes = 1)
        : m_o(o), m_c(c), m_n(c.size()), m_r(c.rank()), m_nodes(nodes)
    {
    }

    // `bytes` is nccl-tests' size: the buffer (all-reduce, broadcast, send/recv) or the whole gathered
    // array (all-gather, reduce-scatter).
    Result run(std::uint64_t bytes)
    {
        const std::size_t es = sizeOf(m_o.type);
        const bool perRank = m_o.op == "allgather" || m_o.op == "reducescatter";
        const std::size_t total = bytes / es;
        const std::size_t count = perRank ? total / static_cast<std::size_t>(m_n) : total;
        const bool fractional = m_o.codec.lossy();
        std::vector<std::uint8_t> pristine, input, output;
        if (m_o.op == "allgather") {
            pristine.resize(count * es);
            fill(pristine, count, m_o.type, m_r, 0, fractional);
            output.resize(count * es * static_cast<std::size_t>(m_n));
        } else if (m_o.op == "reducescatter") {
            pristine.resize(count * es * static_cast<std::size_t>(m_n));
            fill(pristine, count * static_cast<std::size_t>(m_n), m_o.type, m_r, 0, fractional);
            output.resize(count * es);
        } else {
            pristine.resize(count * es);
            fill(pristine, count, m_o.type, m_r, 0, fractional);
            if (m_o.op == "sendrecv")
                output.resize(count * es);
        }
        const auto expected = expectation(count, fractional);

        CollectiveOptions options;
        options.algorithm = m_o.algorithm;
        if (m_o.autoAlgorithm)  // resolved here, as the trainer does: the communicator sees a concrete algorithm
            options.algorithm = chooseAllreduce({m_o.backend, std::size_t(bytes), m_n, m_nodes});
        options.chunkBytes = m_o.chunkBytes;
        options.codec = m_o.codec;
        options.codecBlock = m_o.codecBlock;

        Result result;
        std::vector<double> times;
        for (int it = -m_o.warmup; it < m_o.iters; ++it) {
            input = pristine;
            std::fill(output.begin(), output.end(), 0);
            Staging staging(m_c.onDevice(), input, output);
            MPI_Barrier(MPI_COMM_WORLD);
            const double t0 = MPI_Wtime();
            WorkStats stats = launch(staging, count, options);
            const double t1 = MPI_Wtime();
            staging.copyBack(input, output);
            if (it < 0)
                continue;
            double slowest = t1 - t0;  // the slowest rank's time for this iteration
            MPI_Allreduce(MPI_IN_PLACE, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            times.push_back(slowest);
            result.seconds += t1 - t0;
            result.wire = stats.wireBytes;
            if (m_o.check)
                result.wrong = std::max(result.wrong, countWrong(m_o.op == "allgather" || m_o.op == "reducescatter" || m_o.op == "sendrecv" ? output : input,
                                                                 expected));
        }
        result.seconds /= m_o.iters;
        std::sort(times.begin(), times.end());
        result.median = times[times.size() / 2];
        return result;
    }

private:
    // The buffers an operation works on: the host vectors themselves, or device copies for the NCCL backend.
    class Staging {
    public:
        Staging(bool device, const std::vector<std::uint8_t>& in, const std::vector<std::uint8_t>& out)
            : m_device(device), m_inBytes(std::max<std::size_t>(in.size(), out.size())), m_outBytes(out.size())
        {
            if (!m_device) {
                m_in = const_cast<std::uint8_t*>(in.data());
                m_out = const_cast<std::uint8_t*>(out.data());
                return;
            }
#if LOOM_WITH_NCCL
            cudaMalloc(&m_in, m_inBytes + 1);
            cudaMalloc(&m_out, m_outBytes + 1);
            cudaMemcpy(m_in, in.data(), in.size(), cudaMemcpyHostToDevice);
#endif
        }
        ~Staging()
        {
#if LOOM_WITH_NCCL
            if (m_device) {
                cudaFree(m_in);
                cudaFree(m_out);
            }
#endif
        }
        void copyBack(std::vector<std::uint8_t>& in, std::vector<std::uint8_t>& out)
        {
#if LOOM_WITH_NCCL
            if (m_device) {
                cudaMemcpy(in.data(), m_in, in.size(), cudaMemcpyDeviceToHost);
                cudaMemcpy(out.data(), m_out, out.size(), cudaMemcpyDeviceToHost);
            }
#else
            (void)in;
            (void)out;
#endif
        }
        void* in() { return m_in; }
        void* out() { return m_out; }

    private:
        bool m_device;
        std::size_t m_inBytes, m_outBytes;
        void* m_in = nullptr;
        void* m_out = nullptr;
    };

    WorkStats launch(Staging& b, std::size_t count, const CollectiveOptions& options)
    {
        WorkPtr w;
        if (m_o.op == "allreduce")
            w = m_c.allReduce(b.in(), count, m_o.type, ReduceOp::Sum, options);
        else if (m_o.op == "allgather")
            w = m_c.allGather(b.in(), b.out(), count, m_o.type, options);
        else if (m_o.op == "reducescatter")
            w = m_c.reduceScatter(b.in(), b.out(), count, m_o.type, ReduceOp::Sum, options);
        else if (m_o.op == "broadcast")
            w = m_c.broadcast(b.in(), count, m_o.type, 0);
        if (w) {
            w->wait();
            return w->stats();
        }
        // sendrecv: every rank sends to the next and receives from the previous, at once.
        w = m_c.sendRecv(b.in(), (m_r + 1) % m_n, b.out(), (m_r + m_n - 1) % m_n, count, m_o.type);
        w->wait();
        WorkStats st = w->stats();
        st.bytes /= 2;  // count what was sent, as nccl-tests does
        st.wireBytes = st.bytes;
        return st;
    }

    // Per element: the expected value and the error allowed (0 for lossless paths).
    struct Expected {
        std::vector<float> value;
        std::vector<float> tolerance;
    };

    Expected expectation(std::size_t count, bool fractional)
    {
        Expected e;
        if (!m_o.check)
            return e;
        const std::size_t n = static_cast<std::size_t>(m_n);
        if (m_o.op == "allgather") {
            for (int p = 0; p < m_n; ++p)
                for (std::size_t i = 0; i < count; ++i)
                    e.value.push_back(inputValue(p, i, false));
            e.tolerance.assign(e.value.size(), 0);
            return e;
        }
        if (m_o.op == "broadcast" || m_o.op == "sendrecv") {
            const int source = m_o.op == "broadcast" ? 0 : (m_r + m_n - 1) % m_n;
            for (std::size_t i = 0; i < count; ++i)
                e.value.push_back(inputValue(source, i, false));
            e.tolerance.assign(e.value.size(), 0);
            return e;
        }
        const std::size_t offset = m_o.op == "reducescatter" ? count * static_cast<std::size_t>(m_r) : 0;
        e.value.assign(count, 0);
        e.tolerance.assign(count, 0);
        auto codec = makeCodec(m_o.codec, m_o.codecBlock);
        if (m_o.codec.kind == plan::Codec::Kind::TopK && m_n > 1) {
            // Top-k's result is exact for what each rank kept: replay every rank's selection.
            std::vector<float> x(count), kept(count);
            std::vector<std::uint8_t> enc(codec->maxEncodedBytes(count));
            for (int p = 0; p < m_n; ++p) {
                for (std::size_t i = 0; i < count; ++i)
                    x[i] = inputValue(p, i, true);
                codec->decode(enc.data(), codec->encode(x.data(), count, enc.data()), kept.data(), count);
                for (std::size_t i = 0; i < count; ++i)
                    e.value[i] += kept[i];
            }
            return e;
        }
        float sumAbsMax = 0;
        std::vector<float> rankAbsMax(n, 0);
        for (int p = 0; p < m_n; ++p)
            for (std::size_t i = 0; i < count; ++i) {
                const float v = inputValue(p, offset + i, fractional);
                e.value[i] += v;
                rankAbsMax[static_cast<std::size_t>(p)] = std::max(rankAbsMax[static_cast<std::size_t>(p)], std::fabs(v));
            }
        for (float v : e.value)
            sumAbsMax = std::max(sumAbsMax, std::fabs(v));
        if (codec && codec->lossy() && m_n > 1) {
            // Two-phase: every input compressed once, the sum compressed once.
            for (std::size_t i = 0; i < count; ++i) {
                double bound = codec->errorBound(e.value[i], sumAbsMax);
                for (int p = 0; p < m_n; ++p)
                    bound += codec->errorBound(inputValue(p, offset + i, fractional), rankAbsMax[static_cast<std::size_t>(p)]);
                e.tolerance[i] = static_cast<float>(bound * 1.0001 + 1e-6 * m_n);
            }
        }
        return e;
    }

    std::uint64_t countWrong(const std::vector<std::uint8_t>& got, const Expected& e)
    {
        std::uint64_t wrong = 0;
        for (std::size_t i = 0; i < e.value.size(); ++i) {
            const float v = load(got, i, m_o.type);
            if (!(std::fabs(v - e.value[i]) <= e.tolerance[i]))
                ++wrong;
        }
        return wrong;
    }

    const tools::CommBenchOptions& m_o;
    Communicator& m_c;
    int m_n, m_r;
    int m_nodes;
};

double busFactor(const std::string& op, int n)
{
    if (op == "allreduce")
        return 2.0 * (n - 1) / n;
    if (op == "allgather" || op == "reducescatter")
        return double(n - 1) / n;
    return 1.0;
}

}  // namespace

int main(int argc, char** argv)
{
    std::vector<std::string> args(argv + 1, argv + argc);
    std::string error;
    bool help = false;
    auto options = tools::parseCommBenchOptions(args, error, help);
    if (!options) {
        (help ? std::cout : std::cerr) << (help ? "" : "loom-commbench: ") << error << (help ? "" : "\n");
        return help ? 0 : 64;
    }
    std::optional<MpiSession> sessionHolder;
    try {
        sessionHolder.emplace(&argc, &argv);
    } catch (const std::exception& e) {
        std::cerr << "loom-commbench: " << e.what() << "\n";
        return 1;
    }
    MpiSession& session = *sessionHolder;
    if (options->backend == "nccl") {
        // Every rank learns whether every rank has a GPU, so all stop cleanly together when one has none.
#if LOOM_WITH_NCCL
        const std::string problem = NcclCommunicator::deviceProblem();
#else
        const std::string problem = "the NCCL backend is not in this build (no CUDA toolkit with NCCL was found when "
                                    "it was built); use --backend mpi";
#endif
        int ok = problem.empty() ? 1 : 0;
        MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!ok) {
            if (!problem.empty())
                std::cerr << "loom-commbench: rank " << session.worldRank() << ": " << problem << "\n";
            return 1;
        }
    }
    try {
        CommConfig config = CommConfig::fromEnvironment();
        config.checkAgreement = options->agreementCheck;
        std::vector<int> nodes;
        if (options->ranksPerNode > 0)
            for (int r = 0; r < session.worldSize(); ++r)
                nodes.push_back(r / options->ranksPerNode);
        int result = 0;
        {
            std::unique_ptr<Communicator> communicator;
            if (options->backend == "nccl") {
#if LOOM_WITH_NCCL
                communicator = std::make_unique<NcclCommunicator>(MPI_COMM_WORLD, trace::GroupKind::World, "world",
                                                                  nullptr, config, nodes);
#endif
            } else {
                communicator = std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, trace::GroupKind::World, "world", nullptr,
                                                                 config, nodes);
            }
            Communicator& world = *communicator;
            const int n = world.size();
            if (session.worldRank() == 0 && !options->json) {
                std::printf("# loom-commbench: op %s, algo %s, codec %s, dtype %s, %d ranks, iters %d, warmup %d%s\n",
                            options->op.c_str(), options->autoAlgorithm ? "auto" : std::string(toString(options->algorithm)).c_str(),
                            options->codec.toString().c_str(), std::string(toString(options->type)).c_str(), n,
                            options->iters, options->warmup, options->check ? ", checked" : "");
                std::printf("# %12s %12s %11s %11s %11s %14s %8s\n", "size(B)", "count", "time(us)", "algbw(GB/s)",
                            "busbw(GB/s)", "wire(B)", "wrong");
            }
            int nodeCount = 0;  // for --algo auto: the nodes the ranks span (--ranks-per-node, else shared memory)
            if (!nodes.empty()) {
                nodeCount = nodes.back() + 1;
            } else {
                MPI_Comm local;
                MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
                int localRank = 0;
                MPI_Comm_rank(local, &localRank);
                MPI_Comm_free(&local);
                nodeCount = localRank == 0 ? 1 : 0;
                MPI_Allreduce(MPI_IN_PLACE, &nodeCount, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            }
            Bench bench(*options, world, nodeCount);
            const std::size_t es = sizeOf(options->type);
            const bool perRank = options->op == "allgather" || options->op == "reducescatter";
            const std::uint64_t unit = es * (perRank ? static_cast<std::uint64_t>(n) : 1);
            for (double size = double(options->minBytes); size <= double(options->maxBytes) * 1.0000001;
                 size = std::max(size * options->factor, size + 1)) {
                const std::uint64_t bytes = static_cast<std::uint64_t>(size) / unit * unit;
                Result r = bench.run(bytes);
                double seconds = r.seconds;
                std::uint64_t wrong = r.wrong, wire = r.wire;
                MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
                MPI_Allreduce(MPI_IN_PLACE, &wire, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
                if (wrong > 0)
                    result = 1;
                const double algbw = seconds > 0 ? double(bytes) / seconds / 1e9 : 0;
                const double busbw = algbw * busFactor(options->op, n);
                if (session.worldRank() != 0)
                    continue;
                if (options->json) {
                    nlohmann::ordered_json j = {{"op", options->op},
                                                {"algo", std::string(toString(options->autoAlgorithm
                                                                                  ? chooseAllreduce({options->backend, std::size_t(bytes), n, nodeCount})
                                                                                  : options->algorithm))},
                                                {"auto", options->autoAlgorithm},
                                                {"codec", options->codec.toString()},
                                                {"dtype", std::string(toString(options->type))},
                                                {"ranks", n},
                                                {"bytes", bytes},
                                                {"count", bytes / es},
                                                {"time_us", seconds * 1e6},
                                                {"time_median_us", r.median * 1e6},
                                                {"algbw_gbps", algbw},
                                                {"busbw_gbps", busbw},
                                                {"wire_bytes", wire},
                                                {"wrong", options->check ? nlohmann::ordered_json(wrong) : nlohmann::ordered_json(nullptr)}};
                    std::printf("%s\n", j.dump().c_str());
                } else {
                    std::printf("  %12" PRIu64 " %12" PRIu64 " %11.1f %11.3f %11.3f %14" PRIu64 " %8s\n", bytes, bytes / es,
                                seconds * 1e6, algbw, busbw, wire,
                                options->check ? std::to_string(wrong).c_str() : "n/a");
                }
                std::fflush(stdout);
            }
        }
        return result;
    } catch (const std::exception& e) {
        std::cerr << "loom-commbench: " << e.what() << "\n";
        MPI_Abort(MPI_COMM_WORLD, 1);
        return 1;
    }
}
