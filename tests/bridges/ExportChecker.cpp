#include "ExportChecker.h"
#include "engine/bridges/ExportDetail.h"

#include <QDir>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>

namespace loom::test {

namespace {

nlohmann::json readJson(const std::string& path)
{
    QFile f(QString::fromStdString(path));
    if (!f.open(QIODevice::ReadOnly))
        qFatal("cannot read %s", path.c_str());
    return nlohmann::json::parse(f.readAll().toStdString());
}

bool isInt(const std::string& s)
{
    char* end = nullptr;
    std::strtoll(s.c_str(), &end, 10);
    return !s.empty() && *end == '\0';
}

bool isFloat(const std::string& s)
{
    char* end = nullptr;
    std::strtod(s.c_str(), &end);
    return !s.empty() && *end == '\0';
}

long long toInt(const std::string& s, long long fallback)
{
    return isInt(s) ? std::strtoll(s.c_str(), nullptr, 10) : fallback;
}

// The value of `name` in a torchrun option list ("--nproc-per-node 8").
std::string optionValue(const std::vector<std::string>& options, const std::string& name)
{
    for (std::size_t i = 0; i + 1 < options.size(); ++i)
        if (options[i] == name)
            return options[i + 1];
    return {};
}

void writeFile(const QString& path, const std::string& text, bool executable)
{
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate))
        qFatal("cannot write %s", qPrintable(path));
    f.write(text.data(), qint64(text.size()));
    f.close();
    if (executable)
        f.setPermissions(f.permissions() | QFileDevice::ExeOwner);
}

// Fake launchers: torchrun records its arguments (NUL-separated) and CUDA_DEVICE_MAX_CONNECTIONS; srun runs
// its command; scontrol names one node.
void writeFakes(const QString& bin)
{
    writeFile(bin + "/torchrun",
        "#!/bin/bash\nprintf '%s\\0' \"$@\" > \"$LOOM_FAKE_ARGV\"\n"
        "printf '%s' \"${CUDA_DEVICE_MAX_CONNECTIONS-<unset>}\" > \"$LOOM_FAKE_ENV\"\n",
        true);
    writeFile(bin + "/srun", "#!/bin/bash\nexec \"$@\"\n", true);
    writeFile(bin + "/scontrol", "#!/bin/bash\necho node0\n", true);
}

} // namespace

long long launchWorld(const Launch& launch)
{
    return toInt(optionValue(launch.torchrun, "--nproc-per-node"), 1)
        * toInt(optionValue(launch.torchrun, "--nnodes"), 1);
}

ExportChecker::ExportChecker(const std::string& dir)
{
    const auto flagsOf = [](const nlohmann::json& j) {
        Flags flags;
        for (const auto& [name, f] : j.at("flags").items()) {
            Flag flag;
            flag.takesValue = f.at("takes_value").get<bool>();
            if (f.at("nargs").is_string())
                flag.nargs = f.at("nargs").get<std::string>();
            else if (f.at("nargs").is_number())
                flag.nargs = std::to_string(f.at("nargs").get<int>());
            if (f.at("type").is_string())
                flag.type = f.at("type").get<std::string>();
            if (f.at("choices").is_array())
                for (const auto& c : f.at("choices"))
                    flag.choices.push_back(c.is_string() ? c.get<std::string>() : c.dump());
            flag.dest = f.at("dest").get<std::string>();
            flags[name] = flag;
        }
        return flags;
    };
    for (const auto& v : plan::frameworkVersions(plan::ExportTarget::Megatron)) {
        const std::string file = v == "main" ? "main" : v + ".0";
        m_megatron[v] = flagsOf(readJson(dir + "/megatron-lm/" + file + ".json"));
    }
    m_megatronDeepSpeed = flagsOf(readJson(dir + "/megatron-deepspeed/main.json"));
    const auto ds = readJson(dir + "/deepspeed/main.json");
    for (const auto& [key, value] : ds.items())
        if (value.is_array())
            m_deepSpeed[key] = value.get<std::vector<std::string>>();
    for (const auto& flag : m_deepSpeed.at("launcher_flags")) // deepspeed.add_config_arguments
        m_megatronDeepSpeed[flag]
            = Flag { flag.ends_with("config"), "", flag.ends_with("config") ? "str" : "", {}, flag.substr(2) };
    for (const char* v : { "v0.2.0", "v0.2.2" })
        m_torchTitan.push_back(readJson(dir + "/torchtitan/" + v + ".json").dump());
}

Launch ExportChecker::launch(const std::vector<plan::ExportFile>& files, const std::vector<std::string>& extraArgs)
{
    Launch result;
    QTemporaryDir dir;
    const QString bin = dir.path() + "/bin", work = dir.path() + "/work";
    QDir().mkpath(bin);
    QDir().mkpath(work);
    writeFakes(bin);
    QString script, nodes = "1";
    for (const auto& f : files) {
        const QString name = QString::fromStdString(f.name).section('/', -1);
        writeFile(work + "/" + name, f.text, f.executable);
        if (f.executable)
            script = work + "/" + name;
        const auto at = f.text.find("#SBATCH --nodes="); // what Slurm would set SLURM_NNODES to
        if (f.executable && at != std::string::npos)
            nodes = QString::fromStdString(f.text.substr(at + 16, f.text.find('\n', at) - at - 16));
    }
    if (script.isEmpty()) {
        result.error = "the export has no launch script";
        return result;
    }
    QProcess syntax;
    syntax.start("bash", { "-n", script });
    syntax.waitForFinished(60000);
    if (syntax.exitCode() != 0) {
        result.error = "bash -n: " + syntax.readAllStandardError().toStdString();
        return result;
    }
    auto env = QProcessEnvironment::systemEnvironment();
    env.remove("CUDA_DEVICE_MAX_CONNECTIONS");
    env.insert("PATH", bin + ":" + env.value("PATH"));
    env.insert("LOOM_FAKE_ARGV", dir.path() + "/argv");
    env.insert("LOOM_FAKE_ENV", dir.path() + "/env");
    for (const char* v : { "SLURM_JOB_NODELIST=node0", "SLURM_JOB_ID=1", "NODE_RANK=0", "MASTER_ADDR=127.0.0.1",
             "MEGATRON_LM=/m", "MEGATRON_DEEPSPEED=/m" })
        env.insert(QString::fromLatin1(v).section('=', 0, 0), QString::fromLatin1(v).section('=', 1));
    env.insert("TORCHTITAN", work);
    env.insert("SLURM_NNODES", nodes);
    QProcess run;
    run.setProcessEnvironment(env);
    run.setWorkingDirectory(work);
    QStringList args { script };
    for (const auto& a : extraArgs)
        args << QString::fromStdString(a);
    run.start("bash", args);
    run.waitForFinished(60000);
    QFile argv(dir.path() + "/argv"), seen(dir.path() + "/env");
    if (run.exitCode() != 0 || !argv.open(QIODevice::ReadOnly) || !seen.open(QIODevice::ReadOnly)) {
        result.error = "the script did not start torchrun (exit " + std::to_string(run.exitCode())
            + "): " + run.readAllStandardError().toStdString();
        return result;
    }
    result.ran = true;
    result.maxConnections = seen.readAll().toStdString();
    std::vector<std::string> words;
    for (const auto& w : argv.readAll().split('\0'))
        words.push_back(w.toStdString());
    if (!words.empty() && words.back().empty())
        words.pop_back();
    std::size_t program = 0;
    while (program < words.size() && !words[program].ends_with(".py") && words[program] != "-m")
        ++program;
    if (program == words.size()) {
        result.error = "torchrun was given no program";
        return result;
    }
    result.torchrun.assign(words.begin(), words.begin() + std::ptrdiff_t(program));
    const std::size_t first = program + (words[program] == "-m" ? 2 : 1);
    result.args.assign(words.begin() + std::ptrdiff_t(std::min(first, words.size())), words.end());
    return result;
}

ExportChecker::Parsed ExportChecker::parseArgs(const Flags& flags, const std::vector<std::string>& args,
    std::vector<std::string>& problems, const std::string& framework) const
{
    Parsed parsed;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const auto it = flags.find(args[i]);
        if (it == flags.end()) {
            problems.push_back(framework + " has no argument " + args[i]);
            continue;
        }
        const Flag& f = it->second;
        std::vector<std::string> values;
        if (f.takesValue) {
            const bool many = f.nargs == "+" || f.nargs == "*";
            while (i + 1 < args.size() && !(args[i + 1].starts_with("--") && flags.count(args[i + 1]))) {
                values.push_back(args[++i]);
                if (!many)
                    break;
            }
            if (values.empty() && f.nargs != "*" && f.nargs != "?")
                problems.push_back(framework + ": " + args[i] + " expects a value");
        }
        for (const auto& v : values) {
            if ((f.type == "int" && !isInt(v)) || (f.type == "float" && !isFloat(v)))
                problems.push_back(framework + ": " + it->first + " takes " + f.type + ", not \"" + v + "\"");
            // an enum's choices read "AttnBackend.flash"; its type converts "flash" to it
            const bool choice = std::any_of(f.choices.begin(), f.choices.end(),
                [&](const std::string& c) { return c == v || c.ends_with("." + v); });
            if (!f.choices.empty() && !choice)
                problems.push_back(framework + ": " + it->first + " \"" + v + "\" is not one of its choices");
        }
        parsed[f.dest] = values.empty() ? "" : values.front();
    }
    return parsed;
}

std::vector<std::string> ExportChecker::check(plan::ExportTarget target, const std::vector<plan::ExportFile>& files,
    const std::vector<std::string>& notes, const std::string& version) const
{
    std::vector<std::string> problems;
    const Launch run = launch(files, {});
    if (!run.ran)
        return { run.error };
    if (target == plan::ExportTarget::Megatron) {
        const std::string v = version.empty() ? plan::defaultFrameworkVersion(target) : version;
        const auto a = parseArgs(m_megatron.at(v), run.args, problems, "Megatron-LM " + v);
        megatronRules(a, run, plan::exporting::megatronMinor(v), problems);
        // The data source: a --data-path of the caller's replaces the mock data, as both together are refused.
        const Launch withData = launch(files, { "--data-path", "/data/x" });
        if (!withData.ran || std::count(withData.args.begin(), withData.args.end(), "--mock-data") > 0)
            problems.push_back("Megatron-LM: with --data-path given the script still passes --mock-data "
                               "(validate_args: a single data source)");
    } else if (target == plan::ExportTarget::DeepSpeed) {
        const auto a = parseArgs(m_megatronDeepSpeed, run.args, problems, "Megatron-DeepSpeed");
        // Megatron-DeepSpeed's validate_args: sequence parallelism (kept only with tp > 1) on CUDA needs
        // CUDA_DEVICE_MAX_CONNECTIONS=1; grouped-query attention needs heads a multiple of the KV heads.
        if (a.count("sequence_parallel")
            && std::strtoll(a.count("tensor_model_parallel_size") ? a.at("tensor_model_parallel_size").c_str() : "1",
                   nullptr, 10)
                > 1
            && run.maxConnections != "1")
            problems.push_back("Megatron-DeepSpeed: sequence parallelism needs CUDA_DEVICE_MAX_CONNECTIONS=1");
        if (a.count("num_key_value_heads")
            && std::strtoll(a.at("num_attention_heads").c_str(), nullptr, 10)
                    % std::strtoll(a.at("num_key_value_heads").c_str(), nullptr, 10)
                != 0)
            problems.push_back("Megatron-DeepSpeed: heads are not a multiple of --num-key-value-heads");
        if (!a.count("deepspeed") || !a.count("deepspeed_config"))
            problems.push_back("Megatron-DeepSpeed: the launch does not pass --deepspeed --deepspeed_config");
        deepSpeedConfig(files.at(0).text, a, run, problems);
    } else {
        if (!run.args.empty() && run.args.front() != "--job.config_file")
            problems.push_back("torchtitan: the launch passes " + run.args.front() + " before --job.config_file");
        torchTitanConfig(files.at(0).text, run, notes, problems);
    }
    return problems;
}

} // namespace loom::test
