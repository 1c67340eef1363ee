#include "engine/bridges/Export.h"
#include "engine/bridges/ExportDetail.h"

#include <algorithm>
#include <cstdio>

namespace loom::plan {

std::string_view toString(ExportTarget target)
{
    switch (target) {
    case ExportTarget::Megatron:
        return "megatron";
    case ExportTarget::DeepSpeed:
        return "deepspeed";
    case ExportTarget::TorchTitan:
        return "torchtitan";
    }
    return "megatron";
}

std::optional<ExportTarget> exportTargetFromString(std::string_view text)
{
    for (auto t : { ExportTarget::Megatron, ExportTarget::DeepSpeed, ExportTarget::TorchTitan })
        if (text == toString(t))
            return t;
    return std::nullopt;
}

std::vector<std::string> frameworkVersions(ExportTarget target)
{
    switch (target) {
    case ExportTarget::Megatron:
        return { "core_v0.12", "core_v0.13", "core_v0.14", "core_v0.15", "core_v0.16", "core_v0.17", "core_v0.18",
            "core_v0.19", "main" };
    case ExportTarget::DeepSpeed:
        return { "main" };
    case ExportTarget::TorchTitan:
        return { "v0.2" };
    }
    return {};
}

std::string defaultFrameworkVersion(ExportTarget target)
{
    return target == ExportTarget::Megatron ? "core_v0.19" : frameworkVersions(target).back();
}

ExportResult exportLayout(
    const Layout& layout, ExportTarget target, const std::string& primaryName, const ExportOptions& options)
{
    ExportResult result;
    const auto versions = frameworkVersions(target);
    const std::string version
        = options.frameworkVersion.empty() ? defaultFrameworkVersion(target) : options.frameworkVersion;
    if (std::find(versions.begin(), versions.end(), version) == versions.end()) {
        std::string list;
        for (const auto& v : versions)
            list += (list.empty() ? "" : ", ") + v;
        if (target == ExportTarget::TorchTitan && version == "main")
            result.refusals.push_back("framework version \"main\": torchtitan's main branch no longer reads TOML job "
                                      "configs (its configs are Python modules); Loom writes the TOML of v0.2.0 to "
                                      "v0.2.2 (\"v0.2\")");
        else
            result.refusals.push_back("framework version \"" + exporting::commentText(version)
                + "\": " + std::string(toString(target)) + " exports are for " + list);
        return result;
    }
    switch (target) {
    case ExportTarget::Megatron:
        result = exporting::exportMegatron(layout, primaryName, version);
        break;
    case ExportTarget::DeepSpeed:
        result = exporting::exportDeepSpeed(layout, primaryName, version);
        break;
    case ExportTarget::TorchTitan:
        result = exporting::exportTorchTitan(layout, primaryName, version);
        break;
    }
    if (!result.ok())
        result.files.clear();
    return result;
}

namespace exporting {

std::string shellWord(const std::string& word)
{
    const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
            || std::string_view("-_.,:/=@%+").find(c) != std::string_view::npos;
    });
    if (plain)
        return word;
    // Control characters (newline, DEL) as bash's $'\xNN', so that no line of the script holds part of a word.
    if (std::any_of(
            word.begin(), word.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
        std::string out = "$'";
        for (char c : word) {
            const auto u = static_cast<unsigned char>(c);
            if (u < 0x20 || u == 0x7f || c == '\'' || c == '\\') {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\x%02x", unsigned(u));
                out += buf;
            } else {
                out += c;
            }
        }
        return out + "'";
    }
    std::string out = "'";
    for (char c : word) {
        if (c == '\'')
            out += "'\\''";
        else
            out += c;
    }
    return out + "'";
}

std::string commentText(const std::string& text)
{
    std::string out;
    for (char c : text)
        out += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? ' ' : c;
    return out;
}

std::string argLines(const std::vector<Arg>& args)
{
    std::string out;
    for (const auto& [flag, value] : args)
        out += "    " + flag + (value.empty() ? "" : " " + shellWord(value)) + "\n";
    return out;
}

std::string number(double value)
{
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.10g", value);
    return buf;
}

std::string companionName(const std::string& primary, const std::string& primarySuffix, const std::string& suffix)
{
    if (primary.size() > primarySuffix.size() && primary.ends_with(primarySuffix))
        return primary.substr(0, primary.size() - primarySuffix.size()) + suffix;
    const auto slash = primary.find_last_of('/');
    const auto dot = primary.find_last_of('.');
    const bool hasExtension = dot != std::string::npos && (slash == std::string::npos || dot > slash + 1);
    return (hasExtension ? primary.substr(0, dot) : primary) + suffix;
}

namespace {

// The sbatch header can hold an option only as plain words.
bool headerSafe(const std::string& option)
{
    return !option.empty() && shellWord(option) == option;
}

std::string programName(ExportTarget target)
{
    switch (target) {
    case ExportTarget::Megatron:
        return "Megatron-LM";
    case ExportTarget::DeepSpeed:
        return "DeepSpeed (Megatron-DeepSpeed)";
    case ExportTarget::TorchTitan:
        return "torchtitan";
    }
    return "";
}

} // namespace

ExportFile launchScript(const Layout& layout, ExportTarget target, const std::string& program,
    const std::vector<Arg>& args, const std::string& preamble, ExportResult& result, const std::string& name,
    const std::string& afterArgs)
{
    const std::int64_t world = layout.parallel.worldSize();
    const std::int64_t nodes = layout.cluster.autoDevices() ? 1 : std::max<std::int64_t>(layout.nodes, 1);
    if (world % nodes != 0)
        result.refusals.push_back("the launch: " + std::to_string(world) + " processes do not divide evenly over "
            + std::to_string(nodes) + " nodes, and torchrun starts the same number on every node; use a node count "
            + "that divides tp·pp·dp");
    const std::int64_t perNode = world / nodes;
    const auto& launch = layout.cluster.launch;
    const bool slurm = launch.method == "slurm";

    std::string s = "#!/bin/bash\n";
    if (slurm) {
        s += "#SBATCH --job-name=" + std::string(shellWord(layout.name) == layout.name ? layout.name : "loom") + "\n";
        s += "#SBATCH --nodes=" + std::to_string(nodes) + "\n#SBATCH --ntasks-per-node=1\n";
        const std::int64_t gpus = launch.gpusPerNode > 0 ? launch.gpusPerNode : perNode;
        s += "#SBATCH --gpus-per-node=" + std::to_string(gpus) + "\n";
        for (const auto& [value, flag] :
            { std::pair { launch.partition, "--partition" }, { launch.timeLimit, "--time" } }) {
            if (value.empty())
                continue;
            if (!headerSafe(value))
                result.refusals.push_back(std::string("the launch: the cluster profile's slurm ") + flag + " \""
                    + commentText(value) + "\" has characters an #SBATCH line cannot hold");
            s += std::string("#SBATCH ") + flag + "=" + value + "\n";
        }
        // The policy of loom run: a layout file may not pass options to sbatch (they can run commands);
        // only a cluster profile of the user's own store may.
        if (!launch.sbatchOptions.empty() && layout.clusterProfile.empty())
            result.refusals.push_back("cluster.launch.sbatch_options: a layout file may not pass options to sbatch "
                                      "(they can run commands, e.g. --wrap), as loom run refuses them too; put them in "
                                      "a cluster profile in your store (loom profiles import FILE) and name it in the "
                                      "layout (\"cluster\": \"NAME\")");
        for (const auto& option : launch.sbatchOptions)
            if (!headerSafe(option))
                result.refusals.push_back("the launch: the cluster profile's sbatch option \"" + commentText(option)
                    + "\" has characters an #SBATCH line cannot hold");
        if (!launch.sbatchOptions.empty()) {
            s += "#SBATCH";
            for (const auto& option : launch.sbatchOptions)
                s += " " + option;
            s += "\n";
        }
    }
    s += "# " + programName(target) + " launch of the Loom layout \"" + commentText(layout.name)
        + "\", written by loom export.\n";
    s += "# " + std::to_string(nodes) + (nodes == 1 ? " node" : " nodes") + " x " + std::to_string(perNode)
        + " processes = " + std::to_string(world) + ": tp=" + std::to_string(layout.parallel.tp)
        + " pp=" + std::to_string(layout.parallel.pp) + " dp=" + std::to_string(layout.parallel.dp) + "\n";
    for (const auto& note : result.notes)
        s += "# note: " + commentText(note) + "\n";
    s += "set -euo pipefail\n";
    if (layout.comm.allreduce == AllreduceAlgorithm::Ring)
        s += "export NCCL_ALGO=Ring  # the layout asks for ring all-reduce\n";
    s += preamble;
    s += "ARGS=(\n" + argLines(args) + ")\n" + afterArgs;
    if (slurm) {
        s += "# srun starts one torchrun per node; torchrun starts the node's processes.\n";
        s += "MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\n";
        s += "srun torchrun --nnodes \"$SLURM_NNODES\" --nproc-per-node " + std::to_string(perNode)
            + " --rdzv-id \"$SLURM_JOB_ID\" --rdzv-backend c10d --rdzv-endpoint \"$MASTER_ADDR:${MASTER_PORT:-29500}\" "
              "\\\n"
            + "    " + program + " \"${ARGS[@]}\" \"$@\"\n";
    } else if (nodes == 1) {
        s += "exec torchrun --standalone --nproc-per-node " + std::to_string(perNode) + " " + program
            + " \"${ARGS[@]}\" \"$@\"\n";
    } else {
        s += "# Run this script on every node with NODE_RANK set to the node's index (0 .. " + std::to_string(nodes - 1)
            + ").\n";
        const auto& hosts = layout.cluster.hosts;
        if (!hosts.empty()) {
            s += "# hosts:";
            for (const auto& h : hosts)
                s += " " + commentText(h);
            s += "\n";
            s += "MASTER_ADDR=${MASTER_ADDR:-" + shellWord(hosts.front()) + "}\n";
        } else {
            // No apostrophes inside ${...:?...}: bash 5.2 pairs them up as quotes there.
            s += ": \"${MASTER_ADDR:?set MASTER_ADDR to the address of node 0}\"\n";
        }
        s += "exec torchrun --nnodes " + std::to_string(nodes) + " --nproc-per-node " + std::to_string(perNode)
            + " --node-rank \"${NODE_RANK:?set NODE_RANK to the index of this node}\" --master-addr \"$MASTER_ADDR\""
            + " --master-port \"${MASTER_PORT:-29500}\" \\\n    " + program + " \"${ARGS[@]}\" \"$@\"\n";
    }
    ExportFile file;
    file.name = name;
    file.text = std::move(s);
    file.executable = true;
    return file;
}

} // namespace exporting
} // namespace loom::plan
