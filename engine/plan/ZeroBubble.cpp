#include "engine/plan/ZeroBubble.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <queue>
#include <stdexcept>

namespace loom::plan {

namespace {

using Kind = PipelineOp::Kind;
constexpr double kUnknown = std::numeric_limits<double>::infinity();

constexpr auto op = &PipelineOp::of;

// ZB-H1, ZB-H2 and ZB-V (Qi et al. 2024) by list scheduling of F, B and W with each op's time (ScheduleCosts;
// unit times when none are given, the paper's handcrafted schedules). The ranks' ops are simulated in time
// order: a rank that is free runs an op whose inputs are there; when none is, it runs its oldest pending W
// under the W rule (`fit` of the W ends before any F or B could start, and more than `keep` W's are pending),
// else it waits for the first F or B that can.
//
// - ZB-H1 and ZB-H2 keep 1F1B's order of F and B with `warmup` forwards first; rank r defers at most `defer`
//   W's (one more runs at once after its B). ZB-H1: 1F1B's warm-up (p - r - 1) and r deferred W's, so rank r
//   holds at most p micro-batches (1F1B's first rank's peak; the last stage defers the most, as in the
//   paper's figure). ZB-H2: 2(p - r) - 2 warm-up forwards and 2r deferred, a bubble near zero for a peak of
//   2p - 1.
// - ZB-V (and torchtitan's ZBVZeroBubble) on the V's two chunks per rank: the oldest ready B (the previous
//   stage waits for it), else a ready F (into the V's first chunk only while the rank holds fewer than 2p
//   chunk-micro-batches from F to W with room for the way back of those in it, or of the first 1 to 4 of
//   them, chunks of half a stage: 1F1B's first rank's peak; the way back within the cap), else a W as above. When no
//   rank can go on, a pending W runs whatever the rule; only when none is pending do F's pass their caps, for one op.
//
// The simulation runs in time order: at each moment the free ranks decide in rank order (again until none
// starts anything, so a rank sees what the others started), then time moves to the next op's end or input.
// An F or B whose producer has not started has only a lower bound on when it can start (the producer's rank
// free, plus the producer's time and the hand-off), which is what a W must end before. Every op starts after
// its inputs end, so the op lists are dependency-ordered and run without deadlock at any op times.
class TimedScheduler {
public:
    // fit: how much of a W must fit in the gap before the next F or B could start for the W to run there
    // (0: a W runs whenever nothing else can, the unit-time rule); keep: the pending W's a rank holds back
    // for later gaps while it has an F or B to wait for; reserve (ZB-V): for how many of the micro-batches in
    // the V's first chunk the cap keeps room for the way back (0: all of them, the unit-time rule).
    TimedScheduler(ScheduleKind kind, std::int64_t p, std::int64_t m, const ScheduleCosts& costs, double fit,
        std::int64_t keep = 0, std::int64_t reserve = 0)
        : m_p(p)
        , m_m(m)
        , m_chunks(kind == ScheduleKind::ZbV ? 2 : 1)
        , m_costs(costs)
        , m_fit(fit)
        , m_keep(keep)
        , m_reserve(reserve)
        , m_fEnd(static_cast<std::size_t>(p * m_chunks), std::vector<double>(static_cast<std::size_t>(m), kUnknown))
        , m_bEnd(m_fEnd)
        , m_ranks(static_cast<std::size_t>(p))
    {
        if (m_costs.stage.size() != static_cast<std::size_t>(p * m_chunks))
            m_costs.stage.assign(static_cast<std::size_t>(p * m_chunks), OpTimes {});
        for (std::int64_t r = 0; r < p && m_chunks == 1; ++r)
            fixOrder(m_ranks[size(r)], r, kind == ScheduleKind::ZbH2);
    }

    std::vector<std::vector<PipelineOp>> run()
    {
        std::int64_t left = 3 * m_m * m_chunks * m_p;
        double now = 0;
        bool lift = false; // no rank can go on: F's pass their caps until one does
        std::vector<std::int64_t> idle; // the free ranks, in rank order
        for (std::int64_t r = 0; r < m_p; ++r)
            idle.push_back(r);
        // The busy ranks by when they are free.
        std::priority_queue<std::pair<double, std::int64_t>, std::vector<std::pair<double, std::int64_t>>,
            std::greater<>>
            busy;
        const auto started = [&](std::size_t i) { // idle[i] started an op: busy unless it took no time
            --left;
            const std::int64_t r = idle[i];
            if (m_ranks[size(r)].freeAt <= now)
                return false;
            busy.emplace(m_ranks[size(r)].freeAt, r);
            idle.erase(idle.begin() + static_cast<std::ptrdiff_t>(i));
            return true;
        };
        while (left > 0) {
            bool freed = false;
            for (; !busy.empty() && busy.top().first <= now; busy.pop(), freed = true) {
                idle.push_back(busy.top().second);
                touch(busy.top().second);
            }
            if (freed)
                std::sort(idle.begin(), idle.end());
            const bool any = decideFree(idle, now, lift, started);
            if (any && lift) {
                lift = false;
                touchAll();
            }
            if (const double next = nextEvent(idle, busy.empty() ? kUnknown : busy.top().first); next < kUnknown)
                now = next;
            else if (any)
                continue;
            else if (const std::size_t i = firstWithWeight(idle); i < idle.size() && runWeight(idle[i], now)) {
                touch(idle[i]);
                started(i);
            } else if (m_chunks == 2 && !lift) {
                lift = true;
                touchAll();
            } else
                throw std::logic_error("zero-bubble list scheduling made no progress");
        }
        std::vector<std::vector<PipelineOp>> out;
        for (Rank& rank : m_ranks) {
            m_makespan = std::max(m_makespan, rank.freeAt);
            out.push_back(std::move(rank.ops));
        }
        return out;
    }
    // When the simulated step's last op ends (after run).
    double makespan() const { return m_makespan; }

private:
    // When an op can start: `at` once its producers have run, else `bound`, the earliest it could.
    struct Ready {
        double at = kUnknown, bound = kUnknown;
        bool known() const { return at < kUnknown; }
    };
    struct Candidate {
        PipelineOp op;
        Ready ready;
    };
    // At most a B and an F of each chunk.
    struct Candidates {
        std::array<Candidate, 4> at;
        std::size_t n = 0;
        const Candidate* begin() const { return at.data(); }
        const Candidate* end() const { return at.data() + n; }
        bool empty() const { return n == 0; }
    };
    struct Rank {
        double freeAt = 0;
        double waitUntil = kUnknown; // when waiting: the first known start of its F's and B's
        std::vector<PipelineOp> ops;
        std::deque<std::pair<std::int64_t, std::int64_t>> pendingW; // (micro-batch, chunk), oldest first
        std::vector<PipelineOp> order; // ZB-H: 1F1B's order of F and B
        std::size_t next = 0;
        std::int64_t defer = 0;
        std::int64_t toB = 0, toW = 0; // ZB-V: chunk-micro-batches from F to B and to W
        std::int64_t nextF[2] = { 0, 0 }, nextB[2] = { 0, 0 };
    };

    static std::size_t size(std::int64_t i) { return static_cast<std::size_t>(i); }

    // The ranks whose decision may have changed since they last decided (m_dirty): a rank's decision depends
    // only on the time, its own state and its neighbours' (its ops' producers run on r - 1, r or r + 1), and
    // as time passes alone a waiting rank stays waiting until one of its inputs arrives (waitUntil) or a
    // neighbour frees or starts something. The others would decide to wait again, so they are not asked.
    void touch(std::int64_t r)
    {
        for (std::int64_t n = std::max<std::int64_t>(0, r - 1); n <= std::min(m_p - 1, r + 1); ++n)
            m_dirty[size(n)] = 1;
    }
    void touchAll() { std::fill(m_dirty.begin(), m_dirty.end(), 1); }

    // The free ranks decide at `now`, in rank order, until a pass starts nothing (a rank sees what those
    // before it started); `started(i)` takes idle[i] off the free ranks when its op takes time. True when
    // any started something.
    template <class Started>
    bool decideFree(const std::vector<std::int64_t>& idle, double now, bool lift, Started&& started)
    {
        bool any = false;
        for (const std::int64_t r : idle)
            if (m_ranks[size(r)].waitUntil <= now)
                m_dirty[size(r)] = 1;
        for (bool again = true; again;) {
            again = false;
            for (std::size_t i = 0; i < idle.size();) {
                const std::int64_t r = idle[i];
                if (!m_dirty[size(r)] || (m_dirty[size(r)] = 0, !decide(r, now, lift))) {
                    ++i;
                    continue;
                }
                again = any = true;
                touch(r);
                i += started(i) ? 0 : 1;
            }
        }
        return any;
    }
    std::int64_t stageOf(std::int64_t r, std::int64_t c) const { return stageOfChunk(ScheduleKind::ZbV, m_p, r, c); }
    std::int64_t rankOf(std::int64_t vs) const { return rankOfStage(ScheduleKind::ZbV, m_p, vs); }
    std::int64_t last() const { return m_p * m_chunks - 1; }

    void fixOrder(Rank& k, std::int64_t r, bool h2) const
    {
        const std::int64_t warmup = std::min(h2 ? 2 * (m_p - r) - 2 : m_p - r - 1, m_m);
        std::int64_t f = 0, b = 0;
        for (; f < warmup; ++f)
            k.order.push_back(op(Kind::Forward, f, 0));
        for (; f < m_m; ++f, ++b) {
            k.order.push_back(op(Kind::Forward, f, 0));
            k.order.push_back(op(Kind::Backward, b, 0));
        }
        for (; b < m_m; ++b)
            k.order.push_back(op(Kind::Backward, b, 0));
        k.defer = h2 ? 2 * r : r;
    }

    double duration(Kind kind, std::int64_t vs) const
    {
        const OpTimes& t = m_costs.stage[size(vs)];
        return kind == Kind::Forward ? t.forward : kind == Kind::Backward ? t.backward : t.weight;
    }

    // The input an op of virtual stage vs takes from the producer at pvs: its end (and the hand-off when it
    // crosses ranks), or, not started, a bound: its rank free (at `now` at the earliest) and its time.
    Ready input(Kind kind, std::int64_t pvs, std::int64_t mb, std::int64_t vs, double now) const
    {
        const double end = (kind == Kind::Forward ? m_fEnd : m_bEnd)[size(pvs)][size(mb)];
        const double hop = rankOf(pvs) != rankOf(vs) ? m_costs.transfer : 0.0;
        if (end < kUnknown)
            return { end + hop, end + hop };
        return { kUnknown, std::max(now, m_ranks[size(rankOf(pvs))].freeAt) + duration(kind, pvs) + hop };
    }

    Ready readiness(PipelineOp o, std::int64_t r, double now) const
    {
        const std::int64_t vs = stageOf(r, o.chunk), mb = o.microBatch;
        if (o.kind == Kind::Forward)
            return vs == 0 ? Ready { 0, 0 } : input(Kind::Forward, vs - 1, mb, vs, now);
        const double own = m_fEnd[size(vs)][size(mb)];
        if (vs == last())
            return { own, own };
        const Ready down = input(Kind::Backward, vs + 1, mb, vs, now);
        return { std::max(own, down.at), std::max(own, down.bound) };
    }

    // The F and B the rank may run next, in its order of preference.
    Candidates candidates(const Rank& k, std::int64_t r, bool lift, double now) const
    {
        Candidates out;
        auto add = [&](PipelineOp o) { out.at[out.n++] = { o, readiness(o, r, now) }; };
        if (m_chunks == 1) {
            if (k.next < k.order.size())
                add(k.order[k.next]);
            return out;
        }
        for (std::int64_t c = 1; c >= 0; --c) // the B's first, the later virtual stage first
            if (k.nextB[c] < k.nextF[c])
                add(op(Kind::Backward, k.nextB[c], c));
        // The cap admits micro-batches into the V (chunk 0) while room stays for the way back (chunk 1) of
        // those already in it, or of the first `m_reserve` of them (the others' way back comes after B's
        // and W's have freed some); a way back runs within the cap itself (with unit times it always has
        // room; with W's deferred longer it may wait for a B or a W to free some). Held memory in halves of
        // a chunk's activations: F to B holds all, B to W half (W's inputs and output gradients).
        const std::int64_t inV = k.nextF[0] - k.nextF[1];
        const std::int64_t reserved = m_reserve > 0 ? std::min(inV, m_reserve) : inV;
        const bool fits = k.toB + k.toW + 2 <= 4 * m_p || lift;
        const bool room = k.toB + k.toW + 2 + 2 * reserved <= 4 * m_p || lift;
        for (std::int64_t c = 1; c >= 0; --c)
            if (k.nextF[c] < m_m && (c == 1 ? fits : room))
                add(op(Kind::Forward, k.nextF[c], c));
        return out;
    }

    // The next moment a busy rank frees (`freeing`) or an F or B of a free rank whose input is on its way can
    // start: each free rank's `waitUntil`, from its last decide, which saw the state as it is now (the pass
    // that ends the loop starts nothing).
    double nextEvent(const std::vector<std::int64_t>& idle, double freeing) const
    {
        double next = freeing;
        for (const std::int64_t r : idle)
            next = std::min(next, m_ranks[size(r)].waitUntil);
        return next;
    }

    // Nothing is running and nothing can start (every F held back by its cap, every W by the rule): the first
    // rank with a pending W runs it, which frees memory, before any F may pass its cap.
    std::size_t firstWithWeight(const std::vector<std::int64_t>& idle) const
    {
        std::size_t i = 0;
        while (i < idle.size() && m_ranks[size(idle[i])].pendingW.empty())
            ++i;
        return i;
    }

    // The free rank r at `now`: a ready B (the oldest), else a ready F, else its oldest W if that ends before
    // any F or B could start. False: it waits.
    bool decide(std::int64_t r, double now, bool lift)
    {
        Rank& k = m_ranks[size(r)];
        if (static_cast<std::int64_t>(k.pendingW.size()) > k.defer && m_chunks == 1)
            return runWeight(r, now);
        const Candidates options = candidates(k, r, lift, now);
        k.waitUntil = kUnknown;
        for (const Candidate& c : options)
            if (c.ready.known() && c.ready.at > now)
                k.waitUntil = std::min(k.waitUntil, c.ready.at);
        for (const Kind kind : { Kind::Backward, Kind::Forward }) {
            const Candidate* best = nullptr;
            for (const Candidate& c : options)
                if (c.op.kind == kind && c.ready.at <= now && (!best || c.ready.at < best->ready.at))
                    best = &c;
            if (best)
                return start(r, best->op, now);
        }
        if (k.pendingW.empty() || (static_cast<std::int64_t>(k.pendingW.size()) <= m_keep && !options.empty()))
            return false;
        double horizon = kUnknown;
        for (const Candidate& c : options)
            horizon = std::min(horizon, c.ready.bound);
        const double w = duration(Kind::Weight, stageOf(r, k.pendingW.front().second));
        return now + m_fit * w <= horizon + 1e-12 * std::max(1.0, std::fabs(horizon)) && runWeight(r, now);
    }

    bool runWeight(std::int64_t r, double t)
    {
        Rank& k = m_ranks[size(r)];
        const auto [mb, c] = k.pendingW.front();
        k.pendingW.pop_front();
        --k.toW;
        k.ops.push_back(op(Kind::Weight, mb, c));
        k.freeAt = t + duration(Kind::Weight, stageOf(r, c));
        return true;
    }

    bool start(std::int64_t r, PipelineOp o, double t)
    {
        Rank& k = m_ranks[size(r)];
        const std::int64_t vs = stageOf(r, o.chunk);
        const double end = t + duration(o.kind, vs);
        if (o.kind == Kind::Forward) {
            m_fEnd[size(vs)][size(o.microBatch)] = end;
            ++k.nextF[o.chunk];
            ++k.toB;
            ++k.toW;
        } else {
            m_bEnd[size(vs)][size(o.microBatch)] = end;
            ++k.nextB[o.chunk];
            --k.toB;
            k.pendingW.emplace_back(o.microBatch, o.chunk);
        }
        if (m_chunks == 1)
            ++k.next;
        k.ops.push_back(o);
        k.freeAt = end;
        return true;
    }

    std::int64_t m_p, m_m, m_chunks;
    ScheduleCosts m_costs;
    double m_fit;
    std::int64_t m_keep, m_reserve;
    std::vector<std::vector<double>> m_fEnd, m_bEnd; // when each F and B of (virtual stage, micro-batch) ends
    std::vector<Rank> m_ranks;
    std::vector<char> m_dirty = std::vector<char>(size(m_p), 1);
    double m_makespan = 0;
};

} // namespace

std::vector<std::vector<PipelineOp>> zeroBubbleOps(
    ScheduleKind kind, std::int64_t pp, std::int64_t microBatches, const ScheduleCosts& costs)
{
    const std::int64_t stages = pp * (kind == ScheduleKind::ZbV ? 2 : 1);
    double total = 0;
    bool valid = std::isfinite(costs.transfer) && costs.transfer >= 0
        && costs.stage.size() == static_cast<std::size_t>(stages);
    for (const OpTimes& t : costs.stage) {
        for (const double x : { t.forward, t.backward, t.weight })
            valid = valid && std::isfinite(x) && x >= 0;
        total += t.forward + t.backward + t.weight;
    }
    // The simulation's cost grows with ops × ranks (kTimedWork): longer pipelines, such as plan search's pp 64
    // with hundreds of micro-batches, keep the unit-time lists.
    const double work = 3.0 * double(microBatches) * double(stages) * double(pp);
    // Built lists by kind, pp, m and times, up to about 4 million ops (50 MB) on this thread.
    thread_local std::map<std::vector<double>, std::vector<std::vector<PipelineOp>>> cache;
    thread_local double cachedOps = 0;
    if (cachedOps > 4e6) {
        cache.clear();
        cachedOps = 0;
    }
    const auto keep = [&](std::vector<double> key, std::vector<std::vector<PipelineOp>> ops) {
        cachedOps += 3.0 * double(microBatches) * double(stages);
        return cache.emplace(std::move(key), std::move(ops)).first->second;
    };
    std::vector<double> key { double(kind), double(pp), double(microBatches) };
    if (!valid || !(total > 0) || !std::isfinite(total) || work > kTimedWork) {
        if (auto it = cache.find(key); it != cache.end())
            return it->second;
        return keep(std::move(key), TimedScheduler(kind, pp, microBatches, {}, 0).run());
    }
    // The times on a grid of a sixteenth of the mean op time: the lists depend only on the times' ratios,
    // layouts whose ratios agree on that grid (plan search's many) share them, and ops that end together
    // are one event of the simulation.
    const double unit = total / (3.0 * double(stages)) / 16.0;
    ScheduleCosts grid;
    grid.transfer = std::round(costs.transfer / unit);
    key.push_back(grid.transfer);
    for (const OpTimes& t : costs.stage) {
        grid.stage.push_back(
            { std::round(t.forward / unit), std::round(t.backward / unit), std::round(t.weight / unit) });
        key.insert(key.end(), { grid.stage.back().forward, grid.stage.back().backward, grid.stage.back().weight });
    }
    if (auto it = cache.find(key); it != cache.end())
        return it->second;
    // A W in a gap shorter than itself delays the next F or B; left for later it may find a gap that fits or
    // lengthen the drain. Which costs less depends on the times, so the lists are built under each rule and
    // the shortest step is kept (the first on a tie: unit times give the same lists under every rule).
    std::vector<std::vector<PipelineOp>> best;
    double shortest = kUnknown;
    const auto build = [&](double fit, std::int64_t held, std::int64_t reserve) {
        TimedScheduler scheduler(kind, pp, microBatches, grid, fit, held, reserve);
        auto ops = scheduler.run();
        if (scheduler.makespan() < shortest * (1 - 1e-9)) {
            shortest = scheduler.makespan();
            best = std::move(ops);
        }
    };
    for (const double fit : { 0.0, 0.5, 1.0 })
        for (std::int64_t held = 0; held < 4; ++held)
            build(fit, held, 0);
    // ZB-V's cap keeping room for the way back of every micro-batch in the V leaves the first ranks idle
    // at the start, waiting for the V's turn; room for only the first few lets them run more of the first
    // chunk's F's while the way back still has room (a B or a W frees some before the later ones need it).
    // Where that is cheap (kWideWork), the lists are also built with room kept for 1 to 4 of them.
    if (kind == ScheduleKind::ZbV && work <= kWideWork)
        for (const double fit : { 0.0, 0.5 })
            for (std::int64_t reserve = 1; reserve <= 4; ++reserve)
                build(fit, 0, reserve);
    return keep(std::move(key), std::move(best));
}

} // namespace loom::plan
