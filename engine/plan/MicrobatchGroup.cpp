#include "engine/plan/MicrobatchGroup.h"

#include "engine/plan/TextUtil.h"

#include <vector>

namespace loom::plan {

namespace {

using std::to_string;

// The groups that work with p and m, for the message: divisors of m from p on, at most eight of them.
std::string goodGroups(std::int64_t pp, std::int64_t m)
{
    std::vector<std::int64_t> good;
    for (auto n : text::divisors(m))
        if (n >= pp && good.size() < 8)
            good.push_back(n);
    return text::joinInts(good);
}

} // namespace

std::string microbatchGroupProblem(std::int64_t pp, std::int64_t m, std::int64_t n)
{
    const std::string field = "parallel.microbatch_group=" + to_string(n);
    const std::string range = "use a value from pp=" + to_string(pp) + " to " + to_string(m)
        + " that divides the micro-batches or leaves at least pp, e.g. one of {" + goodGroups(pp, m) + "}";
    if (n < pp)
        return field + " is smaller than pp=" + to_string(pp)
            + ": a micro-batch reaches rank 0's next chunk only after all pp stages, so with fewer micro-batches "
              "per group the ranks wait on each other for ever (Megatron-LM refuses it too); "
            + range;
    if (n > m)
        return field + " is more than the " + to_string(m)
            + " micro-batches per step (global_batch / (micro_batch·dp)); " + range;
    if (m % n != 0 && m % n < pp)
        return field + " leaves a last group of " + to_string(m % n) + " micro-batches (" + to_string(m) + " mod "
            + to_string(n) + "), fewer than pp=" + to_string(pp)
            + ", which stalls the pipeline as a group smaller than pp would (Megatron-LM refuses it too); " + range;
    return {};
}

void validateMicrobatchGroup(const Layout& l, const Diagnostics& known, Diagnostics& d)
{
    const auto& p = l.parallel;
    if (p.microbatchGroup <= 0 || known.hasErrorAt("parallel.microbatch_group"))
        return;
    if (p.schedule != ScheduleKind::Interleaved) {
        d.warning("parallel.microbatch_group",
            "parallel.microbatch_group=" + to_string(p.microbatchGroup)
                + " only shapes schedule \"interleaved\"; with \"" + std::string(toString(p.schedule))
                + "\" it changes nothing (Megatron-LM ignores it too without virtual stages): remove it or use "
                  "schedule \"interleaved\"");
        return;
    }
    for (const char* f : { "parallel.pp", "parallel.dp", "parallel.micro_batch", "parallel.global_batch" })
        if (known.hasErrorAt(f) || d.hasErrorAt(f))
            return;
    if (p.globalBatch % (p.microBatch * p.dp) != 0)
        return; // the batch rule already says what to fix
    const std::string problem = microbatchGroupProblem(p.pp, p.microBatches(), p.microbatchGroup);
    if (!problem.empty())
        d.error("parallel.microbatch_group", problem);
}

} // namespace loom::plan
