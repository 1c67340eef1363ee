#pragma once

#include "engine/plan/Calibrate.h"
#include "engine/profiles/ProfileFile.h"

#include <string>

namespace loom::profiles {

// The name a calibrated profile of `cluster` gets unless the user names it: "<cluster>-calibrated";
// recalibrating a calibrated profile keeps its name (and so replaces it).
std::string calibratedName(const std::string& cluster);

// The user profile that `loom plan calibrate` and the workbench's "Calibrate from this run" save: the fitted
// cluster under `name`, described as calibrated from a run of `layout`, its source naming how it was made
// (`from`: "loom plan calibrate trace.json", "the workbench's Calibrate from run 42"), the steps used and the
// measured and predicted step.
Profile calibratedProfile(const plan::Calibration& fit, const plan::ClusterSpec& base, const plan::Layout& layout,
    const std::string& name, const std::string& from);

} // namespace loom::profiles
