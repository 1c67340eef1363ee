#pragma once

#include "engine/plan/Diagnostics.h"
#include "engine/plan/Precision.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom::plan {

// Xgmi: AMD Infinity Fabric, a direct link between every pair of a node's GPUs (MI300X), no switch.
enum class LinkKind { NvLink, Pcie, InfiniBand, Ethernet, Shm, Xgmi };

std::string_view toString(LinkKind kind);
std::optional<LinkKind> linkKindFromString(std::string_view s);

// One class of link. Bandwidth is per device and per direction (what one GPU can push to its peers),
// the figure that nccl-tests' bus bandwidth is compared with.
struct LinkSpec {
    LinkKind kind = LinkKind::Shm;
    double bandwidthGBs = 0; // GB/s per device per direction
    double latencyUs = 0; // α of the α-β model, per message
    std::int64_t nicsPerNode = 0; // inter-node links only: network adapters per node
    // Intra-node links only: the switch reduces in the network (NVLink SHARP, NVSwitch of H100 and later),
    // which NCCL's NVLS algorithm uses for all-reduces inside a node. Profile key "nvls".
    bool nvls = false;

    bool operator==(const LinkSpec&) const = default;
};

struct DeviceSpec {
    std::string name;
    double memoryGB = 0;
    double memoryBandwidthGBs = 0;
    double peakTflopsFp32 = 0;
    double peakTflopsFp16 = 0;
    double peakTflopsBf16 = 0;
    // The achievable fraction of peak on a layer's GEMMs: max · w/(w + halfWidth) · r/(r + halfRows) for
    // thinnest dimension w and r rows (see CostModel.h). Profile key "gemm_efficiency".
    double gemmMax = 0.8;
    double gemmHalfWidth = 256;
    double gemmHalfRows = 128;
    // Dense FP8 tensor-core peaks (profile keys peak_tflops.fp8 and peak_tflops.mxfp8; 0: not supported).
    double peakTflopsFp8 = 0;
    double peakTflopsMxfp8 = 0;
    // The ceiling FP8 GEMMs reach of the FP8 peak (gemm_efficiency.fp8_max; absent: max): FP8 kernels fall
    // further short of their peak than 16-bit ones (scaling, narrower tiles per byte moved).
    double gemmFp8Max = 0;
    // The fraction of the 16-bit peak a flash-attention kernel reaches over its forward and backward
    // (gemm_efficiency.flash; absent: the GEMM curve). FlashAttention-2 reaches 50-73 % of an A100's peak
    // forward and less backward; FlashAttention-3 and cuDNN's kernels about 75 % forward and 50 % backward
    // on an H100 (docs/profiles.md).
    double flashEfficiency = 0;
    double fp8GemmMax() const { return gemmFp8Max > 0 ? gemmFp8Max : gemmMax; }

    bool operator==(const DeviceSpec&) const = default;
    double peakTflops(Precision p) const;
    // The peak the FP8 GEMMs of `recipe` run at (MXFP8 needs microscaling tensor cores); 0 where unsupported.
    double fp8PeakTflops(Fp8Recipe recipe) const;
};

// How Loom starts runs on a cluster (profile key "launch"; absent: on this machine with mpirun). Every
// string here reaches the processes as one argument of its own (quoted word by word where a remote shell
// is unavoidable), never as shell text.
struct LaunchSpec {
    std::string method
        = "local"; // "local", "ssh" (mpirun on a head node) or "slurm" (sbatch, or srun in an allocation)
    std::string headNode; // ssh: the host Loom connects to ("user@host" allowed); empty: hosts[0]
    std::vector<std::string> sshOptions; // ssh: extra ssh arguments, e.g. ["-p", "2222", "-i", "/home/me/.ssh/lab"]
    std::string engine; // loom-train's path on the cluster; empty: Loom's own engine path
    std::string mpirun = "mpirun"; // mpirun's path on the head node (ssh) or in the job (slurm)
    std::vector<std::string> mpirunOptions; // extra mpirun arguments, e.g. ["--mca", "btl_tcp_if_include", "eth0"]
    std::string
        runDir; // ssh: where run folders go on the cluster (relative: to the head node's home); empty: "loom-runs"
    std::string partition; // slurm: --partition (empty: the default one)
    std::string timeLimit; // slurm: --time, e.g. "01:30:00" (empty: the partition's limit)
    std::int64_t gpusPerNode = 0; // slurm: --gpus-per-node (0: none asked for)
    std::vector<std::string> sbatchOptions; // slurm: extra sbatch arguments, e.g. ["--account", "proj42"]

    bool operator==(const LaunchSpec&) const = default;
    bool isDefault() const { return *this == LaunchSpec {}; }
};

// Slurm's own syntax for what a profile may put after #SBATCH --partition= and --time=: a partition name
// (letters, digits, '_', '.', '-', not starting with '-'; a comma list of them) and a time in sbatch's forms
// (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, UNLIMITED or INFINITE). Anything else could add an
// option to the script's header, so it is refused rather than quoted.
bool isSlurmPartition(std::string_view value);
bool isSlurmTimeLimit(std::string_view value);

// A homogeneous cluster: `nodes` nodes of `devicesPerNode` identical devices. The "local" cluster has
// devicesPerNode == 0, meaning "as many devices (processes) as the layout asks for", on one node.
struct ClusterSpec {
    std::string name;
    std::string description;
    std::int64_t nodes = 1; // default node count for layouts that do not say
    std::int64_t devicesPerNode = 0; // 0: auto (local cluster)
    DeviceSpec device;
    LinkSpec intraNode;
    std::optional<LinkSpec> interNode; // absent: a single machine that cannot span nodes
    std::vector<std::string> hosts; // optional host names, one per node, for launching
    LaunchSpec launch;

    bool operator==(const ClusterSpec&) const = default;
    bool autoDevices() const { return devicesPerNode == 0; }
    // Devices of `nodeCount` nodes; for an auto cluster, `requested`.
    std::int64_t deviceCount(std::int64_t nodeCount, std::int64_t requested) const;
};

std::optional<ClusterSpec> parseClusterSpec(
    const nlohmann::json& object, const std::string& path, Diagnostics& diagnostics);
nlohmann::ordered_json toJson(const ClusterSpec& cluster);

} // namespace loom::plan
