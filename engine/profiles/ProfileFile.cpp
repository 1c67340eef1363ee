#include "engine/profiles/ProfileFile.h"

#include "engine/json/JsonLimits.h"

#include "engine/plan/JsonFields.h"

#include <nlohmann/json.hpp>

namespace loom::profiles {

using nlohmann::json;

const std::string& Profile::name() const
{
    return std::visit([](const auto& s) -> const std::string& { return s.name; }, spec);
}

const std::string& Profile::description() const
{
    return std::visit([](const auto& s) -> const std::string& { return s.description; }, spec);
}

std::string_view toString(Profile::Kind kind)
{
    return kind == Profile::Kind::Model ? "model" : "cluster";
}

ProfileReadResult readProfile(std::string_view text)
{
    ProfileReadResult result;
    auto& d = result.diagnostics;
    std::string why;
    json root = parseJsonLimited(text, &why, true);
    if (root.is_discarded()) {
        d.error(
            "", "the profile cannot be read: " + why + "; a profile starts with {\"loom_profile\": 1, \"kind\": ...}");
        return result;
    }
    if (!root.is_object()) {
        d.error("", "the profile is " + plan::jsonTypeName(root) + "; a profile is a JSON object");
        return result;
    }
    plan::ObjectReader r(root, "", d, "the profile");
    auto version = r.integer("loom_profile", plan::Presence::Required, 1, 1000000);
    if (version && *version != Profile::kVersion) {
        d.error("loom_profile",
            "loom_profile=" + std::to_string(*version) + " is not supported: this Loom reads profile version 1");
        return result;
    }
    auto kind = r.choice("kind", plan::Presence::Required, { "model", "cluster" });
    auto source = r.string("source", plan::Presence::Optional, 4096);
    if (!version || !kind)
        return result;
    Profile p;
    if (source)
        p.source = *source;
    if (*kind == "model") {
        if (auto m = plan::parseModelSpec(root, "", d))
            p.spec = *m;
        else
            return result;
    } else {
        if (auto c = plan::parseClusterSpec(root, "", d))
            p.spec = *c;
        else
            return result;
    }
    result.profile = p;
    return result;
}

std::string writeProfile(const Profile& profile)
{
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    j["loom_profile"] = Profile::kVersion;
    j["kind"] = toString(profile.kind());
    auto body = std::visit([](const auto& s) { return plan::toJson(s); }, profile.spec);
    for (auto& [key, value] : body.items())
        j[key] = value;
    if (!profile.source.empty())
        j["source"] = profile.source;
    return j.dump(2) + "\n";
}

} // namespace loom::profiles
