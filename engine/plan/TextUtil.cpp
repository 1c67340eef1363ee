#include "engine/plan/TextUtil.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <numeric>

namespace loom::plan::text {

std::string join(const std::vector<std::string>& items, std::string_view separator)
{
    std::string out;
    for (std::size_t i = 0; i < items.size(); ++i) {
        if (i)
            out += separator;
        out += items[i];
    }
    return out;
}

std::string orList(const std::vector<std::string>& items)
{
    std::string out;
    for (std::size_t i = 0; i < items.size(); ++i) {
        if (i > 0)
            out += i + 1 == items.size() ? " or " : ", ";
        out += items[i];
    }
    return out;
}

std::string joinInts(const std::vector<std::int64_t>& items, std::string_view separator)
{
    std::vector<std::string> parts;
    parts.reserve(items.size());
    for (auto v : items)
        parts.push_back(std::to_string(v));
    return join(parts, separator);
}

std::string number(double value)
{
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
    if (ec != std::errc())
        return "?";
    return std::string(buf, end);
}

std::string fourDigits(double value)
{
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.4g", value);
    return buf;
}

std::string ranges(const std::vector<std::int64_t>& v)
{
    std::vector<std::string> parts;
    for (std::size_t i = 0; i < v.size();) {
        std::size_t j = i;
        while (j + 1 < v.size() && v[j + 1] == v[j] + 1)
            ++j;
        parts.push_back(i == j ? std::to_string(v[i]) : std::to_string(v[i]) + "-" + std::to_string(v[j]));
        i = j + 1;
    }
    return join(parts);
}

std::size_t editDistance(std::string_view a, std::string_view b)
{
    std::vector<std::size_t> row(b.size() + 1);
    std::iota(row.begin(), row.end(), std::size_t { 0 });
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            std::size_t above = row[j];
            row[j] = std::min({ row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1) });
            diagonal = above;
        }
    }
    return row[b.size()];
}

std::string closest(std::string_view word, const std::vector<std::string>& candidates)
{
    std::string best;
    std::size_t bestDistance = std::max<std::size_t>(2, word.size() / 3) + 1;
    for (const auto& c : candidates) {
        std::size_t d = editDistance(word, c);
        if (d < bestDistance) {
            bestDistance = d;
            best = c;
        }
    }
    return best;
}

std::vector<std::int64_t> divisors(std::int64_t n)
{
    std::vector<std::int64_t> low, high;
    for (std::int64_t d = 1; d * d <= n; ++d) {
        if (n % d == 0) {
            low.push_back(d);
            if (d != n / d)
                high.push_back(n / d);
        }
    }
    low.insert(low.end(), high.rbegin(), high.rend());
    return low;
}

} // namespace loom::plan::text
