#pragma once
// The least time one core takes to move AdamW's bytes: a plain loop that reads four floats and writes three
// per parameter (parameters, first and second moments updated in place from the gradient), with the same
// one-line-ahead prefetching as the optimizer and none of its arithmetic. bench_step prints the optimizer's
// update beside it: a ratio near 1 says the update runs at the memory's speed, not at its instructions'.
#include <cstddef>

namespace loom::bench {

// Seconds for the best of `repeats` passes over `n` parameters on the calling thread.
double adamTrafficSeconds(std::size_t n, int repeats);

} // namespace loom::bench
