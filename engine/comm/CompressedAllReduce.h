#pragma once

#include "engine/comm/Communicator.h"
#include "engine/comm/GradientCodec.h"
#include "engine/comm/Transport.h"

namespace loom::comm {

// A sum all-reduce of fp32 data whose wire traffic is compressed, on host memory.
//
// Dense codecs (fp16, bf16, int8, int4, lz4) run in two phases, as DeepSpeed's compressed all-reduce:
// (1) each rank cuts its tensor into size() segments, compresses each, and sends segment j to rank j,
//     which decompresses the size() contributions and sums them in rank order;
// (2) each rank compresses its reduced segment and sends it to every rank, which decompresses it.
// A value is compressed twice whatever the rank count (a ring would recompress partial sums n-1 times),
// and each rank sends about 2(n-1)/n of the compressed tensor, like a ring.
//
// Top-k runs as a sparse all-gather (Deep Gradient Compression): each rank sends its k largest (index,
// value) pairs to every rank, and each sums all of them in rank order.
//
// Every rank ends with bit-identical results. With `feedback`, the input residual (and, for the two-phase
// scheme, the residual of the segment this rank reduced) is added back before compressing and replaced by
// what compression lost this time.
trace::Algorithm compressedAllReduce(Transport& transport, float* data, std::size_t count, const GradientCodec& codec,
    bool sparse, ErrorFeedback* feedback);

} // namespace loom::comm
