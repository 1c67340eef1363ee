#pragma once

#include "engine/plan/ClusterSpec.h"
#include "engine/plan/Diagnostics.h"
#include "engine/plan/ModelSpec.h"

#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace loom::profiles {

// A model or cluster profile as stored in a JSON file:
//     {"loom_profile": 1, "kind": "model" | "cluster", "name": ..., <the ModelSpec or ClusterSpec fields>,
//      "description": ..., "source": "where the figures come from"}
// Pure C++ (no Qt), so the engine can resolve profile names too.
struct Profile {
    static constexpr int kVersion = 1;
    enum class Kind { Model, Cluster };

    std::variant<plan::ModelSpec, plan::ClusterSpec> spec;
    std::string source; // citation for the published figures

    Kind kind() const { return spec.index() == 0 ? Kind::Model : Kind::Cluster; }
    const std::string& name() const;
    const std::string& description() const;
};

std::string_view toString(Profile::Kind kind);

struct ProfileReadResult {
    std::optional<Profile> profile;
    plan::Diagnostics diagnostics;
};

// Parses a profile file's text. Never throws; every problem is in the diagnostics.
ProfileReadResult readProfile(std::string_view text);
// The profile as pretty JSON (version 1), readable by readProfile.
std::string writeProfile(const Profile& profile);

} // namespace loom::profiles
