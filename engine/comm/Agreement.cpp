#include "engine/comm/Agreement.h"

#include "engine/comm/CommError.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <tuple>

namespace loom::comm {

std::string rankList(const std::vector<std::int32_t>& ranks)
{
    std::string s = "[";
    for (std::size_t i = 0; i < ranks.size(); ++i) {
        if (i == 8 && ranks.size() > 10) {
            s += ", ... " + std::to_string(ranks.size() - 9) + " more, " + std::to_string(ranks.back());
            break;
        }
        s += (i ? ", " : "") + std::to_string(ranks[i]);
    }
    return s + "]";
}

namespace {

std::int64_t packSignature(const CallSignature& c)
{
    return static_cast<std::int64_t>(c.kind) | static_cast<std::int64_t>(c.type) << 8
        | static_cast<std::int64_t>(c.op) << 12 | static_cast<std::int64_t>(c.algorithm) << 16
        | static_cast<std::int64_t>(c.codec) << 20 | static_cast<std::int64_t>(c.root) << 24;
}

std::uint64_t mixBits(std::uint64_t h, std::uint64_t v)
{
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    return h;
}

} // namespace

std::int64_t optionsFingerprint(const CollectiveOptions& o)
{
    std::uint64_t h = 0;
    h = mixBits(h, o.chunkBytes);
    h = mixBits(h, o.codecBlock);
    std::uint64_t fraction = 0;
    std::memcpy(&fraction, &o.codec.topkFraction, sizeof fraction);
    h = mixBits(h, fraction);
    return static_cast<std::int64_t>(h >> 1); // non-negative, so -x cannot overflow
}

void checkAgreement(Transport& host, const CallSignature& call, const std::vector<std::int32_t>& groupRanks,
    const std::string& description)
{
    // The records live in the transport's scratch memory, which outlives a failed wait: a late message
    // from a slow member may still land there.
    constexpr int kSlot = 9;
    const int n = host.size(), me = host.rank();
    auto* all = static_cast<std::int64_t*>(host.scratch(3 * sizeof(std::int64_t) * static_cast<std::size_t>(n), kSlot));
    const std::int64_t signature = packSignature(call);
    const auto count = static_cast<std::int64_t>(call.count);
    std::int64_t* mine = all + 3 * me;
    mine[0] = count;
    mine[1] = signature;
    mine[2] = call.options;
    host.setContext(description);
    for (int p = 0; p < n; ++p)
        if (p != me)
            host.irecv(all + 3 * p, 3 * sizeof(std::int64_t), p);
    for (int p = 0; p < n; ++p)
        if (p != me)
            host.isend(mine, 3 * sizeof(std::int64_t), p);
    host.waitAll();
    bool agree = true, sameCall = true;
    for (int p = 0; p < n; ++p) {
        sameCall = sameCall && all[3 * p] == count && all[3 * p + 1] == signature;
        agree = agree && sameCall && all[3 * p + 2] == call.options;
    }
    if (agree)
        return;
    std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, std::vector<std::int32_t>> calls;
    for (std::size_t i = 0; i < groupRanks.size(); ++i)
        calls[{ all[3 * i], all[3 * i + 1], all[3 * i + 2] }].push_back(groupRanks[i]);
    const bool onlyOptionsDiffer = sameCall;
    std::string detail;
    int variant = 0;
    for (const auto& [c, ranks] : calls) {
        const auto kind = static_cast<trace::EventKind>(std::get<1>(c) & 0xff);
        const auto type = static_cast<DType>((std::get<1>(c) >> 8) & 0xf);
        detail += (detail.empty() ? "" : "; ") + std::string("rank") + (ranks.size() > 1 ? "s " : " ") + rankList(ranks)
            + " called " + std::string(trace::toString(kind)) + " with " + std::to_string(std::get<0>(c)) + " "
            + std::string(toString(type)) + " elements";
        if (onlyOptionsDiffer)
            detail += " and options #" + std::to_string(++variant);
    }
    if (onlyOptionsDiffer)
        detail += " (chunk size, codec block or top-k fraction differ)";
    throw CommError(description + ": the members disagree (" + detail
        + "); every member must make the same call with the same count, type and options");
}

} // namespace loom::comm
