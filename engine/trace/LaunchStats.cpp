#include "engine/trace/LaunchStats.h"

#include "engine/trace/TraceFlows.h"

#include <algorithm>
#include <map>

namespace loom::trace {

LaunchStats computeLaunchStats(const std::vector<TraceEvent>& events)
{
    struct Sums {
        double launch = 0, device = 0;
        std::vector<std::int64_t> delays;
    };
    std::map<std::int32_t, Sums> ranks;
    // (rank, stream) -> (time, +1 launch / -1 start of its work)
    std::map<std::pair<std::int32_t, std::int32_t>, std::vector<std::pair<std::int64_t, int>>> changes;
    for (const Flow& f : launchFlows(events)) {
        const TraceEvent &launch = events[f.from], &work = events[f.to];
        Sums& s = ranks[launch.rank];
        s.launch += double(launch.durationNs());
        s.device += double(work.durationNs());
        s.delays.push_back(work.startNs - launch.endNs);
        auto& c = changes[{ work.rank, work.stream }];
        c.emplace_back(launch.startNs, +1);
        c.emplace_back(work.startNs, -1);
    }
    LaunchStats out;
    for (auto& [rank, s] : ranks) {
        RankLaunchStats r;
        r.rank = rank;
        r.pairs = std::int64_t(s.delays.size());
        const double n = double(s.delays.size());
        r.meanLaunchNs = s.launch / n;
        r.meanDeviceNs = s.device / n;
        double sum = 0;
        for (auto d : s.delays)
            sum += double(d);
        r.meanDelayNs = sum / n;
        std::sort(s.delays.begin(), s.delays.end());
        const std::size_t mid = s.delays.size() / 2;
        r.medianDelayNs = s.delays.size() % 2 ? double(s.delays[mid]) : 0.5 * double(s.delays[mid - 1] + s.delays[mid]);
        r.maxDelayNs = s.delays.back();
        out.perRank.push_back(r);
    }
    for (auto& [key, c] : changes) {
        // By time, a launch before a start at the same nanosecond (+1 sorts after -1, hence the reversed sign).
        std::sort(c.begin(), c.end(),
            [](const auto& a, const auto& b) { return a.first != b.first ? a.first < b.first : a.second > b.second; });
        StreamQueueLength q;
        q.rank = key.first;
        q.stream = key.second;
        q.changes = std::int64_t(c.size());
        std::int64_t length = 0;
        double sum = 0;
        for (const auto& [t, d] : c) {
            length += d;
            sum += double(length);
            q.maxLength = std::max(q.maxLength, length);
        }
        q.meanLength = sum / double(c.size());
        out.queues.push_back(q);
    }
    return out;
}

} // namespace loom::trace
