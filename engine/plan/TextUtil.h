#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

// Small text helpers for user-facing messages. No locale: numbers print the same everywhere.
namespace loom::plan::text {

std::string join(const std::vector<std::string>& items, std::string_view separator = ", ");
std::string joinInts(const std::vector<std::int64_t>& items, std::string_view separator = ", ");
// "a, b or c": the choices as a message lists them.
std::string orList(const std::vector<std::string>& items);
// Shortest decimal form that reads back to the same double ("0.5", "25", "1e+30").
std::string number(double value);
// At most four significant digits, as printf's "%.4g" writes them ("15.75", "8", "1.235e+05").
std::string fourDigits(double value);
// Collapses sorted integers into ranges: {1,2,3,7,9,10} -> "1-3, 7, 9-10".
std::string ranges(const std::vector<std::int64_t>& sortedValues);
// Levenshtein distance, for "did you mean" suggestions.
std::size_t editDistance(std::string_view a, std::string_view b);
// The closest candidate when it is close enough to be a plausible typo, else "".
std::string closest(std::string_view word, const std::vector<std::string>& candidates);
// Divisors of n in increasing order (n >= 1).
std::vector<std::int64_t> divisors(std::int64_t n);

} // namespace loom::plan::text
