#include "views/LayoutDiff.h"

#include <nlohmann/json.hpp>

#include <map>

namespace loom::views {

namespace {

// Leaves by path; arrays count as leaves (a list of nodes or hosts reads better whole).
void flatten(const nlohmann::json& j, const std::string& path, std::map<std::string, std::string>& out, int depth)
{
    if (j.is_object() && depth < 16) {
        for (auto it = j.begin(); it != j.end(); ++it)
            flatten(it.value(), path.empty() ? it.key() : path + "." + it.key(), out, depth + 1);
        return;
    }
    out[path] = j.dump();
}

std::map<std::string, std::string> leaves(const std::string& text)
{
    std::map<std::string, std::string> out;
    const auto j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_discarded())
        flatten(j, "", out, 0);
    return out;
}

} // namespace

std::vector<LayoutDifference> layoutDifference(const std::string& leftJson, const std::string& rightJson)
{
    const auto a = leaves(leftJson), b = leaves(rightJson);
    std::vector<LayoutDifference> out;
    for (const auto& [path, value] : a) {
        const auto it = b.find(path);
        if (it == b.end())
            out.push_back({ path, value, "–" });
        else if (it->second != value)
            out.push_back({ path, value, it->second });
    }
    for (const auto& [path, value] : b)
        if (!a.count(path))
            out.push_back({ path, "–", value });
    return out;
}

} // namespace loom::views
