#pragma once

// loom-train's checks of what it is given before and while it trains: the checkpoint folder, the
// checkpoint it resumes from, and each step's loss and gradient norm. Each throws std::runtime_error
// with one sentence naming the file or step and what was expected.

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

namespace loom::train {

// Creates `dir` when missing and writes and removes a small file in it, so an unwritable folder (or a
// path that is a file) is found before step 1, not when the first checkpoint is due.
void checkCheckpointDir(const std::string& dir);

// Throws when DIR already holds a checkpoint (a `latest`): a run that is not a continuation would start at
// step 1 and overwrite the earlier run's step folders and `latest` (loom run passes --new-checkpoint-dir).
void checkUnusedCheckpointDir(const std::string& dir);

// The checkpoint that DIR/latest names, or nullopt when DIR has no `latest` yet. Throws when `latest`
// names something other than a folder step-N of DIR, or a folder that is missing or incomplete (naming the
// complete ones found, so the user can point `latest` at one).
std::optional<std::string> latestCheckpointChecked(const std::string& dir);

// Throws unless FOLDER/checkpoint.json is a readable Loom checkpoint (nesting limited, fields of the
// right types) whose step lies in 0..steps, the run's --steps.
void checkResumable(const std::string& folder, std::int64_t steps);

// A run whose loss or gradient norm is no longer finite (the stream's error kind "diverged").
class DivergedError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Throws DivergedError when the loss or the gradient norm of `step` is NaN or infinite, naming the step and rank.
void checkFiniteStep(double loss, double gradNorm, std::int64_t step, int rank);

} // namespace loom::train
