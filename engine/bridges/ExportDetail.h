#pragma once
// Shared by the export targets (Export*.cpp); not part of the public API.

#include "engine/bridges/Export.h"

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <utility>
#include <vector>

namespace loom::plan::exporting {

// One command-line argument of the training program: a flag and its value ("" for a switch).
using Arg = std::pair<std::string, std::string>;

// A word safe inside a shell script: single-quoted unless it holds only characters that need none.
std::string shellWord(const std::string& word);
// Text for a one-line comment (newlines and control characters removed).
std::string commentText(const std::string& text);
// `--flag value` lines of a bash array body, one per line, indented.
std::string argLines(const std::vector<Arg>& args);
// A decimal number without trailing zeros ("25", "0.01").
std::string number(double value);

// The Megatron-LM release an export is for, as its minor version (core_v0.12 -> 12); main counts as the
// release after the newest one Loom knows.
constexpr int kMegatronMain = 20;
int megatronMinor(const std::string& version);

// Megatron-LM's model, parallelism, batch, precision, recompute and gradient-sync arguments for the
// layout (shared by the Megatron target and DeepSpeed's Megatron-DeepSpeed launch, whose arguments.py
// names several of them differently). Refusals and notes go into `result`. `minor`: megatronMinor.
std::vector<Arg> megatronArgs(const Layout& layout, ExportResult& result, bool forDeepSpeed, int minor = 19);
// The stages as Megatron-LM's --pipeline-model-parallel-layout ("Et|tt|tL": E the embedding, t a
// transformer layer, L the loss, | between virtual stages in model order).
std::string megatronLayoutString(const Layout& layout);
// Notes for the layout settings no framework's export expresses (comm.staleness).
void commonNotes(const Layout& layout, const std::string& target, ExportResult& result);

// The layout's stages as Megatron can say them: true when every stage holds the same number of layers, or
// all but the first and last do (set `first` and `last` then; 0 when even).
bool megatronStages(const Layout& layout, std::int64_t& first, std::int64_t& last);
// True when the stages are even once the embedding counts as a layer of the first stage (`embedding`) and
// the LM head with the loss as a layer of the last (`loss`), at least one of them: Megatron-LM's
// --account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split (Llama 3's pipeline,
// whose first chunk may hold the embedding alone).
bool megatronAccountedStages(const Layout& layout, bool& embedding, bool& loss);

// The launch script for the layout's cluster profile: torchrun on each host, or an sbatch script that
// starts torchrun on every node with srun. `program` is the training program's path expression (shell text
// Loom writes itself), `args` its arguments; `preamble` shell lines Loom writes itself.
// `afterArgs` follows the ARGS array (shell lines Loom writes itself). The script is named `name`.
ExportFile launchScript(const Layout& layout, ExportTarget target, const std::string& program,
    const std::vector<Arg>& args, const std::string& preamble, ExportResult& result, const std::string& name,
    const std::string& afterArgs = {});
// The name of a file beside `primary`: "dir/x.ds_config.json" (primarySuffix ".ds_config.json") or
// "dir/x.json" -> "dir/x" + suffix.
std::string companionName(const std::string& primary, const std::string& primarySuffix, const std::string& suffix);

// A refusal for the layout's gradient codec, and the all-reduce algorithm's refusal or note, for a target
// that all-reduces through NCCL.
std::string codecRefusal(const Layout& layout, const std::string& target, const std::string& alternative);
void commonComm(const Layout& layout, const std::string& target, ExportResult& result);

// The layout's optimizer section (ExportOptimizer.cpp). True when the layout gives one (any field away from
// loom-train's defaults): only then are AdamW's constants and the schedule written out.
bool optimizerSectionGiven(const Layout& layout);
// Megatron-LM's (or Megatron-DeepSpeed's) optimizer, schedule and state-precision arguments.
void megatronOptimizerArgs(
    const Layout& layout, std::vector<Arg>& args, ExportResult& result, bool forDeepSpeed, int minor);
// DeepSpeed's gradient_clipping and data_types.grad_accum_dtype.
void deepSpeedOptimizerConfig(const Layout& layout, nlohmann::ordered_json& config);
// torchtitan's [optimizer] and [lr_scheduler] tables (empty without the section); training.max_norm is
// written with [training].
std::string torchTitanOptimizer(const Layout& layout, ExportResult& result);

// The targets.
ExportResult exportMegatron(const Layout& layout, const std::string& primaryName, const std::string& version);
ExportResult exportDeepSpeed(const Layout& layout, const std::string& primaryName, const std::string& version);
ExportResult exportTorchTitan(const Layout& layout, const std::string& primaryName, const std::string& version);

} // namespace loom::plan::exporting
