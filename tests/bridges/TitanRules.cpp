// torchtitan v0.2's TOML job config: each section and key against JobConfig's dataclasses (the facts in
// tests/bridges/frameworks/torchtitan), Literal choices, the model registry, and the parallelism rules of
// distributed/parallel_dims.py and distributed/pipeline_parallel.py.
#include "ExportChecker.h"

#include <nlohmann/json.hpp>

#include <sstream>

namespace loom::test {

namespace {

// The subset of TOML Loom writes: [section], key = "string" | integer | true/false | [[...], ...] (arrays,
// possibly over several lines). Values come back as JSON; a line it cannot read is a problem.
nlohmann::json parseToml(const std::string& text, std::vector<std::string>& problems)
{
    nlohmann::json doc = nlohmann::json::object();
    std::string section;
    std::istringstream in(text);
    std::string line, pending, pendingKey;
    while (std::getline(in, line)) {
        if (!pendingKey.empty()) {
            pending += line;
            if (line.rfind(']', 0) == 0) { // the closing bracket of a multi-line array
                std::string json = pending;
                for (std::size_t p = json.find(",]"); p != std::string::npos; p = json.find(",]"))
                    json.erase(p, 1);
                const auto v = nlohmann::json::parse(json, nullptr, false);
                if (v.is_discarded())
                    problems.push_back("torchtitan: TOML array " + pendingKey + " does not parse");
                doc[section][pendingKey] = v;
                pendingKey.clear();
            }
            continue;
        }
        if (line.empty() || line[0] == '#')
            continue;
        if (line[0] == '[') {
            section = line.substr(1, line.find(']') - 1);
            continue;
        }
        const auto eq = line.find(" = ");
        if (eq == std::string::npos) {
            problems.push_back("torchtitan: TOML line \"" + line + "\" is not key = value");
            continue;
        }
        const std::string key = line.substr(0, eq), value = line.substr(eq + 3);
        if (value == "[") {
            pendingKey = key, pending = "[";
            continue;
        }
        // A TOML basic string reads as JSON when it holds no raw control character; \uXXXX is the same.
        for (char c : value)
            if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
                problems.push_back("torchtitan: a raw control character in " + key);
        const auto v = nlohmann::json::parse(value, nullptr, false);
        if (v.is_discarded())
            problems.push_back("torchtitan: value of " + key + " (" + value + ") is not TOML Loom can read");
        doc[section][key] = v;
    }
    return doc;
}

bool typeMatches(const std::string& type, const nlohmann::json& v)
{
    if (type.starts_with("int"))
        return v.is_number_integer();
    if (type.starts_with("bool"))
        return v.is_boolean();
    if (type.starts_with("float"))
        return v.is_number();
    if (type.starts_with("str") || type.starts_with("Literal"))
        return v.is_string();
    if (type.starts_with("list"))
        return v.is_array();
    return true;
}

void pipelineSplit(const nlohmann::json& p, long long layers, long long pp, std::vector<std::string>& problems)
{
    const std::string schedule = p.value("pipeline_parallel_schedule", std::string("1F1B"));
    const bool single = schedule == "1F1B" || schedule == "GPipe";
    if (!p.contains("module_fqns_per_model_part")) {
        if (p.contains("pipeline_parallel_layers_per_stage")) { // torchtitan's own count, with its defaults of 1
            const long long per = p["pipeline_parallel_layers_per_stage"].get<long long>();
            const long long stages = (layers + p.value("pipeline_parallel_first_stage_less_layers", 1LL)
                                         + p.value("pipeline_parallel_last_stage_less_layers", 1LL) + per - 1)
                / per;
            if (stages % pp != 0 || (single && stages != pp) || (!single && stages < 2 * pp))
                problems.push_back("torchtitan: " + std::to_string(stages) + " stages do not suit pp "
                    + std::to_string(pp) + " and " + schedule);
        }
        return;
    }
    const auto& parts = p["module_fqns_per_model_part"];
    const long long n = static_cast<long long>(parts.size());
    if (n % pp != 0 || (single && n != pp) || (!single && n < 2 * pp))
        problems.push_back("torchtitan: " + std::to_string(n) + " model parts do not suit pp " + std::to_string(pp)
            + " and " + schedule);
    std::vector<std::string> order;
    for (const auto& part : parts)
        for (const auto& m : part)
            order.push_back(m.get<std::string>());
    std::vector<std::string> expected { "tok_embeddings" };
    for (long long i = 0; i < layers; ++i)
        expected.push_back("layers." + std::to_string(i));
    expected.push_back("norm");
    expected.push_back("output");
    if (order != expected)
        problems.push_back("torchtitan: module_fqns_per_model_part does not name every module once, in order");
}

// Each section and key of the config in one release's JobConfig, with its type and choices.
void titanKeys(const nlohmann::json& facts, const nlohmann::json& doc, std::vector<std::string>& problems)
{
    const std::string release = facts.value("source", std::string("torchtitan"));
    for (const auto& [section, keys] : doc.items()) {
        if (!facts["sections"].contains(section)) {
            problems.push_back(release + ": no config section [" + section + "]");
            continue;
        }
        for (const auto& [key, value] : keys.items()) {
            const auto& s = facts["sections"][section];
            if (!s.contains(key)) {
                problems.push_back(release + ": no key " + section + "." + key);
                continue;
            }
            if (!typeMatches(s[key].value("type", std::string()), value))
                problems.push_back(release + ": " + section + "." + key + " takes " + s[key]["type"].dump());
            if (s[key]["choices"].is_array() && !s[key]["choices"].empty()) {
                const auto& c = s[key]["choices"];
                if (std::find(c.begin(), c.end(), value) == c.end())
                    problems.push_back(
                        release + ": " + section + "." + key + " = " + value.dump() + " is not one of " + c.dump());
            }
        }
    }
}

} // namespace

void ExportChecker::torchTitanConfig(const std::string& text, const Launch& launch,
    const std::vector<std::string>& notes, std::vector<std::string>& problems) const
{
    const auto doc = parseToml(text, problems);
    for (const auto& release : m_torchTitan)
        titanKeys(nlohmann::json::parse(release), doc, problems);
    const auto facts = nlohmann::json::parse(m_torchTitan.back());
    // The flavor must be in the model's registry, unless a note tells the user to register it.
    const std::string model = doc["model"].value("name", std::string()),
                      flavor = doc["model"].value("flavor", std::string());
    const auto& flavors = facts["flavors"];
    const bool registered = flavors.contains(model)
        && std::find(flavors[model].begin(), flavors[model].end(), flavor) != flavors[model].end();
    const bool noted = std::any_of(notes.begin(), notes.end(),
        [&](const std::string& n) { return n.find("registry has no flavor") != std::string::npos; });
    if (!registered && !noted)
        problems.push_back("torchtitan: flavor \"" + flavor + "\" is not in the " + model + " registry");
    const auto& p = doc["parallelism"];
    const long long tp = p.value("tensor_parallel_degree", 1LL), pp = p.value("pipeline_parallel_degree", 1LL);
    const long long cp = p.value("context_parallel_degree", 1LL), rep = p.value("data_parallel_replicate_degree", 1LL);
    const long long shard = p.value("data_parallel_shard_degree", -1LL);
    const long long world = launchWorld(launch);
    const long long rest = world / std::max(1LL, tp * pp * cp * rep);
    if ((shard == -1 ? rest : shard) * tp * pp * cp * rep != world)
        problems.push_back(
            "torchtitan: the parallel degrees do not multiply to the " + std::to_string(world) + " processes");
    const auto& t = doc["training"];
    if (t.value("seq_len", 2048LL) % (tp * 2 * cp) != 0) // parallelize_llama
        problems.push_back("torchtitan: seq_len is not a multiple of tp x 2 x cp");
    if (rep > 1 && shard == 1 && rep != world) // parallelize_llama: DDP has no other dimension
        problems.push_back("torchtitan: data_parallel_replicate_degree alone with another parallelism (DDP)");
    const long long dp = rep * (shard == -1 ? rest : shard);
    const long long local = t.value("local_batch_size", 8LL), global = t.value("global_batch_size", -1LL);
    if (global > 0 && global % (local * dp) != 0)
        problems.push_back("torchtitan: global_batch_size is not a multiple of local_batch_size x dp");
    if (pp > 1) {
        if (local % p.value("pipeline_parallel_microbatch_size", 1LL) != 0)
            problems.push_back("torchtitan: local_batch_size is not a multiple of the micro-batch");
        // the layer count: from the config's comment (n_layers=N), as the registry's model would have it
        const auto at = text.find("n_layers=");
        pipelineSplit(p, at == std::string::npos ? 0 : std::strtoll(text.c_str() + at + 9, nullptr, 10), pp, problems);
    }
}

} // namespace loom::test
