#pragma once

#include "engine/plan/Layout.h"

#include <string>
#include <vector>

namespace loom::plan {

// What the bundled engine (loom-train) can train, decided from the layout alone, before any rank starts.
// The planner models every valid layout; loom-train implements a subset. One rule set, asked by `loom
// validate` (a warning), `loom run` and the workbench's Run button (refused, with the reason), and the
// trainer itself (which throws std::invalid_argument with the same sentence).
struct EngineSupport {
    // One sentence per rule the layout breaks: the field, what loom-train does instead, the fix.
    std::vector<std::string> problems;

    bool trainable() const { return problems.empty(); }
    // The problems joined with "; " (empty when trainable).
    std::string reason() const;
};

EngineSupport engineSupport(const Layout& layout);

// The prefix of validate's warning: "the planner models this; loom-train cannot train it: ".
inline constexpr const char* kEngineCannotTrain = "the planner models this; loom-train cannot train it: ";

} // namespace loom::plan
