// loom plan calibrate TRACE.json --cluster C [--name NAME] [--json]: fits a cluster profile to a measured run
// and saves the result in the store as a user profile.
#include "app/cli/CommandLine.h"
#include "app/cli/Commands.h"

#include "engine/plan/Calibrate.h"
#include "engine/plan/LayoutParser.h"
#include "engine/plan/TextUtil.h"
#include "engine/profiles/CalibratedProfile.h"
#include "engine/trace/PlainWhat.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <stdexcept>

namespace loom::app {

namespace {

using plan::text::fourDigits;

std::string percent(double v)
{
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f %%", 100.0 * v);
    return buf;
}

const char* kUsage = "usage: loom plan calibrate TRACE.json --cluster C [--name NAME] [--json]\n"
                     "  TRACE.json: a run of two or more steps recorded with loom-train --trace-out\n";

} // namespace

int calibrateCommand(CliContext& context, const QStringList& args, bool json)
{
    QString traceFile, cluster, name;
    for (int i = 0; i < args.size(); ++i) {
        if (args[i] == QLatin1String("--cluster") && i + 1 < args.size())
            cluster = args[++i];
        else if (args[i] == QLatin1String("--name") && i + 1 < args.size())
            name = args[++i];
        else if (traceFile.isEmpty() && !args[i].startsWith(QLatin1String("--")))
            traceFile = args[i];
        else {
            context.err << "loom plan calibrate: unexpected argument \"" << args[i].toStdString() << "\"\n" << kUsage;
            return ExitUsage;
        }
    }
    if (traceFile.isEmpty() || cluster.isEmpty()) {
        context.err << kUsage;
        return ExitUsage;
    }
    auto base = context.catalog().findCluster(cluster.toStdString());
    if (!base) {
        const auto known = context.catalog().clusterNames();
        context.err << "error: no cluster profile is called \"" << cluster.toStdString() << "\"";
        if (auto guess = plan::text::closest(cluster.toStdString(), known); !guess.empty())
            context.err << " (did you mean \"" << guess << "\"?)";
        context.err << "; known: " << plan::text::join(known) << "\n";
        return ExitInvalid;
    }
    std::string why;
    const auto text = readTextFile(traceFile, &why);
    if (!text) {
        context.err << "error: " << why << "\n";
        return ExitFailure;
    }
    plan::CalibrationTrace measured;
    try {
        measured = plan::readCalibrationTrace(*text);
    } catch (const std::exception& e) {
        context.err << "error: " << traceFile.toStdString() << ": " << plainWhat(e) << "\n";
        return ExitInvalid;
    }
    if (measured.layoutJson.empty()) {
        context.err << "error: " << traceFile.toStdString()
                    << " does not say which layout ran (no otherData.layout); record it with loom-train --trace-out\n";
        return ExitInvalid;
    }
    // The run's layout on the cluster being calibrated (validated there: its ranks must fit C's nodes).
    auto layoutJson = nlohmann::json::parse(measured.layoutJson, nullptr, false);
    if (!layoutJson.is_object()) {
        context.err << "error: " << traceFile.toStdString()
                    << ": otherData.layout is not a layout (a JSON object was expected)\n";
        return ExitInvalid;
    }
    layoutJson["cluster"] = cluster.toStdString();
    auto read = plan::readLayout(layoutJson.dump(), context.catalog());
    if (!read.ok()) {
        context.err << "error: the layout recorded in " << traceFile.toStdString() << " is not valid on cluster "
                    << cluster.toStdString() << ":\n"
                    << read.diagnostics.format();
        return ExitInvalid;
    }
    const plan::Layout& layout = *read.layout;
    plan::Calibration fit;
    try {
        fit = plan::calibrate(layout, measured.events, measured.groupKinds);
    } catch (const std::exception& e) {
        context.err << "error: " << traceFile.toStdString() << ": " << plainWhat(e) << "\n";
        return ExitInvalid;
    }

    // Save it: "<cluster>-calibrated" unless named; recalibrating a calibrated profile replaces it.
    if (name.isEmpty())
        name = QString::fromStdString(profiles::calibratedName(cluster.toStdString()));
    if (!context.requireStore())
        return ExitFailure;
    const profiles::Profile profile = profiles::calibratedProfile(fit, *base, layout, name.toStdString(),
        "loom plan calibrate " + traceFile.section(QLatin1Char('/'), -1).toStdString());
    const plan::ClusterSpec& spec = std::get<plan::ClusterSpec>(profile.spec);
    if (auto refused = context.catalog().add(profile); !refused.empty()) {
        context.err << "error: " << refused << (refused.find("name") != std::string::npos ? " (use --name)" : "")
                    << "\n";
        return ExitInvalid;
    }

    if (json) {
        auto params = nlohmann::ordered_json::array();
        for (const auto& p : fit.parameters)
            params.push_back({ { "name", p.name }, { "before", p.before }, { "after", p.after }, { "fitted", p.fitted },
                { "note", p.note } });
        auto residuals = nlohmann::ordered_json::array();
        for (const auto& r : fit.residuals)
            residuals.push_back({ { "what", r.what }, { "events", r.events }, { "rms_before", r.rmsBefore },
                { "rms_after", r.rmsAfter } });
        context.out << nlohmann::ordered_json(
            { { "profile", spec.name }, { "store", context.store()->path().toStdString() }, { "layout", layout.name },
                { "steps", fit.steps }, { "measured_step_s", fit.measuredStepSeconds },
                { "predicted_step_s_before", fit.predictedBefore }, { "predicted_step_s_after", fit.predictedAfter },
                { "parameters", params }, { "residuals", residuals }, { "cluster", plan::toJson(spec) } })
                           .dump(2)
                    << "\n";
        return ExitOk;
    }
    auto& o = context.out;
    o << "calibrated " << cluster.toStdString() << " from " << fit.steps << " measured steps of layout " << layout.name
      << " (tp=" << layout.parallel.tp << " pp=" << layout.parallel.pp << " dp=" << layout.parallel.dp << ")\n";
    for (const auto& p : fit.parameters)
        o << "  " << p.name << ": " << fourDigits(p.before) << (p.fitted ? " -> " + fourDigits(p.after) : " (kept)")
          << "   " << p.note << "\n";
    o << "fit residual (RMS of (predicted - measured) / measured):\n";
    for (const auto& r : fit.residuals)
        o << "  " << r.what << ", " << r.events << " events: " << percent(r.rmsBefore) << " before, "
          << percent(r.rmsAfter) << " after\n";
    o << "step time: measured " << fourDigits(fit.measuredStepSeconds) << " s, predicted "
      << fourDigits(fit.predictedBefore) << " s before and " << fourDigits(fit.predictedAfter)
      << " s after calibration\n";
    o << "saved cluster profile \"" << spec.name << "\" in " << context.store()->path().toStdString()
      << "; use it with \"cluster\": \"" << spec.name << "\" in a layout, or loom plan search --cluster " << spec.name
      << "\n";
    return ExitOk;
}

} // namespace loom::app
