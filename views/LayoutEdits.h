#pragma once

#include "engine/plan/Layout.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace loom::views {

// How the workbench turns one user gesture into a whole new layout, or refuses it with the reason. Pure
// functions of the layout, so the panels, the map and the tests agree on what an edit means.

enum class Degree { Tp, Pp, Dp };

struct EditResult {
    std::optional<plan::Layout> layout; // the edited layout, when accepted
    std::string refusal; // why not, as a sentence naming the fix, when refused
    bool ok() const { return layout.has_value(); }
};

// Sets one parallel degree. On a cluster with a fixed device count the grid keeps filling the layout's
// nodes: a new tp or pp recomputes dp = devices / (tp·pp), and a new dp changes the node count (as
// Megatron-LM derives dp from the world size). Explicit stage ranges return to an even split when pp
// changes. Refused when the degree itself is impossible (tp not dividing the heads, pp above the layer
// count, a grid that does not fill whole nodes); problems the user can fix elsewhere (a batch that no
// longer splits) are left for validation to report.
EditResult withDegree(const plan::Layout& layout, Degree degree, std::int64_t value);

// The values offered for a degree, each with "" when acceptable or the refusal, in ascending order.
std::vector<std::pair<std::int64_t, std::string>> degreeChoices(const plan::Layout& layout, Degree degree);

// Drops transformer blocks [first, last] on the device of `rank`: they go to that rank's pipeline stage
// (the chunk nearest them when vpp > 1); see plan::assignBlocksToStage.
EditResult dropBlocksOnRank(const plan::Layout& layout, std::int64_t rank, std::int64_t first, std::int64_t last);

// Sets vpp (virtual stages per pipeline rank); explicit stages return to an even split.
plan::Layout withVpp(const plan::Layout& layout, std::int64_t vpp);
// The stages with the embedding and the LM head counted as a layer each (Llama 3's pipeline; Megatron-LM's
// --account-for-embedding/loss-in-pipeline-split), or the even split again (`on` false). Unchanged when
// pp·vpp does not divide the layers + 2.
plan::Layout withEndsCountedAsLayers(const plan::Layout& layout, bool on);
// Whether the layout's stages are that split.
bool endsCountedAsLayers(const plan::Layout& layout);

} // namespace loom::views
