#include "engine/profiles/CalibratedProfile.h"

#include "engine/plan/TextUtil.h"

namespace loom::profiles {

using plan::text::fourDigits;

std::string calibratedName(const std::string& cluster)
{
    const std::string suffix = "-calibrated";
    const bool already = cluster.size() >= suffix.size()
        && cluster.compare(cluster.size() - suffix.size(), suffix.size(), suffix) == 0;
    return already ? cluster : cluster + suffix;
}

Profile calibratedProfile(const plan::Calibration& fit, const plan::ClusterSpec& base, const plan::Layout& layout,
    const std::string& name, const std::string& from)
{
    plan::ClusterSpec spec = fit.cluster;
    spec.name = name;
    spec.description = base.description + " (calibrated from a measured run of layout " + layout.name + ")";
    Profile profile;
    profile.spec = spec;
    profile.source = from + ": " + std::to_string(fit.steps) + " measured steps of " + layout.name + " (tp "
        + std::to_string(layout.parallel.tp) + ", pp " + std::to_string(layout.parallel.pp) + ", dp "
        + std::to_string(layout.parallel.dp) + "), fitted to " + base.name + "; measured step "
        + fourDigits(fit.measuredStepSeconds) + " s, predicted " + fourDigits(fit.predictedAfter) + " s";
    return profile;
}

} // namespace loom::profiles
