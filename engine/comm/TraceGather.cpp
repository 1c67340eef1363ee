#include "engine/comm/TraceGather.h"

#include <algorithm>
#include <cstring>

namespace loom::comm {

ClockAlignment alignClock(MPI_Comm comm, int rounds)
{
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    std::vector<std::int64_t> offsets(static_cast<std::size_t>(size), 0), errors(static_cast<std::size_t>(size), 0);
    if (rank == 0) {
        for (int r = 1; r < size; ++r) {
            std::int64_t bestRtt = INT64_MAX, bestOffset = 0;
            for (int i = 0; i < rounds; ++i) {
                const std::int64_t t0 = trace::nowNs();
                MPI_Send(&t0, 1, MPI_INT64_T, r, 901, comm);
                std::int64_t theirs = 0;
                MPI_Recv(&theirs, 1, MPI_INT64_T, r, 902, comm, MPI_STATUS_IGNORE);
                const std::int64_t t1 = trace::nowNs();
                if (t1 - t0 < bestRtt) {
                    bestRtt = t1 - t0;
                    bestOffset = theirs - (t0 + t1) / 2;
                }
            }
            offsets[static_cast<std::size_t>(r)] = bestOffset;
            errors[static_cast<std::size_t>(r)] = bestRtt / 2;
        }
    } else {
        for (int i = 0; i < rounds; ++i) {
            std::int64_t ping = 0;
            MPI_Recv(&ping, 1, MPI_INT64_T, 0, 901, comm, MPI_STATUS_IGNORE);
            const std::int64_t now = trace::nowNs();
            MPI_Send(&now, 1, MPI_INT64_T, 0, 902, comm);
        }
    }
    ClockAlignment mine;
    MPI_Scatter(offsets.data(), 1, MPI_INT64_T, &mine.offsetNs, 1, MPI_INT64_T, 0, comm);
    MPI_Scatter(errors.data(), 1, MPI_INT64_T, &mine.errorNs, 1, MPI_INT64_T, 0, comm);
    return mine;
}

namespace {

// A fixed-size form of TraceEvent for MPI.
struct Packed {
    std::int32_t rank, step, microBatch, stage, chunk, group, groupSize, peer;
    std::int64_t startNs, endNs;
    std::uint64_t bytes, wireBytes;
    std::uint8_t lane, kind, source, algorithm;
    char codec[28];
};

Packed pack(const trace::TraceEvent& e, std::int64_t offset)
{
    Packed p{};
    p.rank = e.rank;
    p.step = e.step;
    p.microBatch = e.microBatch;
    p.stage = e.stage;
    p.chunk = e.chunk;
    p.group = e.group;
    p.groupSize = e.groupSize;
    p.peer = e.peer;
    p.startNs = e.startNs - offset;
    p.endNs = e.endNs - offset;
    p.bytes = e.bytes;
    p.wireBytes = e.wireBytes;
    p.lane = static_cast<std::uint8_t>(e.lane);
    p.kind = static_cast<std::uint8_t>(e.kind);
    p.source = static_cast<std::uint8_t>(e.source);
    p.algorithm = static_cast<std::uint8_t>(e.algorithm);
    std::strncpy(p.codec, e.codec.c_str(), sizeof p.codec - 1);
    return p;
}

trace::TraceEvent unpack(const Packed& p)
{
    trace::TraceEvent e;
    e.rank = p.rank;
    e.step = p.step;
    e.microBatch = p.microBatch;
    e.stage = p.stage;
    e.chunk = p.chunk;
    e.group = p.group;
    e.groupSize = p.groupSize;
    e.peer = p.peer;
    e.startNs = p.startNs;
    e.endNs = p.endNs;
    e.bytes = p.bytes;
    e.wireBytes = p.wireBytes;
    e.lane = static_cast<trace::Lane>(p.lane);
    e.kind = static_cast<trace::EventKind>(p.kind);
    e.source = static_cast<trace::EventSource>(p.source);
    e.algorithm = static_cast<trace::Algorithm>(p.algorithm);
    e.codec = std::string(p.codec, strnlen(p.codec, sizeof p.codec));
    return e;
}

}  // namespace

std::vector<trace::TraceEvent> gatherEvents(MPI_Comm comm, const std::vector<trace::TraceEvent>& mine, std::int64_t offsetNs)
{
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    std::vector<Packed> packed;
    packed.reserve(mine.size());
    for (const auto& e : mine)
        packed.push_back(pack(e, offsetNs));
    const int bytes = static_cast<int>(packed.size() * sizeof(Packed));
    std::vector<int> counts(static_cast<std::size_t>(size)), displs(static_cast<std::size_t>(size));
    MPI_Gather(&bytes, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm);
    std::vector<char> all;
    if (rank == 0) {
        int total = 0;
        for (int r = 0; r < size; ++r) {
            displs[static_cast<std::size_t>(r)] = total;
            total += counts[static_cast<std::size_t>(r)];
        }
        all.resize(static_cast<std::size_t>(total));
    }
    MPI_Gatherv(packed.data(), bytes, MPI_BYTE, all.data(), counts.data(), displs.data(), MPI_BYTE, 0, comm);
    std::vector<trace::TraceEvent> out;
    for (std::size_t at = 0; at + sizeof(Packed) <= all.size(); at += sizeof(Packed)) {
        Packed p;
        std::memcpy(&p, all.data() + at, sizeof p);
        out.push_back(unpack(p));
    }
    return out;
}

}  // namespace loom::comm
