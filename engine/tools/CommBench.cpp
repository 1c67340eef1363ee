// loom-commbench: bandwidth of Loom's communicators, in the manner of nccl-tests. Run under mpirun (or,
// with --backend gloo, any process starter that sets LOOM_RANK, LOOM_WORLD_SIZE and LOOM_RENDEZVOUS).
#include "engine/comm/AlgorithmTuner.h"
#include "engine/comm/Backends.h"
#include "engine/comm/GradientCodec.h"
#include "engine/tools/CommBenchOptions.h"
#include "engine/trace/PlainWhat.h"
#if LOOM_WITH_NCCL
#include <cuda_runtime_api.h>
#endif

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
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
    double seconds = 0; // mean
    double median = 0;
    std::uint64_t wrong = 0;
    std::uint64_t wire = 0;
};

class Bench {
public:
    // `c` runs the operations; `control` (a host communicator of the same ranks) lines them up and
    // collects the slowest rank's time.
    // `nodes`: the nodes the ranks span, for --algo auto.
    Bench(const tools::CommBenchOptions& o, Communicator& c, Communicator& control, int nodes = 1)
        : m_o(o)
        , m_d(*tools::findCollective(o.op)) // parseCommBenchOptions refused any other --op
        , m_c(c)
        , m_control(control)
        , m_n(c.size())
        , m_r(c.rank())
        , m_nodes(nodes)
    {
    }

    // `bytes` is nccl-tests' size: the buffer (all-reduce, broadcast, send/recv) or the whole gathered
    // array (all-gather, reduce-scatter).
    Result run(std::uint64_t bytes)
    {
        const std::size_t es = sizeOf(m_o.type);
        const std::size_t total = bytes / es;
        const std::size_t count = m_d.perRank ? total / static_cast<std::size_t>(m_n) : total;
        const bool fractional = m_o.codec.lossy();
        // Buffers as the descriptor sizes them (all-to-all: block j of every rank's input goes to rank j).
        const auto blocks = [this](int b) { return b == 0 ? static_cast<std::size_t>(m_n) : std::size_t(b); };
        std::vector<std::uint8_t> pristine, input, output;
        const std::size_t inputCount = count * blocks(m_d.inputBlocks);
        pristine.resize(inputCount * es);
        fill(pristine, inputCount, m_o.type, m_r, 0, fractional);
        if (m_d.outputBlocks >= 0)
            output.resize(count * blocks(m_d.outputBlocks) * es);
        const auto expected = expectation(count, fractional);

        CollectiveOptions options;
        options.algorithm = m_o.algorithm;
        if (m_o.autoAlgorithm) // resolved here, as the trainer does: the communicator sees a concrete algorithm
            options.algorithm = chooseAllreduce({ m_o.backend, std::size_t(bytes), m_n, m_nodes });
        options.chunkBytes = m_o.chunkBytes;
        options.codec = m_o.codec;
        options.codecBlock = m_o.codecBlock;

        Result result;
        std::vector<double> times;
        for (int it = -m_o.warmup; it < m_o.iters; ++it) {
            input = pristine;
            std::fill(output.begin(), output.end(), 0);
            Staging staging(m_c.onDevice(), input, output);
            m_control.barrier()->wait();
            const auto t0 = std::chrono::steady_clock::now();
            WorkStats stats = launch(staging, count, options);
            const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            staging.copyBack(input, output);
            if (it < 0)
                continue;
            double slowest = elapsed; // the slowest rank's time for this iteration
            m_control.allReduce(&slowest, 1, DType::F64, ReduceOp::Max)->wait();
            times.push_back(slowest);
            result.seconds += elapsed;
            result.wire = stats.wireBytes;
            if (m_o.check)
                result.wrong = std::max(result.wrong, countWrong(m_d.outputBlocks >= 0 ? output : input, expected));
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
            : m_device(device)
            , m_inBytes(std::max<std::size_t>(in.size(), out.size()))
            , m_outBytes(out.size())
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
        void* in()
        {
            return m_in;
        }
        void* out()
        {
            return m_out;
        }

    private:
        bool m_device;
        std::size_t m_inBytes, m_outBytes;
        void* m_in = nullptr;
        void* m_out = nullptr;
    };

    WorkStats launch(Staging& b, std::size_t count, const CollectiveOptions& options)
    {
        WorkPtr w;
        switch (m_d.op) {
        case tools::BenchOp::AllReduce:
            w = m_c.allReduce(b.in(), count, m_o.type, ReduceOp::Sum, options);
            break;
        case tools::BenchOp::AllGather:
            w = m_c.allGather(b.in(), b.out(), count, m_o.type, options);
            break;
        case tools::BenchOp::ReduceScatter:
            w = m_c.reduceScatter(b.in(), b.out(), count, m_o.type, ReduceOp::Sum, options);
            break;
        case tools::BenchOp::Broadcast:
            w = m_c.broadcast(b.in(), count, m_o.type, 0);
            break;
        case tools::BenchOp::AllToAll:
            w = m_c.allToAll(b.in(), b.out(), count, m_o.type, options);
            break;
        case tools::BenchOp::SendRecv:
            break;
        }
        if (w) {
            w->wait();
            return w->stats();
        }
        // sendrecv: every rank sends to the next and receives from the previous, at once.
        w = m_c.sendRecv(b.in(), (m_r + 1) % m_n, b.out(), (m_r + m_n - 1) % m_n, count, m_o.type);
        w->wait();
        WorkStats st = w->stats();
        st.bytes /= 2; // count what was sent, as nccl-tests does
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
        if (m_d.op == tools::BenchOp::AllGather) {
            for (int p = 0; p < m_n; ++p)
                for (std::size_t i = 0; i < count; ++i)
                    e.value.push_back(inputValue(p, i, false));
            e.tolerance.assign(e.value.size(), 0);
            return e;
        }
        if (m_d.op == tools::BenchOp::AllToAll) { // block p comes from rank p: its block for this rank
            for (int p = 0; p < m_n; ++p)
                for (std::size_t i = 0; i < count; ++i)
                    e.value.push_back(inputValue(p, count * static_cast<std::size_t>(m_r) + i, false));
            e.tolerance.assign(e.value.size(), 0);
            return e;
        }
        if (m_d.op == tools::BenchOp::Broadcast || m_d.op == tools::BenchOp::SendRecv) {
            const int source = m_d.op == tools::BenchOp::Broadcast ? 0 : (m_r + m_n - 1) % m_n;
            for (std::size_t i = 0; i < count; ++i)
                e.value.push_back(inputValue(source, i, false));
            e.tolerance.assign(e.value.size(), 0);
            return e;
        }
        const std::size_t offset = m_d.op == tools::BenchOp::ReduceScatter ? count * static_cast<std::size_t>(m_r) : 0;
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
                rankAbsMax[static_cast<std::size_t>(p)]
                    = std::max(rankAbsMax[static_cast<std::size_t>(p)], std::fabs(v));
            }
        for (float v : e.value)
            sumAbsMax = std::max(sumAbsMax, std::fabs(v));
        if (codec && codec->lossy() && m_n > 1) {
            // Two-phase: every input compressed once, the sum compressed once.
            for (std::size_t i = 0; i < count; ++i) {
                double bound = codec->errorBound(e.value[i], sumAbsMax);
                for (int p = 0; p < m_n; ++p)
                    bound += codec->errorBound(
                        inputValue(p, offset + i, fractional), rankAbsMax[static_cast<std::size_t>(p)]);
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
    const tools::CollectiveDescriptor& m_d;
    Communicator& m_c;
    Communicator& m_control;
    int m_n, m_r;
    int m_nodes;
};

// One size's figures over every rank (collective over `control`).
struct Measured {
    double seconds = 0; // the slowest rank's mean
    double median = 0;
    std::uint64_t wrong = 0, wire = 0;
};

Measured measure(Bench& bench, Communicator& control, std::uint64_t bytes)
{
    const Result r = bench.run(bytes);
    Measured m { r.seconds, r.median, 0, 0 };
    std::int64_t counts[2] = { static_cast<std::int64_t>(r.wrong), static_cast<std::int64_t>(r.wire) };
    control.allReduce(&m.seconds, 1, DType::F64, ReduceOp::Max)->wait();
    control.allReduce(counts, 2, DType::I64, ReduceOp::Max)->wait();
    m.wrong = static_cast<std::uint64_t>(counts[0]);
    m.wire = static_cast<std::uint64_t>(counts[1]);
    return m;
}

plan::CommBackend backendOf(const std::string& name)
{
    return name == "gloo" ? plan::CommBackend::Gloo : name == "nccl" ? plan::CommBackend::Nccl : plan::CommBackend::Mpi;
}

int run(const tools::CommBenchOptions& o, comm::CommRuntime& runtime, comm::CommRuntime* reference)
{
    std::vector<int> nodes;
    if (o.ranksPerNode > 0)
        for (int r = 0; r < runtime.size(); ++r)
            nodes.push_back(r / o.ranksPerNode);
    // --algo auto: the nodes the ranks span (--ranks-per-node; without it, one machine).
    const int nodeCount = nodes.empty() ? 1 : nodes.back() + 1;
    auto communicator = runtime.makeWorld("bench", nullptr, nodes, true);
    auto control = runtime.makeWorld("control", nullptr, {}, false);
    std::unique_ptr<Communicator> mpiWorld;
    if (reference)
        mpiWorld = reference->makeWorld("bench", nullptr, nodes, false);
    Communicator& world = *communicator;
    const int n = world.size();
    const bool root = runtime.rank() == 0;
    if (root && !o.json) {
        std::printf(
            "# loom-commbench: op %s, algo %s, codec %s, dtype %s, backend %s, %d ranks, iters %d, warmup %d%s\n",
            o.op.c_str(), o.autoAlgorithm ? "auto" : std::string(toString(o.algorithm)).c_str(),
            o.codec.toString().c_str(), std::string(toString(o.type)).c_str(), o.backend.c_str(), n, o.iters, o.warmup,
            o.check ? ", checked" : "");
        std::printf("# %12s %12s %11s %11s %11s %14s %8s%s\n", "size(B)", "count", "time(us)", "algbw(GB/s)",
            "busbw(GB/s)", "wire(B)", "wrong", reference ? "  mpi-busbw(GB/s) ratio" : "");
    }
    Bench bench(o, world, *control, nodeCount);
    std::optional<Bench> mpiBench;
    if (mpiWorld)
        mpiBench.emplace(o, *mpiWorld, *control, nodeCount);
    const std::size_t es = sizeOf(o.type);
    const tools::CollectiveDescriptor& op = *tools::findCollective(o.op);
    const std::uint64_t unit = es * (op.perRank ? static_cast<std::uint64_t>(n) : 1);
    int result = 0;
    for (double size = double(o.minBytes); size <= double(o.maxBytes) * 1.0000001;
         size = std::max(size * o.factor, size + 1)) {
        const std::uint64_t bytes = static_cast<std::uint64_t>(size) / unit * unit;
        const Measured m = measure(bench, *control, bytes);
        std::optional<Measured> ref;
        if (mpiBench)
            ref = measure(*mpiBench, *control, bytes);
        if (m.wrong > 0 || (ref && ref->wrong > 0))
            result = 1;
        const double busFactor = trace::busBandwidthFactor(op.busKind, n);
        const double algbw = m.seconds > 0 ? double(bytes) / m.seconds / 1e9 : 0;
        const double busbw = algbw * busFactor;
        const double refBusbw = ref && ref->seconds > 0 ? double(bytes) / ref->seconds / 1e9 * busFactor : 0;
        if (!root)
            continue;
        if (o.json) {
            nlohmann::ordered_json j = { { "op", o.op },
                { "algo",
                    std::string(
                        toString(o.autoAlgorithm ? chooseAllreduce({ o.backend, std::size_t(bytes), n, nodeCount })
                                                 : o.algorithm)) },
                { "auto", o.autoAlgorithm }, { "codec", o.codec.toString() },
                { "dtype", std::string(toString(o.type)) }, { "backend", o.backend }, { "ranks", n },
                { "bytes", bytes }, { "count", bytes / es }, { "time_us", m.seconds * 1e6 },
                { "time_median_us", m.median * 1e6 }, { "algbw_gbps", algbw }, { "busbw_gbps", busbw },
                { "wire_bytes", m.wire },
                { "wrong", o.check ? nlohmann::ordered_json(m.wrong) : nlohmann::ordered_json(nullptr) } };
            if (ref) {
                j["mpi_busbw_gbps"] = refBusbw;
                j["mpi_wrong"] = o.check ? nlohmann::ordered_json(ref->wrong) : nlohmann::ordered_json(nullptr);
            }
            std::printf("%s\n", j.dump().c_str());
        } else {
            std::printf("  %12" PRIu64 " %12" PRIu64 " %11.1f %11.3f %11.3f %14" PRIu64 " %8s", bytes, bytes / es,
                m.seconds * 1e6, algbw, busbw, m.wire, o.check ? std::to_string(m.wrong).c_str() : "n/a");
            if (ref)
                std::printf("  %15.3f %5.2f", refBusbw, refBusbw > 0 ? busbw / refBusbw : 0.0);
            std::printf("\n");
        }
        std::fflush(stdout);
    }
    control->barrier()->wait();
    return result;
}

} // namespace

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
    std::optional<comm::CommRuntime> runtime, reference;
    comm::ProcessStart start;
    try {
        start = comm::processStartFromEnvironment();
        CommConfig config = CommConfig::fromEnvironment();
        config.checkAgreement = options->agreementCheck;
        if (!options->reference.empty())
            reference.emplace(plan::CommBackend::Mpi, start, &argc, &argv, ".", config);
        runtime.emplace(backendOf(options->backend), start, &argc, &argv, ".", config);
    } catch (const std::exception& e) {
        std::cerr << "loom-commbench: rank " << start.rank << ": " << loom::plainWhat(e) << "\n";
        return 1;
    }
    try {
        return run(*options, *runtime, reference ? &*reference : nullptr);
    } catch (const std::exception& e) {
        std::cerr << "loom-commbench: " << loom::plainWhat(e) << "\n";
        runtime->abortJob(1);
    }
}
