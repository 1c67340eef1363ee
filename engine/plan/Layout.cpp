#include "engine/plan/Layout.h"

#include "engine/plan/TextUtil.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace loom::plan {

std::string_view toString(ScheduleKind kind)
{
    return wordOf(kScheduleWords, kind);
}

ScheduleKind scheduleKindOf(std::string_view name)
{
    return valueOf(kScheduleWords, name).value_or(ScheduleKind::OneFOneB);
}

bool splitsBackward(ScheduleKind kind)
{
    return kind == ScheduleKind::ZbH1 || kind == ScheduleKind::ZbH2 || vShaped(kind);
}

bool vShaped(ScheduleKind kind)
{
    return kind == ScheduleKind::ZbV || kind == ScheduleKind::DualPipe;
}

std::int64_t scheduleChunks(ScheduleKind kind, std::int64_t vpp)
{
    return kind == ScheduleKind::Interleaved ? vpp : vShaped(kind) ? 2 : 1;
}

std::int64_t stageOfChunk(ScheduleKind kind, std::int64_t pp, std::int64_t r, std::int64_t ch)
{
    return vShaped(kind) && ch == 1 ? 2 * pp - 1 - r : ch * pp + r;
}

std::int64_t rankOfStage(ScheduleKind kind, std::int64_t pp, std::int64_t vs)
{
    pp = std::max<std::int64_t>(1, pp);
    return vShaped(kind) && vs >= pp ? 2 * pp - 1 - vs : vs % pp;
}

std::int64_t chunkOfStage(ScheduleKind kind, std::int64_t pp, std::int64_t vs)
{
    pp = std::max<std::int64_t>(1, pp);
    return vShaped(kind) ? (vs >= pp ? 1 : 0) : vs / pp;
}

std::string_view toString(Recompute recompute)
{
    return wordOf(kRecomputeWords, recompute);
}

std::string_view toString(Attention attention)
{
    return wordOf(kAttentionWords, attention);
}

std::string_view toString(RankOrder order)
{
    return wordOf(kRankOrderWords, order);
}

std::string_view toString(CommBackend backend)
{
    return wordOf(kCommBackendWords, backend);
}

bool Layout::onGpuCluster() const
{
    return cluster.intraNode.kind == LinkKind::NvLink || cluster.intraNode.kind == LinkKind::Pcie
        || cluster.intraNode.kind == LinkKind::Xgmi;
}

CommBackend Layout::commBackend() const
{
    return comm.backend ? *comm.backend : onGpuCluster() ? CommBackend::Nccl : CommBackend::Mpi;
}

std::string Codec::toString() const
{
    const std::string word(wordOf(kCodecWords, kind));
    return kind == Kind::TopK ? word + ":" + text::number(topkFraction) : word;
}

std::optional<Codec> Codec::parse(std::string_view s, std::string* why)
{
    if (const auto kind = valueOf(kCodecWords, s); kind && *kind != Kind::TopK)
        return Codec { *kind, 0 };
    if (s.starts_with("topk:")) {
        std::string_view f = s.substr(5);
        double fraction = 0;
        auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), fraction);
        if (ec != std::errc() || end != f.data() + f.size() || f.empty()) {
            if (why)
                *why = "the part after \"topk:\" must be a number, e.g. \"topk:0.01\" keeps the largest 1%";
            return std::nullopt;
        }
        if (!(fraction > 0 && fraction < 1)) {
            if (why)
                *why = "the top-k fraction must be above 0 and below 1, e.g. \"topk:0.01\" keeps the largest 1%";
            return std::nullopt;
        }
        return Codec { Kind::TopK, fraction };
    }
    if (why) {
        *why = "use one of ";
        for (const auto& w : kCodecWords)
            *why += (w.value == Kind::None ? "\"" : ", \"") + std::string(w.word)
                + (w.value == Kind::TopK ? ":<fraction in (0,1)>\"" : "\"");
    }
    return std::nullopt;
}

std::vector<StageRange> evenStageSplit(std::int64_t layers, std::int64_t count)
{
    std::vector<StageRange> out;
    if (count <= 0 || layers < count)
        return out;
    const std::int64_t base = layers / count;
    std::int64_t extra = layers % count;
    std::vector<std::int64_t> sizes(static_cast<std::size_t>(count), base);
    // Inner stages first, then the first stage, then the last.
    for (std::int64_t i = 1; i + 1 < count && extra > 0; ++i, --extra)
        ++sizes[static_cast<std::size_t>(i)];
    if (extra > 0) {
        ++sizes.front();
        --extra;
    }
    if (extra > 0)
        ++sizes.back();
    std::int64_t next = 0;
    for (auto size : sizes) {
        out.push_back({ next, next + size - 1 });
        next += size;
    }
    return out;
}

std::vector<StageRange> accountedStageSplit(std::int64_t layers, std::int64_t count)
{
    std::vector<StageRange> out;
    if (count < 2 || layers < 0 || (layers + 2) % count != 0)
        return out;
    const std::int64_t unit = (layers + 2) / count;
    std::int64_t next = 0;
    for (std::int64_t i = 0; i < count; ++i) {
        const std::int64_t size = unit - (i == 0 || i == count - 1 ? 1 : 0);
        out.push_back({ next, next + size - 1 });
        next += size;
    }
    return out;
}

std::vector<StageRange> Layout::stageRanges() const
{
    if (!parallel.stages.empty())
        return parallel.stages;
    return evenStageSplit(model.layers, virtualStages());
}

} // namespace loom::plan
