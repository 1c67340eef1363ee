#pragma once

#include "engine/comm/Transport.h"

#include <cstddef>
#include <vector>

namespace loom::comm {

// Loom's ring collectives on point-to-point (Patarasuk & Yuan 2009; what NCCL's ring does on one channel).
//
// A buffer of `count` elements is cut into size() segments whose lengths differ by at most one (some are
// empty when count < size()). Reduce-scatter takes size()-1 steps: at step s rank r sends segment
// (r-s-1) mod n to rank r+1 and receives segment (r-s-2) mod n from rank r-1, adding it to its own, so
// rank r ends with segment r fully reduced. All-gather then takes size()-1 steps forwarding finished
// segments around the ring. Each rank sends 2(n-1)/n of the buffer in all.
//
// `chunkBytes` > 0 cuts every step's segment into chunks: all chunk transfers of a step are posted at once
// and each chunk is reduced as soon as it arrives, so transfer and reduction overlap (chunked ring).
// 0 moves each segment as one message and reduces it after it has fully arrived (plain ring).
struct Segments {
    std::vector<std::size_t> offset; // in elements
    std::vector<std::size_t> length;
    static Segments even(std::size_t count, int parts);
};

// In place: every rank ends with the reduction over all ranks.
void ringAllReduce(Transport& t, void* data, std::size_t count, DType type, ReduceOp op, std::size_t chunkBytes);
// `data` holds every segment; rank r ends with segment r of `segments` reduced (others are clobbered).
void ringReduceScatterInPlace(
    Transport& t, void* data, const Segments& segments, DType type, ReduceOp op, std::size_t chunkBytes);
// `data` holds segment r on rank r; every rank ends with every segment.
void ringAllGatherInPlace(Transport& t, void* data, const Segments& segments, DType type, std::size_t chunkBytes);

// Two-level all-reduce: reduce-scatter among the ranks of a node (`local`, k ranks), all-reduce of this
// rank's segment among the ranks with the same local index on every node (`cross`, N ranks, ring),
// all-gather among the ranks of the node. Across nodes each rank sends 2(N-1)/N · count/k elements.
void hierarchicalAllReduce(
    Transport& local, Transport& cross, void* data, std::size_t count, DType type, ReduceOp op, std::size_t chunkBytes);

} // namespace loom::comm
