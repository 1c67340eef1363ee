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

enum class LinkKind { NvLink, Pcie, InfiniBand, Ethernet, Shm };

std::string_view toString(LinkKind kind);
std::optional<LinkKind> linkKindFromString(std::string_view s);

// One class of link. Bandwidth is per device and per direction (what one GPU can push to its peers),
// the figure that nccl-tests' bus bandwidth is compared with.
struct LinkSpec {
    LinkKind kind = LinkKind::Shm;
    double bandwidthGBs = 0; // GB/s per device per direction
    double latencyUs = 0; // α of the α-β model, per message
    std::int64_t nicsPerNode = 0; // inter-node links only: network adapters per node

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

    bool operator==(const DeviceSpec&) const = default;
    double peakTflops(Precision p) const;
};

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

    bool operator==(const ClusterSpec&) const = default;
    bool autoDevices() const { return devicesPerNode == 0; }
    // Devices of `nodeCount` nodes; for an auto cluster, `requested`.
    std::int64_t deviceCount(std::int64_t nodeCount, std::int64_t requested) const;
};

std::optional<ClusterSpec> parseClusterSpec(
    const nlohmann::json& object, const std::string& path, Diagnostics& diagnostics);
nlohmann::ordered_json toJson(const ClusterSpec& cluster);

} // namespace loom::plan
