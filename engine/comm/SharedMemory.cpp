#include "engine/comm/SharedMemory.h"

#include "engine/comm/CommError.h"
#include "engine/comm/RingAlgorithms.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace loom::comm {

namespace {

constexpr std::size_t kHeader = 64; // the token, then the slots (cache-line aligned)

// What member 0 tells the others: the segment's name and token, or ok = 0 when it could not make one.
struct Offer {
    char name[48] = {};
    std::uint64_t token = 0;
    std::uint64_t ok = 0;
};

std::size_t segmentBytes(std::size_t slotBytes, int members)
{
    return kHeader + 2 * static_cast<std::size_t>(members) * slotBytes;
}

// dst = a op b, element-wise; fp32 sums in one pass (the others through the transport's reduction).
void combine(Transport& t, void* dst, const void* a, const void* b, std::size_t count, DType type, ReduceOp op)
{
    if (type == DType::F32 && op == ReduceOp::Sum) {
        auto* __restrict d = static_cast<float*>(dst);
        const auto* x = static_cast<const float*>(a);
        const auto* y = static_cast<const float*>(b);
        for (std::size_t i = 0; i < count; ++i)
            d[i] = x[i] + y[i];
        return;
    }
    if (dst != a)
        std::memmove(dst, a, count * sizeOf(type));
    t.reduce(dst, b, count, type, op);
}

// fp32 sums: dst = dst + src, written to dst and to `copy` in the same pass.
void addAndCopy(float* dst, const float* src, float* __restrict copy, std::size_t count)
{
    for (std::size_t i = 0; i < count; ++i) {
        const float v = dst[i] + src[i];
        dst[i] = v;
        copy[i] = v;
    }
}

// Member 0: a new segment of `bytes` with its pages reserved, or null (and `why`).
char* createSegment(const std::string& name, std::size_t bytes, std::uint64_t token, std::string& why)
{
    const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
        why = "shm_open " + name + ": " + std::strerror(errno);
        return nullptr;
    }
    void* base = MAP_FAILED;
    if (ftruncate(fd, static_cast<off_t>(bytes)) != 0)
        why = "ftruncate: " + std::string(std::strerror(errno));
    else if (int rc = posix_fallocate(fd, 0, static_cast<off_t>(bytes)); rc != 0)
        why = "reserving " + std::to_string(bytes >> 20) + " MiB in /dev/shm: " + std::strerror(rc);
    else
        base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    close(fd);
    if (base == MAP_FAILED) {
        if (why.empty())
            why = "mmap: " + std::string(std::strerror(errno));
        shm_unlink(name.c_str());
        return nullptr;
    }
    std::memcpy(base, &token, sizeof token);
    return static_cast<char*>(base);
}

// Other members: the segment member 0 made, if this machine has it and it carries the token.
char* openSegment(const Offer& offer, std::size_t bytes, std::string& why)
{
    const int fd = shm_open(offer.name, O_RDWR, 0);
    if (fd < 0) {
        why = "shm_open " + std::string(offer.name) + ": " + std::strerror(errno)
            + " (is this rank on member 0's machine?)";
        return nullptr;
    }
    struct stat st { };
    void* base = MAP_FAILED;
    if (fstat(fd, &st) == 0 && static_cast<std::size_t>(st.st_size) == bytes)
        base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    close(fd);
    if (base == MAP_FAILED) {
        why = "the segment " + std::string(offer.name) + " has another size";
        return nullptr;
    }
    std::uint64_t token = 0;
    std::memcpy(&token, base, sizeof token);
    if (token != offer.token) {
        munmap(base, bytes);
        why = "the segment " + std::string(offer.name) + " is another machine's";
        return nullptr;
    }
    return static_cast<char*>(base);
}

} // namespace

SharedArena::SharedArena(char* base, std::size_t bytes, std::size_t slotBytes, int members)
    : m_base(base)
    , m_bytes(bytes)
    , m_slotBytes(slotBytes)
    , m_members(members)
{
}

SharedArena::~SharedArena()
{
    if (m_base)
        munmap(m_base, m_bytes);
}

char* SharedArena::slot(int bank, int member) const
{
    return m_base + kHeader + (static_cast<std::size_t>(bank) * m_members + member) * m_slotBytes;
}

void SharedArena::barrier(Transport& t)
{
    // Every member sends one byte to every other and waits for one from each. (Counters in the segment
    // with a futex wait were tried on 2026-11-30 and made no measurable difference to a dp 2 step here.)
    const int n = t.size(), me = t.rank();
    std::vector<char> in(static_cast<std::size_t>(n)), out(static_cast<std::size_t>(n), 1);
    for (int peer = 0; peer < n; ++peer)
        if (peer != me) {
            t.irecv(&in[static_cast<std::size_t>(peer)], 1, peer);
            t.isend(&out[static_cast<std::size_t>(peer)], 1, peer);
        }
    t.waitAll();
}

namespace {

// Member 0 makes the segment and tells the others its name and token; the others map it. `base` is set as
// soon as the mapping exists, so that a caller whose transport then fails can still unmap it.
void makeOrOpen(Transport& t, Offer& offer, std::size_t bytes, char*& base, std::string& why)
{
    const int n = t.size();
    if (t.rank() != 0) {
        t.irecv(&offer, sizeof offer, 0);
        t.waitAll();
        if (offer.ok)
            base = openSegment(offer, bytes, why);
        else
            why = "member 0 could not make the segment";
        return;
    }
    std::random_device device;
    offer.token = (std::uint64_t(device()) << 32) ^ device() ^ 1;
    const std::string name = "/loom-" + std::to_string(getpid()) + "-" + std::to_string(offer.token % 1000000007);
    std::snprintf(offer.name, sizeof offer.name, "%s", name.c_str());
    base = createSegment(name, bytes, offer.token, why);
    offer.ok = base ? 1 : 0;
    for (int peer = 1; peer < n; ++peer)
        t.isend(&offer, sizeof offer, peer);
    t.waitAll();
}

// Member 0 learns whether everyone mapped the segment, removes the name, and tells everyone the outcome.
bool everyoneMapped(Transport& t, const Offer& offer, bool mapped)
{
    const int n = t.size();
    char all = mapped ? 1 : 0;
    if (t.rank() == 0) {
        std::vector<char> replies(static_cast<std::size_t>(n), 1);
        for (int peer = 1; peer < n; ++peer)
            t.irecv(&replies[static_cast<std::size_t>(peer)], 1, peer);
        t.waitAll();
        if (offer.ok)
            shm_unlink(offer.name);
        for (char r : replies)
            all = static_cast<char>(all && r);
        for (int peer = 1; peer < n; ++peer)
            t.isend(&all, 1, peer);
        t.waitAll();
    } else {
        const char mine = all;
        t.isend(&mine, 1, 0);
        t.irecv(&all, 1, 0);
        t.waitAll();
    }
    return all != 0;
}

} // namespace

namespace {

// Collective over `t`: a segment of `bytes` (header included) that every member maps, or null (and `why`).
char* mapSegment(Transport& t, std::size_t bytes, std::string& why)
{
    Offer offer;
    char* base = nullptr;
    bool all = false;
    try {
        makeOrOpen(t, offer, bytes, base, why);
        all = everyoneMapped(t, offer, base != nullptr);
    } catch (...) {
        // A member that died or went silent before the name was removed: neither the name nor the mapping
        // may outlive this call (the transport's error names the member).
        if (t.rank() == 0 && offer.ok)
            shm_unlink(offer.name);
        if (base)
            munmap(base, bytes);
        throw;
    }
    if (!all) {
        if (base)
            munmap(base, bytes);
        if (why.empty())
            why = "another member could not map the segment";
        return nullptr;
    }
    return base;
}

} // namespace

std::unique_ptr<SharedArena> SharedArena::create(Transport& t, std::size_t slotBytes, std::string& why)
{
    slotBytes = std::max<std::size_t>(64, slotBytes / 64 * 64);
    const std::size_t bytes = segmentBytes(slotBytes, t.size());
    char* base = mapSegment(t, bytes, why);
    return base ? std::unique_ptr<SharedArena>(new SharedArena(base, bytes, slotBytes, t.size())) : nullptr;
}

std::shared_ptr<void> mapSharedMemory(Transport& t, std::size_t bytes, std::string& why)
{
    const std::size_t total = kHeader + std::max<std::size_t>(bytes, 1);
    char* base = mapSegment(t, total, why);
    if (!base)
        return nullptr;
    std::shared_ptr<char> mapping(base, [total](char* p) { munmap(p, total); });
    return std::shared_ptr<void>(mapping, base + kHeader); // past the token, 64-byte aligned
}

void sharedMemoryAllReduce(SharedArena& arena, Transport& t, void* data, std::size_t count, DType type, ReduceOp op)
{
    const int n = t.size(), me = t.rank();
    const std::size_t es = sizeOf(type), perPiece = arena.slotBytes() / es;
    char* buffer = static_cast<char*>(data);
    const bool fused = type == DType::F32 && op == ReduceOp::Sum;
    for (std::size_t off = 0; off < count; off += perPiece) {
        const std::size_t len = std::min(perPiece, count - off);
        const int bank = arena.nextBank();
        const Segments seg = Segments::even(len, n);
        auto at = [&](int j) { return seg.offset[static_cast<std::size_t>(j)] * es; };
        auto bytes = [&](int j) { return seg.length[static_cast<std::size_t>(j)] * es; };
        char* piece = buffer + off * es;
        // The others' sub-ranges of this piece go where their owners read them; this rank's own stays in
        // its buffer, which its reduction reads directly.
        for (int j = 0; j < n; ++j)
            if (j != me)
                std::memcpy(arena.slot(bank, me) + at(j), piece + at(j), bytes(j));
        arena.barrier(t);
        // Sub-range `me`: this rank's values plus every other member's, in rank order; the sum goes into
        // this rank's buffer and its slot, where the others copy it from.
        const std::size_t mine = at(me), own = seg.length[static_cast<std::size_t>(me)];
        const int last = me == n - 1 ? n - 2 : n - 1; // the last member added
        for (int j = 0; j < n; ++j) {
            if (j == me)
                continue;
            if (fused && j == last)
                addAndCopy(reinterpret_cast<float*>(piece + mine),
                    reinterpret_cast<const float*>(arena.slot(bank, j) + mine),
                    reinterpret_cast<float*>(arena.slot(bank, me) + mine), own);
            else
                t.reduce(piece + mine, arena.slot(bank, j) + mine, own, type, op);
        }
        if (!fused)
            std::memcpy(arena.slot(bank, me) + mine, piece + mine, bytes(me));
        arena.barrier(t);
        for (int j = 0; j < n; ++j)
            if (j != me)
                std::memcpy(piece + at(j), arena.slot(bank, j) + at(j), bytes(j));
    }
}

// One barrier per piece is enough here: a member writes a bank again only two pieces (of this call or the
// next, whatever its kind) later, after a barrier that every member reaches only once it has read that
// bank's copies.
void sharedMemoryReduceScatter(
    SharedArena& arena, Transport& t, const void* send, void* recv, std::size_t count, DType type, ReduceOp op)
{
    const int n = t.size(), me = t.rank();
    const std::size_t es = sizeOf(type), perPiece = std::max<std::size_t>(1, arena.slotBytes() / es / n);
    const char* in = static_cast<const char*>(send);
    char* out = static_cast<char*>(recv);
    auto block = [&](int j, std::size_t off) { return in + (static_cast<std::size_t>(j) * count + off) * es; };
    for (std::size_t off = 0; off < count; off += perPiece) {
        const std::size_t len = std::min(perPiece, count - off), bytes = len * es;
        const int bank = arena.nextBank();
        // Part j of this rank's slot: its piece of block j, for member j to add.
        auto part = [&](int member, int j) { return arena.slot(bank, member) + static_cast<std::size_t>(j) * bytes; };
        for (int j = 0; j < n; ++j)
            if (j != me)
                std::memcpy(part(me, j), block(j, off), bytes);
        arena.barrier(t);
        // Its own block first, then the others in rank order (the all-reduce's order).
        char* sum = out + off * es;
        const int first = me == 0 ? 1 : 0;
        combine(t, sum, block(me, off), part(first, me), len, type, op);
        for (int j = first + 1; j < n; ++j)
            if (j != me)
                t.reduce(sum, part(j, me), len, type, op);
    }
}

void sharedMemoryAllGather(
    SharedArena& arena, Transport& t, const void* send, void* recv, std::size_t count, DType type)
{
    const int n = t.size(), me = t.rank();
    const std::size_t es = sizeOf(type), perPiece = std::max<std::size_t>(1, arena.slotBytes() / es);
    const char* in = static_cast<const char*>(send);
    char* out = static_cast<char*>(recv);
    if (count > 0 && in != out + static_cast<std::size_t>(me) * count * es)
        std::memmove(out + static_cast<std::size_t>(me) * count * es, in, count * es);
    for (std::size_t off = 0; off < count; off += perPiece) {
        const std::size_t len = std::min(perPiece, count - off), bytes = len * es;
        const int bank = arena.nextBank();
        std::memcpy(arena.slot(bank, me), in + off * es, bytes);
        arena.barrier(t);
        for (int j = 0; j < n; ++j)
            if (j != me)
                std::memcpy(out + (static_cast<std::size_t>(j) * count + off) * es, arena.slot(bank, j), bytes);
    }
}

} // namespace loom::comm
