#pragma once

#include <cstddef>
#include <cstdint>

// The LM head's softmax cross-entropy over this rank's slice of the vocabulary (columns [first, first + Vl)
// of `vocab` words; columns at or past `vocab` are padding), row by row on `threads` threads. Rows are
// independent, so the results do not depend on the thread count. The vocab-parallel reductions between the
// steps (the row maxima, the sums) are the caller's.
namespace loom::train::vocab {

// max[t] of each row of z (T rows of Vl); padding columns are set to -infinity first.
void rowMax(float* z, int T, int Vl, std::int64_t first, std::int64_t vocab, float* max, int threads);

// z ← exp(z − max[t]); sums[t] = Σ of the row, targetShift[t] = the target's logit − max[t] when the
// target lies in this slice (left untouched otherwise).
void expSums(float* z, int T, int Vl, const float* max, const std::int32_t* targets, std::int64_t first, float* sums,
    float* targetShift, int threads);

// In place, z (the exponentials) becomes dLoss/dLogits: (z / sums[t] − onehot(target)) · scale.
void gradient(float* z, int T, int Vl, const float* sums, const std::int32_t* targets, std::int64_t first, float scale,
    int threads);

} // namespace loom::train::vocab
