#pragma once

#include "engine/plan/Diagnostics.h"
#include "engine/plan/Layout.h"
#include "engine/plan/ProfileResolver.h"

#include <optional>
#include <string>
#include <string_view>

namespace loom::plan {

// The result of reading a layout: the layout when its structure could be read (even if some semantic rule
// fails, so an editor can open it and show what to fix), and every problem found, syntax through semantics.
struct LayoutReadResult {
    std::optional<Layout> layout;
    Diagnostics diagnostics;

    // A layout was read and no rule reported an error (warnings allowed).
    bool ok() const { return layout.has_value() && !diagnostics.hasErrors(); }
};

// The largest layout file Loom reads; anything bigger is not a layout.
constexpr std::size_t kMaxLayoutBytes = 16u << 20;

// Parses and validates layout JSON text. Never throws; every problem is in the diagnostics.
LayoutReadResult readLayout(std::string_view text, const ProfileResolver& profiles);
// Reads a layout file from disk (missing, unreadable, too large, empty and binary files are reported too).
LayoutReadResult readLayoutFile(const std::string& path, const ProfileResolver& profiles);

// The layout as pretty-printed JSON, version 1. Profiles given by name are written by name.
std::string writeLayout(const Layout& layout);

} // namespace loom::plan
