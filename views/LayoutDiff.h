#pragma once

#include <string>
#include <vector>

namespace loom::views {

// What differs between two layouts: every JSON path (`parallel.tp`, `model.layers`) whose value is not the
// same in both, with the two values as JSON text ("–" where one side has none). Qt-free.
struct LayoutDifference {
    std::string path, left, right;
};
std::vector<LayoutDifference> layoutDifference(const std::string& leftJson, const std::string& rightJson);

} // namespace loom::views
