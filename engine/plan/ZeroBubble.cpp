#include "engine/plan/ZeroBubble.h"

#include <algorithm>
#include <deque>
#include <limits>

namespace loom::plan {

namespace {

using Kind = PipelineOp::Kind;
constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

PipelineOp op(Kind kind, std::int64_t microBatch, std::int64_t chunk)
{
    return { kind, static_cast<std::int32_t>(microBatch), static_cast<std::int32_t>(chunk) };
}

// ZB-H1 and ZB-H2 (Qi et al. 2024): 1F1B's order of F and B with `warmup` forwards first, and W's filling the
// gaps, run on unit-time ops: a rank runs its next F or B when ready, else its oldest pending W; it
// defers at most `defer` W's (one more runs at once after its B). ZB-H1: 1F1B's warm-up (p - r - 1) and r
// deferred W's, so rank r holds at most p micro-batches (1F1B's first rank's peak; the last stage defers
// the most, as in the paper's figure). ZB-H2: 2(p - r) - 2 warm-up forwards and 2r deferred, a bubble
// near zero for a peak of 2p - 1.
std::vector<std::vector<PipelineOp>> filledOneFOneB(std::int64_t p, std::int64_t m, bool h2)
{
    struct Rank {
        std::vector<PipelineOp> order, ops;
        std::size_t next = 0;
        std::deque<std::int64_t> pending;
        std::int64_t defer = 0;
    };
    std::vector<Rank> ranks(static_cast<std::size_t>(p));
    for (std::int64_t r = 0; r < p; ++r) {
        Rank& k = ranks[static_cast<std::size_t>(r)];
        const std::int64_t warmup = std::min(h2 ? 2 * (p - r) - 2 : p - r - 1, m);
        std::int64_t f = 0, b = 0;
        for (; f < warmup; ++f)
            k.order.push_back(op(Kind::Forward, f, 0));
        for (; f < m; ++f, ++b) {
            k.order.push_back(op(Kind::Forward, f, 0));
            k.order.push_back(op(Kind::Backward, b, 0));
        }
        for (; b < m; ++b)
            k.order.push_back(op(Kind::Backward, b, 0));
        k.defer = h2 ? 2 * r : r;
    }
    // Ticks at which each (stage, micro-batch)'s F and B end.
    std::vector<std::vector<std::int64_t>> fEnd(
        static_cast<std::size_t>(p), std::vector<std::int64_t>(static_cast<std::size_t>(m), kNever)),
        bEnd = fEnd;
    auto at = [](std::vector<std::vector<std::int64_t>>& v, std::int64_t s, std::int64_t mb) -> std::int64_t& {
        return v[static_cast<std::size_t>(s)][static_cast<std::size_t>(mb)];
    };
    std::int64_t left = 3 * m * p;
    for (std::int64_t t = 0; left > 0; ++t) {
        for (std::int64_t r = 0; r < p; ++r) {
            Rank& k = ranks[static_cast<std::size_t>(r)];
            const bool forced = static_cast<std::int64_t>(k.pending.size()) > k.defer;
            if (!forced && k.next < k.order.size()) {
                const PipelineOp o = k.order[k.next];
                const std::int64_t ready = o.kind == Kind::Forward ? (r == 0 ? 0 : at(fEnd, r - 1, o.microBatch))
                    : r == p - 1                                   ? at(fEnd, r, o.microBatch)
                                                                   : at(bEnd, r + 1, o.microBatch);
                if (ready <= t) {
                    at(o.kind == Kind::Forward ? fEnd : bEnd, r, o.microBatch) = t + 1;
                    if (o.kind == Kind::Backward)
                        k.pending.push_back(o.microBatch);
                    k.ops.push_back(o);
                    ++k.next;
                    --left;
                    continue;
                }
            }
            if (!k.pending.empty()) {
                k.ops.push_back(op(Kind::Weight, k.pending.front(), 0));
                k.pending.pop_front();
                --left;
            }
        }
    }
    std::vector<std::vector<PipelineOp>> out;
    for (Rank& k : ranks)
        out.push_back(std::move(k.ops));
    return out;
}

// ZB-V (Qi et al. 2024, and torchtitan's ZBVZeroBubble) as list scheduling of unit-time F, B and W on the V's
// two chunks per rank: at each tick an idle rank runs the oldest ready B (the previous stage waits for it),
// else a ready F (into the V's first chunk only while it holds fewer than 2p chunk-micro-batches from F to
// W, chunks of half a stage: 1F1B's first rank's peak; the way back always), else its oldest pending W.
// W's left over fill the drain's bubbles.
class ListScheduler {
public:
    ListScheduler(ScheduleKind kind, std::int64_t p, std::int64_t m)
        : m_p(p)
        , m_m(m)
        , m_chunks(kind == ScheduleKind::ZbV ? 2 : 1)
        , m_f(static_cast<std::size_t>(p * m_chunks), std::vector<std::int64_t>(static_cast<std::size_t>(m), kNever))
        , m_b(m_f)
        , m_ranks(static_cast<std::size_t>(p))
    {
        for (std::int64_t r = 0; r < p; ++r) {
            Rank& rank = m_ranks[static_cast<std::size_t>(r)];
            rank.capB = rank.capW = 2 * p;
            rank.nextF.assign(static_cast<std::size_t>(m_chunks), 0);
            rank.nextB.assign(static_cast<std::size_t>(m_chunks), 0);
        }
    }

    std::vector<std::vector<PipelineOp>> run()
    {
        const std::int64_t total = 3 * m_m * m_chunks * m_p;
        std::int64_t started = 0;
        bool lift = false; // every rank idle and none can start: let F's pass their caps for one tick
        for (std::int64_t t = 0; started < total; ++t) {
            bool any = false, busy = false;
            for (std::int64_t r = 0; r < m_p; ++r) {
                Rank& rank = m_ranks[static_cast<std::size_t>(r)];
                if (rank.busyUntil > t) {
                    busy = true;
                    continue;
                }
                if (startOne(r, t, lift)) {
                    any = true;
                    ++started;
                }
            }
            lift = !any && !busy;
        }
        std::vector<std::vector<PipelineOp>> out;
        for (Rank& rank : m_ranks)
            out.push_back(std::move(rank.ops));
        return out;
    }

private:
    struct Rank {
        // Micro-batches from F to B (and to W) and their caps.
        std::int64_t capB = 1, capW = 1, toB = 0, toW = 0, busyUntil = 0;
        std::vector<std::int64_t> nextF, nextB;
        std::deque<std::pair<std::int64_t, std::int64_t>> pendingW; // (micro-batch, chunk), oldest first
        std::vector<PipelineOp> ops;
    };

    std::int64_t stageOf(std::int64_t r, std::int64_t c) const { return c == 0 ? r : 2 * m_p - 1 - r; }
    std::int64_t last() const { return m_p * m_chunks - 1; }
    std::int64_t& f(std::int64_t vs, std::int64_t mb) { return m_f[size(vs)][size(mb)]; }
    std::int64_t& b(std::int64_t vs, std::int64_t mb) { return m_b[size(vs)][size(mb)]; }
    static std::size_t size(std::int64_t i) { return static_cast<std::size_t>(i); }

    // When chunk c's next B (or F) on rank r became ready (kNever: not yet or none left).
    std::int64_t readyB(const Rank& rank, std::int64_t r, std::int64_t c)
    {
        const std::int64_t mb = rank.nextB[size(c)], vs = stageOf(r, c);
        if (mb >= m_m)
            return kNever;
        return vs == last() ? f(vs, mb) : std::max(f(vs, mb), b(vs + 1, mb));
    }
    std::int64_t readyF(const Rank& rank, std::int64_t r, std::int64_t c)
    {
        const std::int64_t mb = rank.nextF[size(c)], vs = stageOf(r, c);
        if (mb >= m_m)
            return kNever;
        return vs == 0 ? 0 : f(vs - 1, mb);
    }

    // The best of the rank's chunks by `ready` at tick t: the earliest, then the later virtual stage.
    template <class Ready> std::int64_t pick(std::int64_t t, Ready ready)
    {
        std::int64_t best = -1, at = kNever;
        for (std::int64_t c = m_chunks - 1; c >= 0; --c)
            if (const std::int64_t when = ready(c); when <= t && when < at) {
                best = c;
                at = when;
            }
        return best;
    }

    bool startOne(std::int64_t r, std::int64_t t, bool lift)
    {
        Rank& rank = m_ranks[size(r)];
        if (const std::int64_t c = pick(t, [&](std::int64_t k) { return readyB(rank, r, k); }); c >= 0) {
            const std::int64_t mb = rank.nextB[size(c)]++;
            b(stageOf(r, c), mb) = t + 1;
            rank.pendingW.emplace_back(mb, c);
            --rank.toB;
            return emit(rank, op(Kind::Backward, mb, c), t);
        }
        // The cap admits micro-batches into the V (chunk 0), each keeping room for its way back (chunk 1),
        // which then always has it.
        const std::int64_t reserved = rank.nextF[0] - rank.nextF[size(m_chunks - 1)];
        // Held memory in halves of a chunk's activations: F to B holds all, B to W half (W's inputs and
        // output gradients).
        const bool room = rank.toB + rank.toW + 2 + 2 * reserved <= 2 * rank.capW || lift;
        auto readyIn = [&](std::int64_t k) { return (k == 1 && m_chunks == 2) || room ? readyF(rank, r, k) : kNever; };
        if (const std::int64_t c = pick(t, readyIn); c >= 0) {
            const std::int64_t mb = rank.nextF[size(c)]++;
            f(stageOf(r, c), mb) = t + 1;
            ++rank.toB;
            ++rank.toW;
            return emit(rank, op(Kind::Forward, mb, c), t);
        }
        if (!rank.pendingW.empty()) {
            const auto [mb, c] = rank.pendingW.front();
            rank.pendingW.pop_front();
            --rank.toW;
            return emit(rank, op(Kind::Weight, mb, c), t);
        }
        return false;
    }

    static bool emit(Rank& rank, PipelineOp o, std::int64_t t)
    {
        rank.ops.push_back(o);
        rank.busyUntil = t + 1;
        return true;
    }

    std::int64_t m_p, m_m, m_chunks;
    std::vector<std::vector<std::int64_t>> m_f, m_b; // tick each F and B of (virtual stage, micro-batch) ends
    std::vector<Rank> m_ranks;
};

// DualPipeV's order (deepseek-ai/DualPipe, dualpipev.py, commit 3da1bbe): the V's two chunks per rank,
// eight phases of F, B (zero-bubble: W deferred to a FIFO) and W. Written from its phase counts; a full
// backward is B then its W at once.
class DualPipeV {
public:
    DualPipeV(std::int64_t p, std::int64_t r, std::int64_t m)
        : m_p(p)
        , m_r(r)
        , m_m(m)
    {
    }

    std::vector<PipelineOp> run()
    {
        const std::int64_t p = m_p, r = m_r;
        repeat(2 * (p - r - 1), [&] { forward(0); });
        repeat(r + 1, [&] {
            forward(0);
            forward(1);
        });
        repeat(p - r - 1, [&] {
            backward(1, true);
            weight();
            forward(1);
        });
        repeat(m_m - 2 * p + r + 1, [&] {
            forward(0);
            backward(1, false);
            forward(1);
            backward(0, false);
        });
        repeat(p - r - 1, [&] {
            backward(1, false);
            forward(1);
            backward(0, false);
        });
        bool deferred = false; // the second half of these backwards defer their W
        for (std::int64_t i = 0; i < r + 1; ++i) {
            if (i == (r + 1) / 2 && r % 2 == 1)
                deferred = true;
            backward(1, deferred);
            if (i == (r + 1) / 2 && r % 2 == 0)
                deferred = true;
            backward(0, deferred);
        }
        repeat(p - r - 1, [&] {
            weight();
            backward(0, true);
        });
        repeat(r + 1, [&] { weight(); });
        return std::move(m_ops);
    }

private:
    template <class Body> static void repeat(std::int64_t n, Body body)
    {
        for (std::int64_t i = 0; i < n; ++i)
            body();
    }
    void forward(int c) { m_ops.push_back(op(Kind::Forward, m_nextF[c]++, c)); }
    void backward(int c, bool deferW)
    {
        const std::int64_t mb = m_nextB[c]++;
        m_ops.push_back(op(Kind::Backward, mb, c));
        if (deferW)
            m_pending.emplace_back(mb, c);
        else
            m_ops.push_back(op(Kind::Weight, mb, c));
    }
    void weight()
    {
        if (m_pending.empty())
            return;
        m_ops.push_back(op(Kind::Weight, m_pending.front().first, m_pending.front().second));
        m_pending.pop_front();
    }

    std::int64_t m_p, m_r, m_m;
    std::int64_t m_nextF[2] = { 0, 0 }, m_nextB[2] = { 0, 0 };
    std::deque<std::pair<std::int64_t, std::int64_t>> m_pending;
    std::vector<PipelineOp> m_ops;
};

} // namespace

std::vector<std::vector<PipelineOp>> zeroBubbleOps(ScheduleKind kind, std::int64_t pp, std::int64_t microBatches)
{
    if (kind != ScheduleKind::ZbV)
        return filledOneFOneB(pp, microBatches, kind == ScheduleKind::ZbH2);
    return ListScheduler(kind, pp, microBatches).run();
}

std::vector<std::vector<PipelineOp>> dualPipeOps(std::int64_t pp, std::int64_t microBatches)
{
    std::vector<std::vector<PipelineOp>> out;
    for (std::int64_t r = 0; r < pp; ++r)
        out.push_back(DualPipeV(pp, r, microBatches).run());
    return out;
}

} // namespace loom::plan
