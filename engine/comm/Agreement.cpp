#include "engine/comm/Agreement.h"

#include "engine/comm/CommError.h"
#include "engine/comm/MpiTransport.h"

#include <map>

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

void checkAgreement(MPI_Comm comm, const CallSignature& call, const std::vector<std::int32_t>& groupRanks,
                    double timeoutSeconds, const std::string& description)
{
    // MAX of (count, -count, signature, -signature) tells every member at once whether all agree.
    const std::int64_t signature = packSignature(call);
    const auto count = static_cast<std::int64_t>(call.count);
    std::int64_t values[4] = {count, -count, signature, -signature};
    MPI_Request request;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, values, 4, MPI_INT64_T, MPI_MAX, comm, &request);
    waitFor(request, rc, timeoutSeconds, groupRanks, description, "the agreement check");
    if (values[0] == -values[1] && values[2] == -values[3])
        return;
    // Someone differs: gather every member's call so the message can name them.
    std::int64_t mine[2] = {count, signature};
    std::vector<std::int64_t> all(2 * groupRanks.size());
    rc = MPI_Iallgather(mine, 2, MPI_INT64_T, all.data(), 2, MPI_INT64_T, comm, &request);
    waitFor(request, rc, timeoutSeconds, groupRanks, description, "gathering the disagreeing calls");
    std::map<std::pair<std::int64_t, std::int64_t>, std::vector<std::int32_t>> calls;
    for (std::size_t i = 0; i < groupRanks.size(); ++i)
        calls[{all[2 * i], all[2 * i + 1]}].push_back(groupRanks[i]);
    std::string detail;
    for (const auto& [c, ranks] : calls) {
        const auto kind = static_cast<trace::EventKind>(c.second & 0xff);
        const auto type = static_cast<DType>((c.second >> 8) & 0xf);
        detail += (detail.empty() ? "" : "; ") + std::string("rank") + (ranks.size() > 1 ? "s " : " ") + rankList(ranks)
                  + " called " + std::string(trace::toString(kind)) + " with " + std::to_string(c.first) + " "
                  + std::string(toString(type)) + " elements";
    }
    throw CommError(description + ": the members disagree (" + detail
                    + "); every member must make the same call with the same count, type and options");
}

}  // namespace loom::comm
