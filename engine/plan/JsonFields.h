#pragma once

#include "engine/plan/Diagnostics.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom::plan {

enum class Presence { Required, Optional };

// Short, printable form of a JSON value for messages: `"abc"`, `2.5`, `[1,2]` (cut at 40 characters).
std::string jsonSnippet(const nlohmann::json& value);

// Joins a JSON path and a key: ("parallel", "tp") -> "parallel.tp"; ("", "name") -> "name".
std::string jsonPath(std::string_view parent, std::string_view key);

// Reads typed fields out of one JSON object and reports every missing, mistyped or out-of-range field
// into Diagnostics with its full path. Each getter returns nullopt when the field is absent or bad.
// It never throws: malformed input is the normal case here, not an exception.
class ObjectReader {
public:
    // `rootName` names the top-level object in messages about its missing fields ("the layout").
    ObjectReader(
        const nlohmann::json& object, std::string path, Diagnostics& diagnostics, std::string rootName = "the layout");

    const std::string& path() const { return m_path; }
    std::string pathOf(std::string_view key) const { return jsonPath(m_path, key); }
    const nlohmann::json* find(std::string_view key) const;

    // A whole number in [min, max]; a float with an integral value (8.0) is accepted.
    std::optional<std::int64_t> integer(std::string_view key, Presence presence, std::int64_t min, std::int64_t max);
    // Any finite number in [min, max], or in (min, max] when minExclusive.
    std::optional<double> number(
        std::string_view key, Presence presence, double min, double max, bool minExclusive = false);
    std::optional<bool> boolean(std::string_view key, Presence presence);
    std::optional<std::string> string(std::string_view key, Presence presence, std::size_t maxLength = 256);
    // A string that must be one of `choices`; an unknown one lists them (and suggests the closest).
    std::optional<std::string> choice(std::string_view key, Presence presence, const std::vector<std::string>& choices);
    // Warns once for every key of the object that is not in `known`.
    void warnUnknown(std::initializer_list<std::string_view> known);

    // Reports `key` as missing with a hint of what to write ("a whole number from 1 to 65536").
    void reportMissing(std::string_view key, std::string_view expected);
    // Reports `key` as having the wrong JSON type.
    void reportWrongType(std::string_view key, const nlohmann::json& value, std::string_view expected);

private:
    const nlohmann::json& m_object;
    std::string m_path;
    Diagnostics& m_diagnostics;
    std::string m_rootName;
};

// The JSON type of `value` in words: "a string", "an array", "null", ...
std::string jsonTypeName(const nlohmann::json& value);

} // namespace loom::plan
