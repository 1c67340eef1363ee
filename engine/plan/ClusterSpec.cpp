#include "engine/plan/ClusterSpec.h"

#include "engine/plan/JsonFields.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>

namespace loom::plan {

using nlohmann::json;

namespace {
const std::vector<std::string> kLinkNames = { "nvlink", "pcie", "infiniband", "ethernet", "shm", "xgmi" };

std::optional<LinkSpec> parseLink(
    ObjectReader& parentReader, std::string_view key, bool interNode, Diagnostics& diagnostics)
{
    const json* v = parentReader.find(key);
    const std::string path = parentReader.pathOf(key);
    if (!v)
        return std::nullopt;
    if (!v->is_object()) {
        parentReader.reportWrongType(key, *v, "an object with link, bandwidth_gbs and latency_us");
        return std::nullopt;
    }
    Diagnostics local;
    ObjectReader r(*v, path, local);
    LinkSpec link;
    auto kind = r.choice("link", Presence::Required, kLinkNames);
    auto bandwidth = r.number("bandwidth_gbs", Presence::Required, 0, 1e6, true);
    auto latency = r.number("latency_us", Presence::Required, 0, 1e6);
    std::optional<std::int64_t> nics;
    if (interNode)
        nics = r.integer("nics_per_node", Presence::Optional, 1, 1024);
    std::optional<bool> nvls;
    if (!interNode)
        nvls = r.boolean("nvls", Presence::Optional);
    if (interNode)
        r.warnUnknown({ "link", "bandwidth_gbs", "latency_us", "nics_per_node" });
    else
        r.warnUnknown({ "link", "bandwidth_gbs", "latency_us", "nvls" });
    bool ok = !local.hasErrors();
    diagnostics.append(local);
    if (!ok)
        return std::nullopt;
    link.kind = *linkKindFromString(*kind);
    link.bandwidthGBs = *bandwidth;
    link.latencyUs = *latency;
    link.nicsPerNode = nics.value_or(interNode ? 1 : 0);
    link.nvls = nvls.value_or(false);
    return link;
}

std::optional<std::vector<std::string>> stringList(
    ObjectReader& r, std::string_view key, std::string_view example, Diagnostics& diagnostics)
{
    std::vector<std::string> out;
    const json* v = r.find(key);
    if (!v)
        return out;
    if (!v->is_array()) {
        r.reportWrongType(key, *v, std::string("a list of strings, e.g. ") + std::string(example));
        return std::nullopt;
    }
    bool ok = true;
    for (std::size_t i = 0; i < v->size(); ++i) {
        const json& e = (*v)[i];
        const std::string p = r.pathOf(key) + "[" + std::to_string(i) + "]";
        if (!e.is_string() || e.get_ref<const std::string&>().size() > 4096) {
            diagnostics.error(p, p + "=" + jsonSnippet(e) + " is not a string; write each argument in quotes");
            ok = false;
        } else {
            out.push_back(e.get<std::string>());
        }
    }
    return ok ? std::optional(out) : std::nullopt;
}

std::optional<LaunchSpec> parseLaunch(ObjectReader& parent, Diagnostics& diagnostics)
{
    const json* v = parent.find("launch");
    if (!v)
        return LaunchSpec {};
    if (!v->is_object()) {
        parent.reportWrongType("launch", *v, "an object with method (local, ssh or slurm) and its settings");
        return std::nullopt;
    }
    Diagnostics local;
    ObjectReader r(*v, parent.pathOf("launch"), local);
    LaunchSpec l;
    auto method = r.choice("method", Presence::Required, { "local", "ssh", "slurm" });
    auto head = r.string("head_node", Presence::Optional, 255);
    auto ssh = stringList(r, "ssh_options", "[\"-p\", \"2222\"]", local);
    auto engine = r.string("engine", Presence::Optional, 4096);
    auto mpirun = r.string("mpirun", Presence::Optional, 4096);
    auto mpirunOptions = stringList(r, "mpirun_options", "[\"--mca\", \"btl_tcp_if_include\", \"eth0\"]", local);
    auto runDir = r.string("run_dir", Presence::Optional, 4096);
    auto partition = r.string("partition", Presence::Optional, 255);
    auto timeLimit = r.string("time_limit", Presence::Optional, 64);
    auto gpus = r.integer("gpus_per_node", Presence::Optional, 0, 1024);
    auto sbatch = stringList(r, "sbatch_options", "[\"--account\", \"proj42\"]", local);
    r.warnUnknown({ "method", "head_node", "ssh_options", "engine", "mpirun", "mpirun_options", "run_dir", "partition",
        "time_limit", "gpus_per_node", "sbatch_options" });
    if (head && !head->empty() && head->front() == '-')
        local.error(r.pathOf("head_node"),
            r.pathOf("head_node") + "=\"" + *head + "\" cannot start with '-'; write a host name or user@host");
    if (partition && !partition->empty() && !isSlurmPartition(*partition))
        local.error(r.pathOf("partition"),
            r.pathOf("partition") + "=" + jsonSnippet(json(*partition))
                + " is not a Slurm partition name; write letters, digits, '_', '.' or '-' (a comma between "
                  "several), e.g. \"gpu\"");
    if (timeLimit && !timeLimit->empty() && !isSlurmTimeLimit(*timeLimit))
        local.error(r.pathOf("time_limit"),
            r.pathOf("time_limit") + "=" + jsonSnippet(json(*timeLimit))
                + " is not a Slurm time; write minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or "
                  "UNLIMITED, e.g. \"01:30:00\"");
    if (mpirun && mpirun->empty())
        local.error(r.pathOf("mpirun"), r.pathOf("mpirun") + " is empty; write mpirun's path, or leave the key out");
    bool ok = !local.hasErrors();
    diagnostics.append(local);
    if (!ok)
        return std::nullopt;
    l.method = *method;
    l.headNode = head.value_or("");
    l.sshOptions = *ssh;
    l.engine = engine.value_or("");
    l.mpirun = mpirun.value_or("mpirun");
    l.mpirunOptions = *mpirunOptions;
    l.runDir = runDir.value_or("");
    l.partition = partition.value_or("");
    l.timeLimit = timeLimit.value_or("");
    l.gpusPerNode = gpus.value_or(0);
    l.sbatchOptions = *sbatch;
    return l;
}

nlohmann::ordered_json linkToJson(const LinkSpec& link, bool interNode)
{
    nlohmann::ordered_json j
        = { { "link", toString(link.kind) }, { "bandwidth_gbs", link.bandwidthGBs }, { "latency_us", link.latencyUs } };
    if (interNode)
        j["nics_per_node"] = link.nicsPerNode;
    if (link.nvls)
        j["nvls"] = true;
    return j;
}
} // namespace

bool isSlurmPartition(std::string_view value)
{
    if (value.empty() || value.size() > 255)
        return false;
    std::size_t start = 0;
    while (start <= value.size()) {
        const std::size_t comma = std::min(value.find(',', start), value.size());
        const std::string_view name = value.substr(start, comma - start);
        if (name.empty() || name.front() == '-')
            return false;
        for (const char c : name)
            if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-')
                return false;
        start = comma + 1;
    }
    return true;
}

namespace {
// Fields of 1 to 8 digits separated by `seps` (a ':' or '-' each), in the given count.
bool digitFields(std::string_view v, std::string_view seps)
{
    std::size_t at = 0;
    for (std::size_t field = 0; field <= seps.size(); ++field) {
        std::size_t n = 0;
        while (at < v.size() && std::isdigit(static_cast<unsigned char>(v[at])) && n < 9)
            ++at, ++n;
        if (n == 0 || n > 8)
            return false;
        if (field == seps.size())
            return at == v.size();
        if (at >= v.size() || v[at] != seps[field])
            return false;
        ++at;
    }
    return false;
}
} // namespace

bool isSlurmTimeLimit(std::string_view value)
{
    std::string upper(value.substr(0, 16));
    for (char& c : upper)
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (value.size() <= 16 && (upper == "UNLIMITED" || upper == "INFINITE"))
        return true;
    // sbatch's forms: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
    for (const std::string_view seps : { "", ":", "::", "-", "-:", "-::" })
        if (digitFields(value, seps))
            return true;
    return false;
}

std::string_view toString(LinkKind kind)
{
    switch (kind) {
    case LinkKind::NvLink:
        return "nvlink";
    case LinkKind::Pcie:
        return "pcie";
    case LinkKind::InfiniBand:
        return "infiniband";
    case LinkKind::Ethernet:
        return "ethernet";
    case LinkKind::Shm:
        return "shm";
    case LinkKind::Xgmi:
        return "xgmi";
    }
    return "shm";
}

std::optional<LinkKind> linkKindFromString(std::string_view s)
{
    for (LinkKind k :
        { LinkKind::NvLink, LinkKind::Pcie, LinkKind::InfiniBand, LinkKind::Ethernet, LinkKind::Shm, LinkKind::Xgmi })
        if (toString(k) == s)
            return k;
    return std::nullopt;
}

double DeviceSpec::peakTflops(Precision p) const
{
    switch (p) {
    case Precision::Fp32:
        return peakTflopsFp32;
    case Precision::Fp16:
        return peakTflopsFp16;
    case Precision::Bf16:
        return peakTflopsBf16;
    }
    return peakTflopsFp32;
}

double DeviceSpec::fp8PeakTflops(Fp8Recipe recipe) const
{
    switch (recipe) {
    case Fp8Recipe::None:
        return 0;
    case Fp8Recipe::Mxfp8:
        return peakTflopsMxfp8;
    case Fp8Recipe::Delayed:
    case Fp8Recipe::Current:
    case Fp8Recipe::Blockwise:
        return peakTflopsFp8;
    }
    return 0;
}

std::int64_t ClusterSpec::deviceCount(std::int64_t nodeCount, std::int64_t requested) const
{
    return autoDevices() ? requested : nodeCount * devicesPerNode;
}

std::optional<ClusterSpec> parseClusterSpec(const json& object, const std::string& path, Diagnostics& diagnostics)
{
    if (!object.is_object()) {
        diagnostics.error(path,
            path + " is " + jsonTypeName(object)
                + "; write a cluster profile name in quotes or an object with nodes, "
                  "devices_per_node, device, intra_node and inter_node");
        return std::nullopt;
    }
    Diagnostics local;
    ObjectReader r(object, path, local, "the cluster");
    ClusterSpec c;
    auto name = r.string("name", Presence::Required, 128);
    auto description = r.string("description", Presence::Optional, 4096);
    auto nodes = r.integer("nodes", Presence::Optional, 1, 1 << 20);
    std::optional<std::int64_t> devices;
    if (const json* d = r.find("devices_per_node"); d && d->is_string()) {
        if (*d != "auto")
            local.error(r.pathOf("devices_per_node"),
                r.pathOf("devices_per_node") + "=" + jsonSnippet(*d)
                    + " is not known; write a whole number from 1 to 1024, or \"auto\" for a machine "
                      "whose processes are its devices");
        else
            devices = 0;
    } else {
        devices = r.integer("devices_per_node", Presence::Required, 1, 1024);
    }

    // device
    std::optional<DeviceSpec> device;
    if (const json* d = r.find("device"); !d) {
        r.reportMissing("device", "an object with name, memory_gb, memory_bandwidth_gbs and peak_tflops");
    } else if (!d->is_object()) {
        r.reportWrongType("device", *d, "an object with name, memory_gb, memory_bandwidth_gbs and peak_tflops");
    } else {
        ObjectReader dr(*d, r.pathOf("device"), local);
        DeviceSpec dev;
        auto dname = dr.string("name", Presence::Required, 128);
        auto mem = dr.number("memory_gb", Presence::Required, 0, 1e6, true);
        auto bw = dr.number("memory_bandwidth_gbs", Presence::Required, 0, 1e7, true);
        std::optional<double> fp32, fp16, bf16, fp8, mxfp8;
        if (const json* p = dr.find("peak_tflops"); !p) {
            dr.reportMissing("peak_tflops", "an object with fp32, fp16 and bf16 TFLOP/s");
        } else if (!p->is_object()) {
            dr.reportWrongType("peak_tflops", *p, "an object with fp32, fp16 and bf16 TFLOP/s");
        } else {
            ObjectReader pr(*p, dr.pathOf("peak_tflops"), local);
            fp32 = pr.number("fp32", Presence::Required, 0, 1e6, true);
            fp16 = pr.number("fp16", Presence::Required, 0, 1e6, true);
            bf16 = pr.number("bf16", Presence::Required, 0, 1e6, true);
            fp8 = pr.number("fp8", Presence::Optional, 0, 1e6, true);
            mxfp8 = pr.number("mxfp8", Presence::Optional, 0, 1e6, true);
            pr.warnUnknown({ "fp32", "fp16", "bf16", "fp8", "mxfp8" });
        }
        std::optional<double> gMax, gWidth, gRows, gFp8, gFlash;
        if (const json* g = dr.find("gemm_efficiency"); g && !g->is_object()) {
            dr.reportWrongType("gemm_efficiency", *g, "an object with max, half_width and half_rows");
        } else if (g) {
            ObjectReader gr(*g, dr.pathOf("gemm_efficiency"), local);
            gMax = gr.number("max", Presence::Required, 0, 1, true);
            gWidth = gr.number("half_width", Presence::Required, 0, 1e6);
            gRows = gr.number("half_rows", Presence::Required, 0, 1e6);
            gFp8 = gr.number("fp8_max", Presence::Optional, 0, 1, true);
            gFlash = gr.number("flash", Presence::Optional, 0, 1, true);
            gr.warnUnknown({ "max", "half_width", "half_rows", "fp8_max", "flash" });
        }
        dr.warnUnknown({ "name", "memory_gb", "memory_bandwidth_gbs", "peak_tflops", "gemm_efficiency" });
        if (dname && mem && bw && fp32 && fp16 && bf16) {
            dev = { *dname, *mem, *bw, *fp32, *fp16, *bf16 };
            dev.peakTflopsFp8 = fp8.value_or(0);
            dev.peakTflopsMxfp8 = mxfp8.value_or(0);
            if (gMax && gWidth && gRows) {
                dev.gemmMax = *gMax;
                dev.gemmHalfWidth = *gWidth;
                dev.gemmHalfRows = *gRows;
                dev.gemmFp8Max = gFp8.value_or(0);
                dev.flashEfficiency = gFlash.value_or(0);
            }
            device = dev;
        }
    }

    std::optional<LinkSpec> intra;
    if (!r.find("intra_node"))
        r.reportMissing("intra_node", "an object with link, bandwidth_gbs and latency_us");
    else
        intra = parseLink(r, "intra_node", false, local);
    std::optional<LinkSpec> inter = parseLink(r, "inter_node", true, local);

    std::vector<std::string> hosts;
    if (const json* h = r.find("hosts")) {
        if (!h->is_array()) {
            r.reportWrongType("hosts", *h, "a list of host names, e.g. [\"node01\", \"node02\"]");
        } else {
            for (std::size_t i = 0; i < h->size(); ++i) {
                const json& e = (*h)[i];
                std::string p = r.pathOf("hosts") + "[" + std::to_string(i) + "]";
                if (!e.is_string() || e.get_ref<const std::string&>().empty()
                    || e.get_ref<const std::string&>().size() > 255)
                    local.error(p, p + "=" + jsonSnippet(e) + " is not a host name; write a non-empty string");
                else
                    hosts.push_back(e.get<std::string>());
            }
        }
    }
    std::optional<LaunchSpec> launch = parseLaunch(r, local);
    r.warnUnknown({ "name", "description", "nodes", "devices_per_node", "device", "intra_node", "inter_node", "hosts",
        "launch", "source", "loom_profile", "kind" });

    if (nodes && *nodes > 1 && !r.find("inter_node") && !local.hasErrorAt(r.pathOf("inter_node")))
        local.error(r.pathOf("nodes"),
            r.pathOf("nodes") + "=" + std::to_string(*nodes)
                + " needs an inter_node link; add \"inter_node\" or set nodes to 1");

    bool ok = !local.hasErrors();
    diagnostics.append(local);
    if (!ok)
        return std::nullopt;
    c.name = *name;
    if (description)
        c.description = *description;
    c.nodes = nodes.value_or(1);
    c.devicesPerNode = *devices;
    c.device = *device;
    c.intraNode = *intra;
    c.interNode = inter;
    c.hosts = std::move(hosts);
    c.launch = *launch;
    return c;
}

nlohmann::ordered_json toJson(const ClusterSpec& c)
{
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    j["name"] = c.name;
    if (!c.description.empty())
        j["description"] = c.description;
    j["nodes"] = c.nodes;
    if (c.autoDevices())
        j["devices_per_node"] = "auto";
    else
        j["devices_per_node"] = c.devicesPerNode;
    j["device"] = { { "name", c.device.name }, { "memory_gb", c.device.memoryGB },
        { "memory_bandwidth_gbs", c.device.memoryBandwidthGBs },
        { "peak_tflops",
            { { "fp32", c.device.peakTflopsFp32 }, { "fp16", c.device.peakTflopsFp16 },
                { "bf16", c.device.peakTflopsBf16 } } },
        { "gemm_efficiency",
            { { "max", c.device.gemmMax }, { "half_width", c.device.gemmHalfWidth },
                { "half_rows", c.device.gemmHalfRows } } } };
    if (c.device.peakTflopsFp8 > 0)
        j["device"]["peak_tflops"]["fp8"] = c.device.peakTflopsFp8;
    if (c.device.flashEfficiency > 0)
        j["device"]["gemm_efficiency"]["flash"] = c.device.flashEfficiency;
    if (c.device.gemmFp8Max > 0)
        j["device"]["gemm_efficiency"]["fp8_max"] = c.device.gemmFp8Max;
    if (c.device.peakTflopsMxfp8 > 0)
        j["device"]["peak_tflops"]["mxfp8"] = c.device.peakTflopsMxfp8;
    j["intra_node"] = linkToJson(c.intraNode, false);
    if (c.interNode)
        j["inter_node"] = linkToJson(*c.interNode, true);
    if (!c.hosts.empty())
        j["hosts"] = c.hosts;
    if (!c.launch.isDefault()) {
        const LaunchSpec& l = c.launch;
        nlohmann::ordered_json L = { { "method", l.method } };
        auto put = [&L](const char* key, const std::string& v) {
            if (!v.empty())
                L[key] = v;
        };
        auto putList = [&L](const char* key, const std::vector<std::string>& v) {
            if (!v.empty())
                L[key] = v;
        };
        put("head_node", l.headNode);
        putList("ssh_options", l.sshOptions);
        put("engine", l.engine);
        if (l.mpirun != "mpirun")
            L["mpirun"] = l.mpirun;
        putList("mpirun_options", l.mpirunOptions);
        put("run_dir", l.runDir);
        put("partition", l.partition);
        put("time_limit", l.timeLimit);
        if (l.gpusPerNode > 0)
            L["gpus_per_node"] = l.gpusPerNode;
        putList("sbatch_options", l.sbatchOptions);
        j["launch"] = L;
    }
    return j;
}

} // namespace loom::plan
