// TimelineData::fold: which boxes a row draws at a zoom, events under two pixels merged into pixel runs.
// Qt-free so that the folding is tested apart from the painting (TimelineView only draws the boxes).
#include "views/TimelineData.h"

#include <algorithm>

namespace loom::views {

void TimelineData::fold(const Row& row, std::int64_t t0, std::int64_t t1, double left, double right,
    const Hidden& hidden, std::vector<Box>& out) const
{
    out.clear();
    if (t1 <= t0 || right <= left)
        return;
    const auto [first, last] = visible(row, t0, t1);
    const double scale = (right - left) / double(t1 - t0);
    const auto px = [&](std::int64_t t) { return left + double(t - t0) * scale; };
    const auto isHidden = [&](std::uint32_t pos) { return hidden && hidden(m_events[row.events[pos]]); };
    Box run;
    bool open = false;
    const auto flush = [&] {
        if (open)
            out.push_back(run);
        open = false;
    };
    // When every event of the row is under two pixels wide, whole pixel runs can be skipped unseen.
    const bool allTiny = double(row.maxDuration) * scale < 2;
    std::int64_t nextJump = INT64_MIN;
    for (std::size_t i = first; i < last; ++i) {
        const double x0 = std::max(left, px(row.start[i]));
        const double x1 = std::min(right, px(row.end[i]));
        if (x1 < left || x0 > right)
            continue;
        if (x1 - x0 >= 2) {
            if (isHidden(std::uint32_t(i)))
                continue;
            flush();
            out.push_back(Box { x0, x1, std::uint32_t(i), std::uint32_t(i), false });
            continue;
        }
        // Tiny events: extend the current pixel run instead of drawing each.
        if (open && x0 <= run.x1 + 1) {
            run.x1 = std::max(run.x1, x1);
            run.last = std::uint32_t(i);
        } else {
            if (isHidden(std::uint32_t(i)))
                continue;
            flush();
            run = Box { x0, x1, std::uint32_t(i), std::uint32_t(i), true };
            open = true;
        }
        // Skip, by binary search, the later events that start within the run's next two pixels: they can only
        // extend it when all are tiny, or when the running maximum of ends proves none sticks out. One search
        // per two pixels at most.
        if (row.start[i] < nextJump)
            continue;
        const auto tNext = t0 + std::int64_t((run.x1 + 2 - left) / scale);
        nextJump = tNext;
        const auto j = std::size_t(
            std::lower_bound(row.start.begin() + std::ptrdiff_t(i + 1), row.start.begin() + std::ptrdiff_t(last), tNext)
            - row.start.begin());
        if (j > i + 1 && (allTiny || row.maxEnd[j - 1] <= tNext)) {
            run.x1 = std::max(run.x1, std::min(right, px(row.maxEnd[j - 1])));
            i = j - 1;
            run.last = std::uint32_t(i);
        }
    }
    flush();
}

} // namespace loom::views
