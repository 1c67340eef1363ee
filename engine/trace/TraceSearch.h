#pragma once

#include "engine/trace/TraceEvent.h"

#include <cstdint>
#include <string>
#include <vector>

namespace loom::trace {

// A timeline search: words joined by "and". `kind:forward`, `rank:3`, `stage:1`, `mb:2` (or
// `micro-batch:2`), `step:5`, `group:DP`, `peer:4`; a bare word matches the event's kind or group
// kind name ("backward", "all-reduce", "DP") or its codec. Numbers may be ranges: `rank:8-15`.
struct SearchQuery {
    struct Term {
        std::string field; // "kind", "rank", ... or "" for a bare word
        std::string text; // the word (lower case)
        std::int64_t lo = 0, hi = -1; // a number or range, hi < lo when not numeric
    };
    std::vector<Term> terms;
    std::string error; // why the text is not a query ("" when it is)
};

SearchQuery parseSearch(const std::string& text);
bool matches(const TraceEvent& e, const SearchQuery& query, const std::vector<GroupInfo>& groups);
// The matching events, ordered by start (then rank).
std::vector<std::uint32_t> search(
    const std::vector<TraceEvent>& events, const SearchQuery& query, const std::vector<GroupInfo>& groups);

} // namespace loom::trace
