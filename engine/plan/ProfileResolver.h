#pragma once

#include "engine/plan/ClusterSpec.h"
#include "engine/plan/ModelSpec.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom::plan {

// Looks up model and cluster profiles by name, for layouts that name them ("model": "gpt2-124m").
// The engine uses the built-in set; the workbench and CLI add the user's profiles from the store.
class ProfileResolver {
public:
    virtual ~ProfileResolver() = default;
    // The profile called `name`, or nullopt when there is none. Never throws.
    virtual std::optional<ModelSpec> findModel(std::string_view name) const = 0;
    virtual std::optional<ClusterSpec> findCluster(std::string_view name) const = 0;
    // Every known name, sorted, for messages that list them.
    virtual std::vector<std::string> modelNames() const = 0;
    virtual std::vector<std::string> clusterNames() const = 0;
};

} // namespace loom::plan
