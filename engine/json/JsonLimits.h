#pragma once

// Limits for every JSON file Loom reads (layouts, profiles, traces, the telemetry stream, checkpoint
// metadata): nesting is checked before the text is parsed, so no later step (dump, copy, destruction)
// can run out of stack on a hostile file, and parse failures become one sentence with a line and column,
// never the library's own exception text.

#include <nlohmann/json.hpp>

#include <cstddef>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace loom {

// The deepest nesting of arrays and objects Loom accepts. Loom's own files nest less than 10 deep.
constexpr std::size_t kMaxJsonDepth = 128;

// Line and column (both from 1) of byte `offset` in `text`.
inline std::pair<std::size_t, std::size_t> jsonLineColumn(std::string_view text, std::size_t offset)
{
    std::size_t line = 1, column = 1;
    for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
        if (text[i] == '\n') {
            ++line;
            column = 1;
        } else {
            ++column;
        }
    }
    return { line, column };
}

// Empty when `text` nests arrays and objects at most `maxDepth` deep; else a sentence naming where it
// goes deeper ("nested deeper than 128 levels at line 1, column 129; ..."). Strings are skipped.
inline std::string jsonNestingProblem(std::string_view text, std::size_t maxDepth = kMaxJsonDepth)
{
    std::size_t depth = 0;
    bool inString = false, escaped = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char ch = text[i];
        if (inString) {
            if (escaped)
                escaped = false;
            else if (ch == '\\')
                escaped = true;
            else if (ch == '"')
                inString = false;
            continue;
        }
        if (ch == '"') {
            inString = true;
        } else if (ch == '[' || ch == '{') {
            if (++depth > maxDepth) {
                const auto [line, column] = jsonLineColumn(text, i);
                return "arrays and objects are nested deeper than " + std::to_string(maxDepth) + " levels at line "
                    + std::to_string(line) + ", column " + std::to_string(column) + "; Loom reads JSON nested at most "
                    + std::to_string(maxDepth) + " deep";
            }
        } else if ((ch == ']' || ch == '}') && depth > 0) {
            --depth;
        }
    }
    return {};
}

// The library's message without its "[json.exception.parse_error.101] parse error at line 1, column 2: "
// prefix: what went wrong, in its words ("syntax error while parsing value - invalid literal; last read: 'x'").
inline std::string jsonErrorDetail(const std::exception& e)
{
    std::string what = e.what();
    if (const auto bracket = what.find("] "); what.rfind("[json.exception.", 0) == 0 && bracket != std::string::npos)
        what = what.substr(bracket + 2);
    if (const auto colon = what.find(": "); what.rfind("parse error", 0) == 0 && colon != std::string::npos)
        what = what.substr(colon + 2);
    return what;
}

// A key found twice in one object (the parser would silently keep the last value).
struct JsonDuplicateKey {
    std::string key, object; // object: the dotted path of the object ("" at the top level)
};

// Parses with a check that no object has a key twice; throws JsonDuplicateKey.
template <typename Json> Json parseRejectingDuplicateKeys(std::string_view text)
{
    using Event = typename Json::parse_event_t;
    std::vector<std::pair<std::string, std::set<std::string>>> objects; // path, keys seen
    std::string lastKey;
    auto check = [&](int, Event event, Json& parsed) {
        if (event == Event::object_start) {
            const std::string parent = objects.empty() ? std::string() : objects.back().first;
            objects.push_back(
                { objects.empty() ? std::string() : (parent.empty() ? lastKey : parent + "." + lastKey), {} });
        } else if (event == Event::object_end && !objects.empty()) {
            objects.pop_back();
        } else if (event == Event::key && !objects.empty()) {
            lastKey = parsed.template get<std::string>();
            if (!objects.back().second.insert(lastKey).second)
                throw JsonDuplicateKey { lastKey, objects.back().first };
        }
        return true;
    };
    return Json::parse(text, check);
}

// Parses `text` as JSON after checking its nesting. Never throws: on failure returns a discarded value and
// sets *why to a sentence with the line and column ("not valid JSON at line 3, column 7: syntax error ...").
// With `rejectDuplicateKeys` (documents people edit: layouts, profiles) a key given twice in one object is
// refused, naming it, instead of the last value silently winning.
template <typename Json = nlohmann::json>
Json parseJsonLimited(std::string_view text, std::string* why, bool rejectDuplicateKeys = false)
{
    if (std::string deep = jsonNestingProblem(text); !deep.empty()) {
        *why = std::move(deep);
        return Json(nlohmann::json::value_t::discarded);
    }
    try {
        return rejectDuplicateKeys ? parseRejectingDuplicateKeys<Json>(text) : Json::parse(text);
    } catch (const JsonDuplicateKey& e) {
        *why = "the key \"" + e.key + "\" is given twice in "
            + (e.object.empty() ? std::string("the top-level object") : "the object " + e.object)
            + "; JSON keeps only one of them, so write it once";
    } catch (const nlohmann::json::parse_error& e) {
        const std::size_t offset = e.byte > 0 ? e.byte - 1 : 0;
        const auto [line, column] = jsonLineColumn(text, offset);
        *why = "not valid JSON at line " + std::to_string(line) + ", column " + std::to_string(column) + ": "
            + jsonErrorDetail(e) + (e.byte >= text.size() ? " (the text looks cut short)" : "");
    } catch (const std::exception& e) { // numbers out of range, allocation limits
        *why = "not readable JSON: " + jsonErrorDetail(e);
    }
    return Json(nlohmann::json::value_t::discarded);
}

} // namespace loom
