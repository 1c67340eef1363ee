#pragma once

#include "engine/plan/Layout.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom::plan {

// The frameworks a layout can be handed to.
enum class ExportTarget { Megatron, DeepSpeed, TorchTitan };

std::string_view toString(ExportTarget target);
std::optional<ExportTarget> exportTargetFromString(std::string_view text);

struct ExportFile {
    std::string name; // suggested file name, e.g. "gpt3-175b-1024-a100.megatron.sh"
    std::string text;
    bool executable = false; // a shell script
};

// A layout in a framework's own terms. Either `files` (the framework's arguments or config first, then
// the launch script when it is a separate file) or `refusals`: one sentence per setting the target cannot
// express, naming the setting, why, and what would work. Nothing is dropped silently: settings that the
// target handles differently but equivalently enough to run, or cannot express without changing the network
// or its layout (comm.staleness: the frameworks train synchronously), are listed in `notes`. The files are
// for the framework release named in their first lines (ExportOptions::frameworkVersion).
struct ExportResult {
    std::vector<ExportFile> files;
    std::vector<std::string> notes;
    std::vector<std::string> refusals;

    bool ok() const { return refusals.empty(); }
};

// Which release of the target framework the export is for. Empty: the default (the newest release Loom
// checked: Megatron-LM core_v0.19, torchtitan v0.2, Megatron-DeepSpeed and DeepSpeed as of the commits
// named in docs/bridges.md). Megatron-LM takes "core_v0.12" .. "core_v0.19" and "main"; torchtitan "v0.2"
// (its TOML-config releases v0.2.0 .. v0.2.2); DeepSpeed "main".
struct ExportOptions {
    std::string frameworkVersion;
};

// The versions `target` takes in ExportOptions::frameworkVersion, oldest first, and the default one.
std::vector<std::string> frameworkVersions(ExportTarget target);
std::string defaultFrameworkVersion(ExportTarget target);

// Pure: the same layout gives the same text. Expects a layout that passed validation. `primaryName` is the
// first file's name (default: the layout's name and the target's suffix); a launch script that is a file of
// its own is named after it ("x.json" -> "x.<target>.sh") and refers to it by that name. An unknown
// framework version is a refusal naming the versions there are.
ExportResult exportLayout(
    const Layout& layout, ExportTarget target, const std::string& primaryName = {}, const ExportOptions& options = {});

} // namespace loom::plan
