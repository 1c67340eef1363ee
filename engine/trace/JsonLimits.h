#pragma once

// Limits for every JSON file Loom reads (layouts, profiles, traces, the telemetry stream, checkpoint
// metadata): nesting is checked before the text is parsed, so no later step (dump, copy, destruction)
// can run out of stack on a hostile file, and parse failures become one sentence with a line and column,
// never the library's own exception text.

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

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

// Parses `text` as JSON after checking its nesting. Never throws: on failure returns a discarded value and
// sets *why to a sentence with the line and column ("not valid JSON at line 3, column 7: syntax error ...").
template <typename Json = nlohmann::json> Json parseJsonLimited(std::string_view text, std::string* why)
{
    if (std::string deep = jsonNestingProblem(text); !deep.empty()) {
        *why = std::move(deep);
        return Json(nlohmann::json::value_t::discarded);
    }
    try {
        return Json::parse(text);
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
