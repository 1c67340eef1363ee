#pragma once

#include "engine/comm/DType.h"
#include "engine/comm/Transport.h"

#include <cstddef>
#include <memory>
#include <string>

namespace loom::comm {

// A POSIX shared-memory segment mapped by every member of a group on one machine: the all-reduce,
// reduce-scatter and all-gather of the host backends' "shm" algorithm run through it at memory-copy speed
// instead of through the library's point-to-point protocol.
//
// The segment holds two banks (used in turn) of one slot per member. Member 0 creates it under a random
// name, reserves its pages (so a full /dev/shm is an error here, not a SIGBUS later) and writes a random
// token; the others map it by that name and check the token; then member 0 removes the name, so nothing is
// left in /dev/shm even when a rank dies. Members that are not on member 0's machine do not find the
// name (or find another segment without the token): create() then returns null on every member and the
// caller uses another algorithm. Every step is agreed over `t`, so all members reach the same answer.
class SharedArena {
public:
    ~SharedArena();
    SharedArena(const SharedArena&) = delete;
    SharedArena& operator=(const SharedArena&) = delete;

    // Collective over `t` (host memory): the arena with slots of `slotBytes`, or null (and, in `why`, the
    // reason) when some member could not map it.
    static std::unique_ptr<SharedArena> create(Transport& t, std::size_t slotBytes, std::string& why);

    std::size_t slotBytes() const { return m_slotBytes; }
    char* slot(int bank, int member) const;
    // The bank the next piece uses: they alternate over every piece of every call, the same on all members.
    int nextBank() { return m_bank ^= 1; }
    // Every member of `t` arrives before any leaves (one byte to and from each member over `t`); the
    // slots written before it are visible after it.
    static void barrier(Transport& t);

private:
    SharedArena(char* base, std::size_t bytes, std::size_t slotBytes, int members);
    char* m_base = nullptr;
    std::size_t m_bytes = 0, m_slotBytes = 0;
    int m_members = 0;
    int m_bank = 1;
};

// Collective over `t` (host memory, members on one machine): `bytes` of memory that every member maps,
// made the way the arena is (member 0 makes and names the segment, the others map it and check its token,
// then the name is removed). Zero-filled, 64-byte aligned; it stays mapped while any copy of the pointer
// lives. Null on every member, with the reason in `why`, when some member could not map it.
std::shared_ptr<void> mapSharedMemory(Transport& t, std::size_t bytes, std::string& why);

// In place over the arena's members (the ranks of `t`, all on one machine). The buffer goes through in
// pieces of one slot, each cut into one sub-range per member. Every member copies the sub-ranges it does
// not own into its slot of the current bank; after a barrier, member r adds the others' copies of
// sub-range r to its own buffer (the others in rank order) and puts the sum in its slot (in the
// same pass as the last addition for fp32 sums); after a second barrier every member copies the others'
// sums into its buffer. The banks alternate, so a piece's copies never race the next piece's. Each member
// moves about two buffers' worth of bytes through memory per buffer reduced, with no message larger than
// the barriers' single bytes.
void sharedMemoryAllReduce(SharedArena& arena, Transport& t, void* data, std::size_t count, DType type, ReduceOp op);

// Member r receives the sum of block r of every member's `send` (n blocks of `count`), added in the same
// order as the all-reduce adds (its own block, then the others in rank order). Per piece:
// every member copies the blocks it does not own into its slot, a barrier, then member r adds the others'
// copies of block r to its own and writes the sum to `recv`. `recv` may be the member's own block of
// `send`. Half of the all-reduce's traffic, with one barrier per piece.
void sharedMemoryReduceScatter(
    SharedArena& arena, Transport& t, const void* send, void* recv, std::size_t count, DType type, ReduceOp op);

// Block j of every member's `recv` (n blocks of `count`) becomes member j's `send`: per piece, each member
// copies its block into its slot, a barrier, then copies the others' blocks from their slots. `send` may be
// the member's own block of `recv`.
void sharedMemoryAllGather(
    SharedArena& arena, Transport& t, const void* send, void* recv, std::size_t count, DType type);

} // namespace loom::comm
