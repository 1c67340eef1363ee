#include "engine/plan/ZeroBubble.h"

#include <deque>
#include <utility>

namespace loom::plan {

namespace {

using Kind = PipelineOp::Kind;

constexpr auto op = &PipelineOp::of;

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

std::vector<std::vector<PipelineOp>> dualPipeOps(std::int64_t pp, std::int64_t microBatches)
{
    std::vector<std::vector<PipelineOp>> out;
    for (std::int64_t r = 0; r < pp; ++r)
        out.push_back(DualPipeV(pp, r, microBatches).run());
    return out;
}

} // namespace loom::plan
