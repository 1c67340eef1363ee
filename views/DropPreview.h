#pragma once

#include "engine/plan/Layout.h"

#include <QString>

#include <cstdint>

namespace loom::views {

// What a drop of blocks [first, last] on the device of `rank` would do, in words, while the drag still hovers:
// the stages whose blocks change with their new and old ranges ("stage 1: blocks 10–25 (was 16–25)"), or why
// the drop would be refused. Computed by dropBlocksOnRank, the same function the drop applies.
struct DropPreview {
    bool accepted = false;
    std::int64_t stage = -1; // the (virtual) stage that takes the blocks, when accepted
    QString text;
};

DropPreview previewDrop(const plan::Layout& layout, std::int64_t rank, std::int64_t first, std::int64_t last);

} // namespace loom::views
