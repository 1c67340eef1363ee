#include "engine/trace/TraceSearch.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <sstream>
#include <tuple>

namespace loom::trace {

namespace {

const char* const kFields[] = { "kind", "rank", "stage", "mb", "micro-batch", "step", "group", "peer", "chunk" };

std::string lower(std::string s)
{
    for (char& c : s)
        c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

bool parseNumber(std::string_view s, std::int64_t& out)
{
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && end == s.data() + s.size();
}

// "7" -> [7, 7]; "8-15" -> [8, 15]; false when neither.
bool parseRange(const std::string& s, std::int64_t& lo, std::int64_t& hi)
{
    const auto dash = s.find('-', 1);
    if (dash == std::string::npos)
        return parseNumber(s, lo) && parseNumber(s, hi);
    return parseNumber(std::string_view(s).substr(0, dash), lo) && parseNumber(std::string_view(s).substr(dash + 1), hi)
        && lo <= hi;
}

GroupKind groupOf(const TraceEvent& e, const std::vector<GroupInfo>& groups)
{
    for (const auto& g : groups)
        if (g.id == e.group)
            return g.kind;
    return GroupKind::Other;
}

bool within(std::int64_t v, const SearchQuery::Term& t)
{
    return v >= t.lo && v <= t.hi;
}

} // namespace

SearchQuery parseSearch(const std::string& text)
{
    SearchQuery q;
    std::istringstream in(text);
    std::string word;
    while (in >> word) {
        word = lower(word);
        if (word == "and")
            continue;
        SearchQuery::Term t;
        const auto colon = word.find(':');
        if (colon != std::string::npos) {
            t.field = word.substr(0, colon);
            t.text = word.substr(colon + 1);
            if (std::find(std::begin(kFields), std::end(kFields), t.field) == std::end(kFields)) {
                q.error = "unknown field \"" + t.field + "\" (kind, rank, stage, mb, step, group, peer, chunk)";
                return q;
            }
            const bool textual = t.field == "kind" || t.field == "group";
            if (!textual && !parseRange(t.text, t.lo, t.hi)) {
                q.error = t.field + " takes a number or a range such as 8-15, not \"" + t.text + "\"";
                return q;
            }
            if (t.text.empty()) {
                q.error = t.field + " needs a value";
                return q;
            }
        } else {
            t.text = word;
        }
        q.terms.push_back(t);
    }
    return q;
}

bool matches(const TraceEvent& e, const SearchQuery& q, const std::vector<GroupInfo>& groups)
{
    if (!q.error.empty() || q.terms.empty())
        return false;
    for (const auto& t : q.terms) {
        const std::string kind(toString(e.kind));
        const std::string group = lower(std::string(toString(groupOf(e, groups))));
        bool ok = false;
        if (t.field.empty())
            ok = kind.find(t.text) != std::string::npos || (e.group >= 0 && group == t.text)
                || (!e.codec.empty() && lower(e.codec).find(t.text) != std::string::npos);
        else if (t.field == "kind")
            ok = kind == t.text;
        else if (t.field == "group")
            ok = e.group >= 0 && group == t.text;
        else if (t.field == "rank")
            ok = within(e.rank, t);
        else if (t.field == "stage")
            ok = within(e.stage, t);
        else if (t.field == "mb" || t.field == "micro-batch")
            ok = within(e.microBatch, t);
        else if (t.field == "step")
            ok = within(e.step, t);
        else if (t.field == "peer")
            ok = within(e.peer, t);
        else if (t.field == "chunk")
            ok = within(e.chunk, t);
        if (!ok)
            return false;
    }
    return true;
}

std::vector<std::uint32_t> search(
    const std::vector<TraceEvent>& events, const SearchQuery& q, const std::vector<GroupInfo>& groups)
{
    std::vector<std::uint32_t> out;
    for (std::size_t i = 0; i < events.size(); ++i)
        if (matches(events[i], q, groups))
            out.push_back(std::uint32_t(i));
    std::stable_sort(out.begin(), out.end(), [&events](std::uint32_t a, std::uint32_t b) {
        return std::tie(events[a].startNs, events[a].rank) < std::tie(events[b].startNs, events[b].rank);
    });
    return out;
}

} // namespace loom::trace
