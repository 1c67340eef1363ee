#include "engine/tools/CommBenchOptions.h"

#include <charconv>
#include <cmath>

namespace loom::tools {

std::string commBenchUsage()
{
    return "usage: mpirun -np N loom-commbench [options]\n"
           "  --op allreduce|allgather|reducescatter|broadcast|sendrecv|alltoall   (default allreduce)\n"
           "  --algo library|ring|chunked|hierarchical|shm|auto           (default library)\n"
           "  --codec none|fp16|bf16|int8|int4|topk:F|lz4                  all-reduce of fp32 only (default none)\n"
           "  --dtype fp32|fp16|bf16                                      (default fp32)\n"
           "  -b, --min SIZE   -e, --max SIZE   -f, --factor F            sizes in bytes, e.g. 8, 1K, 64M (8 .. 64M, "
           "x2)\n"
           "  -n, --iters N    -w, --warmup N                             (20, 5)\n"
           "  -c, --check                                                 check every result; count wrong elements\n"
           "  --chunk SIZE                                                chunked ring: chunk size (1M)\n"
           "  --block N                                                   int8/int4: elements per scale (256)\n"
           "  --ranks-per-node N                                          treat each N consecutive ranks as a node\n"
           "  --no-agreement-check                                        skip the per-call agreement check\n"
           "  --backend mpi|gloo|nccl                                     (default mpi)\n"
           "  --reference mpi                                             also time MPI in the same run; print the "
           "ratio\n"
           "  -J, --json                                                  one JSON object per line instead of a "
           "table\n";
}

std::optional<std::uint64_t> parseSize(const std::string& text)
{
    if (text.empty())
        return std::nullopt;
    std::uint64_t multiplier = 1;
    std::string digits = text;
    switch (text.back()) {
    case 'K':
    case 'k':
        multiplier = 1ull << 10;
        digits.pop_back();
        break;
    case 'M':
    case 'm':
        multiplier = 1ull << 20;
        digits.pop_back();
        break;
    case 'G':
    case 'g':
        multiplier = 1ull << 30;
        digits.pop_back();
        break;
    default:
        break;
    }
    std::uint64_t value = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty())
        return std::nullopt;
    if (value > (1ull << 40) / multiplier)
        return std::nullopt;
    return value * multiplier;
}

namespace {
std::optional<long> parseInt(const std::string& s, long min, long max)
{
    long v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || v < min || v > max)
        return std::nullopt;
    return v;
}
} // namespace

const CollectiveDescriptor* findCollective(std::string_view name)
{
    for (const CollectiveDescriptor& c : kCollectives)
        if (c.name == name)
            return &c;
    return nullptr;
}

std::string collectiveNames(std::string_view lastSeparator)
{
    std::string text;
    const std::size_t n = std::size(kCollectives);
    for (std::size_t i = 0; i < n; ++i) {
        if (i > 0)
            text += i + 1 == n ? std::string(lastSeparator) : std::string(", ");
        text += kCollectives[i].name;
    }
    return text;
}

std::optional<CommBenchOptions> parseCommBenchOptions(
    const std::vector<std::string>& args, std::string& error, bool& help)
{
    CommBenchOptions o;
    help = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        auto value = [&](const char* what) -> std::optional<std::string> {
            if (i + 1 >= args.size()) {
                error = a + " needs " + what;
                return std::nullopt;
            }
            return args[++i];
        };
        auto bad = [&](const std::string& v, const std::string& accepted) {
            error = a + " " + v + " is not valid; use " + accepted;
            return std::nullopt;
        };
        if (a == "-h" || a == "--help") {
            help = true;
            error = commBenchUsage();
            return std::nullopt;
        } else if (a == "--op") {
            auto v = value("an operation");
            if (!v)
                return std::nullopt;
            if (!findCollective(*v))
                return bad(*v, collectiveNames());
            o.op = *v;
        } else if (a == "--algo") {
            auto v = value("an algorithm");
            if (!v)
                return std::nullopt;
            o.autoAlgorithm = *v == "auto";
            auto algo = o.autoAlgorithm ? comm::CollectiveAlgorithm::Library : comm::collectiveAlgorithmFromString(*v);
            if (!algo)
                return bad(*v, "library, ring, chunked, hierarchical, shm or auto");
            o.algorithm = *algo;
        } else if (a == "--codec") {
            auto v = value("a codec");
            if (!v)
                return std::nullopt;
            std::string why;
            auto codec = plan::Codec::parse(*v, &why);
            if (!codec)
                return bad(*v, why.substr(why.find("use ") == 0 ? 4 : 0));
            o.codec = *codec;
        } else if (a == "--dtype") {
            auto v = value("a type");
            if (!v)
                return std::nullopt;
            if (*v == "fp32")
                o.type = comm::DType::F32;
            else if (*v == "fp16")
                o.type = comm::DType::F16;
            else if (*v == "bf16")
                o.type = comm::DType::BF16;
            else
                return bad(*v, "fp32, fp16 or bf16");
        } else if (a == "-b" || a == "--min" || a == "-e" || a == "--max" || a == "--chunk") {
            auto v = value("a size such as 64M");
            if (!v)
                return std::nullopt;
            auto size = parseSize(*v);
            if (!size)
                return bad(*v, "a byte count such as 8, 4K, 64M or 1G");
            if (a == "--chunk")
                o.chunkBytes = *size;
            else if (a == "-b" || a == "--min")
                o.minBytes = *size;
            else
                o.maxBytes = *size;
        } else if (a == "-f" || a == "--factor") {
            auto v = value("a factor");
            if (!v)
                return std::nullopt;
            double f = 0;
            auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), f);
            if (ec != std::errc() || end != v->data() + v->size() || !(f > 1) || !std::isfinite(f))
                return bad(*v, "a number above 1, e.g. 2");
            o.factor = f;
        } else if (a == "-n" || a == "--iters" || a == "-w" || a == "--warmup" || a == "--block"
            || a == "--ranks-per-node") {
            auto v = value("a whole number");
            if (!v)
                return std::nullopt;
            const bool iters = a == "-n" || a == "--iters";
            auto n = parseInt(*v, iters || a == "--block" || a == "--ranks-per-node" ? 1 : 0, 1000000);
            if (!n)
                return bad(*v, iters ? "a whole number from 1" : "a whole number from 0");
            if (iters)
                o.iters = static_cast<int>(*n);
            else if (a == "--block")
                o.codecBlock = static_cast<std::size_t>(*n);
            else if (a == "--ranks-per-node")
                o.ranksPerNode = static_cast<int>(*n);
            else
                o.warmup = static_cast<int>(*n);
        } else if (a == "-c" || a == "--check") {
            o.check = true;
        } else if (a == "-J" || a == "--json") {
            o.json = true;
        } else if (a == "--no-agreement-check") {
            o.agreementCheck = false;
        } else if (a == "--backend") {
            auto v = value("mpi, gloo or nccl");
            if (!v)
                return std::nullopt;
            if (*v != "mpi" && *v != "gloo" && *v != "nccl")
                return bad(*v, "mpi, gloo or nccl");
            o.backend = *v;
        } else if (a == "--reference") {
            auto v = value("mpi");
            if (!v)
                return std::nullopt;
            if (*v != "mpi")
                return bad(*v, "mpi (the backend every other is compared with)");
            o.reference = *v;
        } else {
            error = "unknown option " + a + "\n" + commBenchUsage();
            return std::nullopt;
        }
    }
    if (!o.reference.empty() && o.backend != "gloo") {
        error = "--reference mpi compares the Gloo backend with MPI; use it with --backend gloo under mpirun";
        return std::nullopt;
    }
    if (o.minBytes > o.maxBytes) {
        error = "--min " + std::to_string(o.minBytes) + " is above --max " + std::to_string(o.maxBytes);
        return std::nullopt;
    }
    const BenchOp op = findCollective(o.op)->op; // --op was checked above
    if (o.codec.kind != plan::Codec::Kind::None && (op != BenchOp::AllReduce || o.type != comm::DType::F32)) {
        error = "--codec compresses fp32 all-reduces; use --op allreduce --dtype fp32";
        return std::nullopt;
    }
    if (o.autoAlgorithm && op != BenchOp::AllReduce) {
        error = "--algo auto chooses all-reduce algorithms; use it with --op allreduce";
        return std::nullopt;
    }
    if (o.algorithm != comm::CollectiveAlgorithm::Library && (op == BenchOp::Broadcast || op == BenchOp::SendRecv)) {
        error = "--op " + o.op + " runs with --algo library only";
        return std::nullopt;
    }
    if (op == BenchOp::AllToAll && o.algorithm == comm::CollectiveAlgorithm::ChunkedRing) {
        error = "--op alltoall runs with --algo library or ring (Loom's pairwise exchange)";
        return std::nullopt;
    }
    if (o.algorithm == comm::CollectiveAlgorithm::Hierarchical && op != BenchOp::AllReduce) {
        error = "--algo " + std::string(trace::toString(o.algorithm))
            + " is an all-reduce algorithm; use ring or chunked for " + o.op;
        return std::nullopt;
    }
    if (o.algorithm == comm::CollectiveAlgorithm::SharedMemory && op == BenchOp::AllToAll) {
        error = "--algo shm runs all-reduce, reduce-scatter and all-gather; use library or ring for alltoall";
        return std::nullopt;
    }
    return o;
}

} // namespace loom::tools
