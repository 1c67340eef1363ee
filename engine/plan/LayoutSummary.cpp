#include "engine/plan/LayoutSummary.h"

#include "engine/plan/RankGrid.h"
#include "engine/plan/TextUtil.h"

#include <algorithm>
#include <cstdio>

namespace loom::plan {

std::string humanCount(double value)
{
    const char* units[] = { "", " K", " M", " B", " T" };
    int unit = 0;
    while (value >= 1000 && unit < 4) {
        value /= 1000;
        ++unit;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf,
        unit == 0         ? "%.0f%s"
            : value < 10  ? "%.2f%s"
            : value < 100 ? "%.1f%s"
                          : "%.0f%s",
        value, units[unit]);
    return buf;
}

namespace {
std::string groupText(const std::vector<std::int64_t>& members)
{
    if (members.size() > 6)
        return "{" + std::to_string(members.front()) + "," + std::to_string(members[1]) + ",..,"
            + std::to_string(members.back()) + "}";
    return "{" + text::joinInts(members, ",") + "}";
}

std::string pad(std::string s, std::size_t width)
{
    if (s.size() < width)
        s.append(width - s.size(), ' ');
    return s;
}
} // namespace

std::string describeLayout(const Layout& l, std::int64_t maxRanks)
{
    const auto& m = l.model;
    const auto& c = l.cluster;
    const auto& p = l.parallel;
    std::string out;
    auto line = [&out](const std::string& s) { out += s + "\n"; };

    line("layout   " + l.name);
    line("model    " + m.name + ": " + std::to_string(m.layers) + " layers, hidden " + std::to_string(m.hidden) + ", "
        + std::to_string(m.heads) + " heads, ffn " + std::to_string(m.ffnHidden) + ", vocab " + std::to_string(m.vocab)
        + ", seq " + std::to_string(m.seqLen) + "; " + humanCount(static_cast<double>(m.parameterCount()))
        + " parameters");
    if (m.isMoe())
        line("experts  " + std::to_string(m.experts) + " × ffn " + std::to_string(m.expertFfn()) + ", top-"
            + std::to_string(m.effectiveTopK()) + ", every " + std::to_string(m.moeLayerFreq) + " block(s) from 0 ("
            + std::to_string(m.moeLayerCount()) + " MoE blocks); "
            + humanCount(static_cast<double>(m.activeParameterCount())) + " parameters active per token; ep="
            + std::to_string(p.ep) + ": " + std::to_string(m.experts / std::max<std::int64_t>(1, p.ep))
            + " experts per device, expert groups of " + std::to_string(p.ep) + " DP ranks");
    const std::int64_t devices = c.deviceCount(l.nodes, p.worldSize());
    std::string linkText
        = std::string(toString(c.intraNode.kind)) + " " + text::number(c.intraNode.bandwidthGBs) + " GB/s in a node";
    if (c.interNode)
        linkText += ", " + std::string(toString(c.interNode->kind)) + " " + text::number(c.interNode->bandwidthGBs)
            + " GB/s per device between nodes";
    line("cluster  " + c.name + ": " + std::to_string(l.nodes) + " node(s) × "
        + (c.autoDevices() ? std::to_string(p.worldSize()) : std::to_string(c.devicesPerNode)) + " " + c.device.name
        + " (" + text::number(c.device.memoryGB) + " GB, " + text::number(c.device.peakTflops(l.precision))
        + " TFLOP/s " + std::string(toString(l.precision)) + ") = " + std::to_string(devices) + " devices; "
        + linkText);
    std::string degrees
        = "parallel tp=" + std::to_string(p.tp) + " pp=" + std::to_string(p.pp) + " dp=" + std::to_string(p.dp);
    if (p.cp > 1)
        degrees += " cp=" + std::to_string(p.cp);
    if (p.vpp > 1)
        degrees += " vpp=" + std::to_string(p.vpp);
    degrees += " (" + std::to_string(p.worldSize()) + " ranks), schedule " + std::string(toString(p.schedule))
        + ", micro-batch " + std::to_string(p.microBatch) + ", global batch " + std::to_string(p.globalBatch);
    if (p.microBatch * p.dp > 0 && p.globalBatch % (p.microBatch * p.dp) == 0)
        degrees += " → " + std::to_string(p.microBatches()) + " micro-batches per pipeline per step";
    if (p.microbatchGroup > 0)
        degrees += ", in groups of " + std::to_string(p.microbatchGroup) + " per chunk";
    line(degrees);

    const auto stages = l.stageRanges();
    std::string stageText = "stages  ";
    for (std::size_t i = 0; i < stages.size() && i < 16; ++i) {
        stageText += " " + std::to_string(i) + ": "
            + (stages[i].empty() ? "no layers"
                                 : "layers " + std::to_string(stages[i].first) + "-" + std::to_string(stages[i].last));
        if (i == 0)
            stageText += " +embedding";
        if (i + 1 == stages.size())
            stageText += " +LM head";
        stageText += ";";
    }
    if (stages.size() > 16)
        stageText += " ... " + std::to_string(stages.size() - 16) + " more";
    line(stageText);
    line("memory   zero " + std::to_string(l.memory.zero) + ", recompute " + std::string(toString(l.memory.recompute))
        + (l.memory.efficientNorm ? ", norms keep their outputs" : "") + "; precision "
        + std::string(toString(l.precision)));
    line("comm     dp_codec " + l.comm.dpCodec.toString()
        + (l.comm.dpCodec.lossy() && l.comm.errorFeedback ? " with error feedback" : "") + ", overlap "
        + (l.comm.overlap ? "on" : "off") + ", bucket " + text::number(l.comm.bucketMb) + " MB, chunk "
        + text::number(l.comm.chunkKb) + " KB, all-reduce " + std::string(toString(l.comm.allreduce)));

    if (p.worldSize() > (1 << 20))
        return out;
    const RankGrid grid = RankGrid::forLayout(l);
    line("rank grid (order " + std::string(toString(p.order)) + "; TP groups span at most "
        + std::to_string(grid.maxNodesSpanned(GroupKind::Tensor)) + " node(s), PP groups "
        + std::to_string(grid.maxNodesSpanned(GroupKind::Pipeline)) + ", DP groups "
        + std::to_string(grid.maxNodesSpanned(GroupKind::Data))
        + (p.cp > 1 ? ", CP groups " + std::to_string(grid.maxNodesSpanned(GroupKind::Context)) : std::string())
        + "):");
    line("  " + pad("rank", 7) + pad("node", 6) + pad("dev", 5) + pad("tp", 4) + pad("pp", 4) + pad("dp", 5)
        + pad("TP group", 16) + pad("PP group", 20) + "DP group");
    const std::int64_t shown = std::min(grid.size(), maxRanks);
    for (std::int64_t r = 0; r < shown; ++r) {
        RankCoord co = grid.coordOf(r);
        line("  " + pad(std::to_string(r), 7) + pad(std::to_string(grid.nodeOf(r)), 6)
            + pad(std::to_string(grid.localIndexOf(r)), 5) + pad(std::to_string(co.tp), 4)
            + pad(std::to_string(co.pp), 4) + pad(std::to_string(co.dp), 5)
            + pad(groupText(grid.groupOf(GroupKind::Tensor, r)), 16)
            + pad(groupText(grid.groupOf(GroupKind::Pipeline, r)), 20) + groupText(grid.groupOf(GroupKind::Data, r)));
    }
    if (grid.size() > shown)
        line("  ... " + std::to_string(grid.size() - shown) + " more ranks");
    if (p.cp > 1) { // the columns above keep their shape; the CP coordinate and groups follow
        line("context parallel (cp " + std::to_string(p.cp)
            + "; gradients reduced over dp·cp = " + std::to_string(p.dp * p.cp) + " ranks):");
        for (std::int64_t r = 0; r < shown; ++r)
            line("  rank " + pad(std::to_string(r), 7) + "cp " + pad(std::to_string(grid.coordOf(r).cp), 4) + "chunks "
                + pad(std::to_string(grid.coordOf(r).cp) + "," + std::to_string(2 * p.cp - 1 - grid.coordOf(r).cp), 8)
                + "CP group " + pad(groupText(grid.groupOf(GroupKind::Context, r)), 20) + "gradient group "
                + groupText(grid.gradientGroupOf(r)));
    }
    return out;
}

} // namespace loom::plan
