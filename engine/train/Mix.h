#pragma once

#include <cstdint>

namespace loom::train {

// SplitMix64's finaliser: a well-mixed 64-bit value from any 64-bit input. Counter-based randomness for
// initial weights and data order, so a value depends only on what it is for, never on who computes it.
inline std::uint64_t mix64(std::uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

} // namespace loom::train
