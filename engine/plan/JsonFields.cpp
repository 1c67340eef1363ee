#include "engine/plan/JsonFields.h"

#include "engine/plan/TextUtil.h"

#include <algorithm>
#include <cmath>

namespace loom::plan {

using nlohmann::json;

std::string jsonSnippet(const json& value)
{
    std::string s = value.dump(-1, ' ', false, json::error_handler_t::replace);
    if (s.size() > 40)
        s = s.substr(0, 37) + "...";
    return s;
}

std::string jsonPath(std::string_view parent, std::string_view key)
{
    if (parent.empty())
        return std::string(key);
    return std::string(parent) + "." + std::string(key);
}

std::string jsonTypeName(const json& value)
{
    switch (value.type()) {
    case json::value_t::null:
        return "null";
    case json::value_t::object:
        return "an object";
    case json::value_t::array:
        return "an array";
    case json::value_t::string:
        return "a string";
    case json::value_t::boolean:
        return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
        return "a number";
    case json::value_t::binary:
        return "binary data";
    case json::value_t::discarded:
        return "nothing";
    }
    return "unknown";
}

ObjectReader::ObjectReader(const json& object, std::string path, Diagnostics& diagnostics, std::string rootName)
    : m_object(object)
    , m_path(std::move(path))
    , m_diagnostics(diagnostics)
    , m_rootName(std::move(rootName))
{
}

const json* ObjectReader::find(std::string_view key) const
{
    if (!m_object.is_object())
        return nullptr;
    auto it = m_object.find(std::string(key));
    return it == m_object.end() ? nullptr : &*it;
}

void ObjectReader::reportMissing(std::string_view key, std::string_view expected)
{
    std::string where = m_path.empty() ? m_rootName : m_path;
    m_diagnostics.error(pathOf(key),
        pathOf(key) + " is missing; add \"" + std::string(key) + "\" to " + where + " (" + std::string(expected) + ")");
}

void ObjectReader::reportWrongType(std::string_view key, const json& value, std::string_view expected)
{
    std::string message
        = pathOf(key) + "=" + jsonSnippet(value) + " is " + jsonTypeName(value) + "; write " + std::string(expected);
    m_diagnostics.error(pathOf(key), message);
}

std::optional<std::int64_t> ObjectReader::integer(
    std::string_view key, Presence presence, std::int64_t min, std::int64_t max)
{
    const std::string expected = "a whole number from " + std::to_string(min) + " to " + std::to_string(max);
    const json* v = find(key);
    if (!v) {
        if (presence == Presence::Required)
            reportMissing(key, expected);
        return std::nullopt;
    }
    const std::string path = pathOf(key);
    if (v->is_string()) {
        const auto& s = v->get_ref<const std::string&>();
        std::string hint = expected;
        if (!s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
            hint += " without quotes, e.g. \"" + std::string(key) + "\": " + s;
        reportWrongType(key, *v, hint);
        return std::nullopt;
    }
    if (!v->is_number()) {
        reportWrongType(key, *v, expected);
        return std::nullopt;
    }
    double asDouble = v->get<double>();
    if (v->is_number_float() && asDouble != std::floor(asDouble)) {
        m_diagnostics.error(path, path + "=" + jsonSnippet(*v) + " is not a whole number; write " + expected);
        return std::nullopt;
    }
    // Compare as double first so huge values (1e300, 2^64-1) are caught before any integer conversion.
    if (asDouble > static_cast<double>(max)
        || (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(max))) {
        m_diagnostics.error(
            path, path + "=" + jsonSnippet(*v) + " is too large; it must be at most " + std::to_string(max));
        return std::nullopt;
    }
    if (asDouble < static_cast<double>(min)) {
        m_diagnostics.error(
            path, path + "=" + jsonSnippet(*v) + " is too small; it must be at least " + std::to_string(min));
        return std::nullopt;
    }
    std::int64_t value = v->is_number_float() ? static_cast<std::int64_t>(asDouble) : v->get<std::int64_t>();
    if (value > max || value < min) { // exact check for values near the double rounding edge
        m_diagnostics.error(
            path, path + "=" + jsonSnippet(*v) + " is outside " + std::to_string(min) + " to " + std::to_string(max));
        return std::nullopt;
    }
    return value;
}

std::optional<double> ObjectReader::number(
    std::string_view key, Presence presence, double min, double max, bool minExclusive)
{
    const std::string expected = std::string("a number ") + (minExclusive ? "above " : "from ") + text::number(min)
        + (minExclusive ? " up to " : " to ") + text::number(max);
    const json* v = find(key);
    if (!v) {
        if (presence == Presence::Required)
            reportMissing(key, expected);
        return std::nullopt;
    }
    if (!v->is_number()) {
        reportWrongType(key, *v, expected);
        return std::nullopt;
    }
    const std::string path = pathOf(key);
    double value = v->get<double>();
    if (!std::isfinite(value) || value > max) {
        m_diagnostics.error(
            path, path + "=" + jsonSnippet(*v) + " is too large; it must be at most " + text::number(max));
        return std::nullopt;
    }
    if (value < min || (minExclusive && value == min)) {
        m_diagnostics.error(path,
            path + "=" + jsonSnippet(*v) + " is too small; it must be " + (minExclusive ? "above " : "at least ")
                + text::number(min));
        return std::nullopt;
    }
    return value;
}

std::optional<bool> ObjectReader::boolean(std::string_view key, Presence presence)
{
    const json* v = find(key);
    if (!v) {
        if (presence == Presence::Required)
            reportMissing(key, "true or false");
        return std::nullopt;
    }
    if (!v->is_boolean()) {
        reportWrongType(key, *v, "true or false (without quotes)");
        return std::nullopt;
    }
    return v->get<bool>();
}

std::optional<std::string> ObjectReader::string(std::string_view key, Presence presence, std::size_t maxLength)
{
    const json* v = find(key);
    if (!v) {
        if (presence == Presence::Required)
            reportMissing(key, "a string");
        return std::nullopt;
    }
    if (!v->is_string()) {
        reportWrongType(key, *v, "a string in double quotes");
        return std::nullopt;
    }
    const auto& s = v->get_ref<const std::string&>();
    if (s.size() > maxLength) {
        m_diagnostics.error(pathOf(key),
            pathOf(key) + " is " + std::to_string(s.size()) + " characters long; it must be at most "
                + std::to_string(maxLength));
        return std::nullopt;
    }
    return s;
}

std::optional<std::string> ObjectReader::choice(
    std::string_view key, Presence presence, const std::vector<std::string>& choices)
{
    std::vector<std::string> quoted;
    for (const auto& c : choices)
        quoted.push_back("\"" + c + "\"");
    const std::string expected = "one of " + text::join(quoted);
    const json* v = find(key);
    if (!v) {
        if (presence == Presence::Required)
            reportMissing(key, expected);
        return std::nullopt;
    }
    if (!v->is_string()) {
        reportWrongType(key, *v, expected);
        return std::nullopt;
    }
    const auto& s = v->get_ref<const std::string&>();
    if (std::find(choices.begin(), choices.end(), s) != choices.end())
        return s;
    std::string message = pathOf(key) + "=" + jsonSnippet(*v) + " is not known; use " + expected;
    if (auto guess = text::closest(s, choices); !guess.empty())
        message += " (did you mean \"" + guess + "\"?)";
    m_diagnostics.error(pathOf(key), message);
    return std::nullopt;
}

void ObjectReader::warnUnknown(std::initializer_list<std::string_view> known)
{
    if (!m_object.is_object())
        return;
    std::vector<std::string> knownList(known.begin(), known.end());
    for (const auto& [key, value] : m_object.items()) {
        if (std::find(known.begin(), known.end(), key) != known.end())
            continue;
        std::string message = pathOf(key) + " is not a known field and is ignored";
        if (auto guess = text::closest(key, knownList); !guess.empty())
            message += " (did you mean \"" + guess + "\"?)";
        else
            message += "; known fields here: " + text::join(knownList);
        m_diagnostics.warning(pathOf(key), message);
    }
}

} // namespace loom::plan
