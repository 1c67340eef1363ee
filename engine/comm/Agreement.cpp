#include "engine/comm/Agreement.h"

#include "engine/comm/CommError.h"
#include "engine/comm/MpiTransport.h"

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

void waitFor(MPI_Request& request, int rc, double timeoutSeconds, const std::vector<std::int32_t>& ranks,
             const std::string& description, const char* what)
{
    const bool done = rc == MPI_SUCCESS && pollUntil(
                                               [&] {
                                                   int flag = 0;
                                                   rc = MPI_Test(&request, &flag, MPI_STATUS_IGNORE);
                                                   return flag != 0 || rc != MPI_SUCCESS;
                                               },
                                               std::chrono::duration<double>(timeoutSeconds));
    if (rc != MPI_SUCCESS)
        throw CommError(description + ": " + what + " failed: " + mpiErrorText(rc));
    if (!done)
        throw CommError(description + " timed out after " + std::to_string(static_cast<int>(timeoutSeconds))
                        + " s: not every member of " + rankList(ranks)
                        + " reached it; check that they are alive and call the same collectives in the same order"
                          " (LOOM_COMM_TIMEOUT_S sets the limit)");
}

}  // namespace

std::int64_t optionsFingerprint(const CollectiveOptions& o)
{
    std::uint64_t h = 0;
    h = mixBits(h, o.chunkBytes);
    h = mixBits(h, o.codecBlock);
    std::uint64_t fraction = 0;
    std::memcpy(&fraction, &o.codec.topkFraction, sizeof fraction);
    h = mixBits(h, fraction);
    return static_cast<std::int64_t>(h >> 1);  // non-negative, so -x cannot overflow
}

void checkAgreement(MPI_Comm comm, const CallSignature& call, const std::vector<std::int32_t>& groupRanks,
                    double timeoutSeconds, const std::string& description)
{
    // MAX of (count, -count, signature, -signature, options, -options) tells every member at once whether
    // all agree. The buffers live on the heap and are released, not freed, after a timeout: the all-reduce
    // may still complete into them once the missing member arrives.
    const std::int64_t signature = packSignature(call);
    const auto count = static_cast<std::int64_t>(call.count);
    auto values = std::make_unique<std::int64_t[]>(6);
    const std::int64_t init[6] = {count, -count, signature, -signature, call.options, -call.options};
    std::copy(init, init + 6, values.get());
    MPI_Request request;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, values.get(), 6, MPI_INT64_T, MPI_MAX, comm, &request);
    try {
        waitFor(request, rc, timeoutSeconds, groupRanks, description, "the agreement check");
    } catch (...) {
        (void)values.release();
        throw;
    }
    if (values[0] == -values[1] && values[2] == -values[3] && values[4] == -values[5])
        return;
    // Someone differs: gather every member's call so the message can name them.
    auto mine = std::make_unique<std::int64_t[]>(3);
    mine[0] = count;
    mine[1] = signature;
    mine[2] = call.options;
    auto all = std::make_unique<std::int64_t[]>(3 * groupRanks.size());
    rc = MPI_Iallgather(mine.get(), 3, MPI_INT64_T, all.get(), 3, MPI_INT64_T, comm, &request);
    try {
        waitFor(request, rc, timeoutSeconds, groupRanks, description, "gathering the disagreeing calls");
    } catch (...) {
        (void)mine.release();
        (void)all.release();
        throw;
    }
    std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, std::vector<std::int32_t>> calls;
    for (std::size_t i = 0; i < groupRanks.size(); ++i)
        calls[{all[3 * i], all[3 * i + 1], all[3 * i + 2]}].push_back(groupRanks[i]);
    const bool onlyOptionsDiffer = values[0] == -values[1] && values[2] == -values[3];
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

}  // namespace loom::comm
