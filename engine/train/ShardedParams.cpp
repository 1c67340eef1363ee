#include "engine/train/ShardedParams.h"

#include <algorithm>
#include <set>
#include <stdexcept>

namespace loom::train {

ShardedParams::ShardedParams(
    GptStage& stage, comm::Communicator& dp, int zero, bool overlap, comm::CollectiveTuning tuning)
    : m_stage(stage)
    , m_params(stage.params())
    , m_dp(dp)
    , m_stage3(zero >= 3)
    , m_overlap(overlap)
    , m_tuning(tuning)
{
    const auto dpSize = static_cast<std::size_t>(dp.size());
    std::set<int> inBlocks;
    for (const auto& chunk : stage.chunks())
        for (auto l = chunk.blocks.first; l <= chunk.blocks.last; ++l) {
            Unit u;
            u.block = true;
            u.tensors = stage.blockParams(l);
            u.begin = m_params.flatSize();
            std::size_t elements = 0;
            for (int t : u.tensors) {
                u.begin = std::min(u.begin, m_params.spec(t).offset);
                u.end = std::max(u.end, m_params.spec(t).offset + m_params.spec(t).size());
                elements += m_params.spec(t).size();
                inBlocks.insert(t);
            }
            if (elements != u.end - u.begin)
                throw std::logic_error("block " + std::to_string(l) + "'s parameters are not contiguous");
            m_chunkOfLayer[l] = { chunk.blocks.first, chunk.blocks.last };
            m_units.push_back(std::move(u));
        }
    for (int t = 0; t < static_cast<int>(m_params.specs().size()); ++t)
        if (!inBlocks.count(t)) {
            Unit u;
            u.tensors = { t };
            u.begin = m_params.spec(t).offset;
            u.end = u.begin + m_params.spec(t).size();
            m_units.push_back(std::move(u));
        }
    std::sort(m_units.begin(), m_units.end(), [](const Unit& a, const Unit& b) { return a.begin < b.begin; });
    // The shard: this rank's piece of each unit, in flat order, with the initial values and the decay mask.
    std::size_t shard = 0;
    for (auto& u : m_units) {
        u.piece = (u.end - u.begin + dpSize - 1) / dpSize;
        u.shardOffset = shard;
        shard += u.piece;
    }
    m_values = onDevice(shard);
    m_grads = onDevice(shard);
    m_decay.assign(shard, 0);
    for (int i = 0; i < static_cast<int>(m_units.size()); ++i) {
        const Unit& u = m_units[static_cast<std::size_t>(i)];
        const std::size_t from = pieceBegin(u), to = std::min(u.end, from + u.piece);
        if (from < to)
            m_values.copyFrom(u.shardOffset, m_params.values.data() + from, to - from);
        for (int t : u.tensors) {
            const auto& s = m_params.spec(t);
            for (std::size_t k = std::max(from, s.offset); k < std::min(to, s.offset + s.size()); ++k)
                m_decay[u.shardOffset + k - from] = s.decay ? 1 : 0;
        }
        if (u.block)
            for (const auto& [layer, range] : m_chunkOfLayer)
                if (m_stage.blockParams(layer).front() == u.tensors.front())
                    m_unitOfLayer[layer] = i;
    }
    m_params.releaseFlat(m_stage3, true);
    m_peakParams = bytes().params;
    m_peakGrads = bytes().grads;
    GptStage::BlockHooks hooks;
    hooks.before = [this](std::int64_t layer, bool backward) { before(layer, backward); };
    hooks.after = [this](std::int64_t layer, bool backward) { after(layer, backward); };
    m_stage.setBlockHooks(std::move(hooks));
}

ShardedParams::~ShardedParams()
{
    m_stage.setBlockHooks({});
    // Collectives still in flight write into buffers held here: let them end first. A failed one has
    // already been reported by the communicator.
    for (auto& f : m_inFlight)
        try {
            f.work->wait();
        } catch (const std::exception&) {
        }
    for (auto& u : m_units)
        if (u.gathering)
            try {
                u.gathering->wait();
            } catch (const std::exception&) {
            }
}

std::size_t ShardedParams::pieceBegin(const Unit& u) const
{
    return std::min(u.end, u.begin + u.piece * static_cast<std::size_t>(m_dp.rank()));
}

void ShardedParams::count(std::ptrdiff_t paramBytes, std::ptrdiff_t gradBytes)
{
    m_fullParamBytes = static_cast<std::size_t>(static_cast<std::ptrdiff_t>(m_fullParamBytes) + paramBytes);
    m_fullGradBytes = static_cast<std::size_t>(static_cast<std::ptrdiff_t>(m_fullGradBytes) + gradBytes);
    const Bytes now = bytes();
    m_peakParams = std::max(m_peakParams, now.params);
    m_peakGrads = std::max(m_peakGrads, now.grads);
}

ShardedParams::Bytes ShardedParams::bytes() const
{
    Bytes b;
    b.params = (m_values.size() + m_params.values.size()) * sizeof(float) + m_fullParamBytes;
    b.grads = (m_grads.size() + m_params.grads.size()) * sizeof(float) + m_fullGradBytes;
    b.peakParams = std::max(m_peakParams, b.params);
    b.peakGrads = std::max(m_peakGrads, b.grads);
    return b;
}

comm::CollectiveOptions ShardedParams::options(const Unit& u) const
{
    return m_tuning.shardOptions(u.piece * static_cast<std::size_t>(m_dp.size()) * sizeof(float), m_dp.size());
}

void ShardedParams::startGather(Unit& u)
{
    if (u.held || u.gathering)
        return;
    const auto dpSize = static_cast<std::size_t>(m_dp.size());
    u.full = onDevice(u.piece * dpSize);
    count(static_cast<std::ptrdiff_t>(u.full.size() * sizeof(float)), 0);
    u.gathering = m_dp.allGather(m_values.data() + u.shardOffset, u.full.data(), u.piece, comm::DType::F32, options(u));
}

void ShardedParams::acquire(Unit& u)
{
    if (u.held)
        return;
    startGather(u);
    u.gathering->wait();
    u.gathering.reset();
    u.held = true;
    for (int t : u.tensors)
        m_params.bindValue(t, u.full.data() + (m_params.spec(t).offset - u.begin));
}

void ShardedParams::release(Unit& u)
{
    if (u.gathering) {
        u.gathering->wait();
        u.gathering.reset();
    }
    for (int t : u.tensors)
        m_params.bindValue(t, nullptr);
    count(-static_cast<std::ptrdiff_t>(u.full.size() * sizeof(float)), 0);
    u.full.release();
    u.held = false;
}

void ShardedParams::allocateGrad(Unit& u)
{
    u.grad = onDevice(u.piece * static_cast<std::size_t>(m_dp.size()));
    count(0, static_cast<std::ptrdiff_t>(u.grad.size() * sizeof(float)));
    for (int t : u.tensors)
        m_params.bindGrad(t, u.grad.data() + (m_params.spec(t).offset - u.begin));
}

void ShardedParams::reduceScatter(Unit& u)
{
    for (int t : u.tensors)
        m_params.bindGrad(t, nullptr);
    InFlight f;
    f.send = std::move(u.grad); // leaves u.grad empty
    f.recv = onDevice(u.piece);
    f.shardOffset = u.shardOffset;
    count(0, static_cast<std::ptrdiff_t>(f.recv.size() * sizeof(float)));
    f.work
        = m_dp.reduceScatter(f.send.data(), f.recv.data(), u.piece, comm::DType::F32, comm::ReduceOp::Sum, options(u));
    m_inFlight.push_back(std::move(f));
    // Overlap keeps at most kInFlight reduce-scatters (and their full gradients) in flight; without it
    // each one ends before backward goes on.
    while (m_inFlight.size() > (m_overlap ? kInFlight : 0))
        retireFront();
    retire(false);
}

void ShardedParams::retireFront()
{
    InFlight& f = m_inFlight.front();
    f.work->wait();
    float* g = m_grads.data() + f.shardOffset;
    for (std::size_t k = 0; k < f.recv.size(); ++k)
        g[k] += f.recv[k];
    count(0, -static_cast<std::ptrdiff_t>((f.send.size() + f.recv.size()) * sizeof(float)));
    m_inFlight.pop_front();
}

void ShardedParams::retire(bool all)
{
    // In issue order, so every rank adds the micro-batches' pieces in the same order.
    while (!m_inFlight.empty() && (all || m_inFlight.front().work->isCompleted()))
        retireFront();
}

void ShardedParams::before(std::int64_t layer, bool backward)
{
    Unit& u = m_units[static_cast<std::size_t>(m_unitOfLayer.at(layer))];
    if (m_stage3) {
        acquire(u);
        // Prefetch: the block that runs next in this chunk starts gathering while this one computes.
        const auto [first, last] = m_chunkOfLayer.at(layer);
        const std::int64_t next = backward ? layer - 1 : layer + 1;
        if (next >= first && next <= last)
            startGather(m_units[static_cast<std::size_t>(m_unitOfLayer.at(next))]);
    }
    if (backward)
        allocateGrad(u);
}

void ShardedParams::after(std::int64_t layer, bool backward)
{
    Unit& u = m_units[static_cast<std::size_t>(m_unitOfLayer.at(layer))];
    if (backward)
        reduceScatter(u);
    if (m_stage3)
        release(u);
}

void ShardedParams::beginStep()
{
    m_grads.fill(0.0f);
    for (auto& u : m_units)
        if (!u.block) {
            allocateGrad(u);
            if (m_stage3)
                startGather(u);
        }
    if (m_stage3)
        for (auto& u : m_units)
            if (!u.block)
                acquire(u);
}

void ShardedParams::finish()
{
    for (auto& u : m_units)
        if (!u.block) {
            reduceScatter(u);
            if (m_stage3)
                release(u);
        }
    retire(true);
}

void ShardedParams::gatherFlat()
{
    // Straight into the flat buffer when the unit splits evenly; otherwise through a padded buffer, a few
    // units in flight at a time so that those stay a small part of the model.
    constexpr std::size_t kWindow = 2;
    const auto dpSize = static_cast<std::size_t>(m_dp.size());
    struct Gather {
        comm::WorkPtr work;
        FlatValues all; // empty: gathered in place
        const Unit* unit;
    };
    std::deque<Gather> pending;
    auto land = [&] {
        Gather& g = pending.front();
        g.work->wait();
        if (!g.all.empty())
            m_params.values.copyFrom(g.unit->begin, g.all.data(), g.unit->end - g.unit->begin);
        count(-static_cast<std::ptrdiff_t>(g.all.size() * sizeof(float)), 0);
        pending.pop_front();
    };
    for (const auto& u : m_units) {
        Gather g { nullptr, FlatValues(m_params.values.device()), &u };
        float* into = m_params.values.data() + u.begin;
        if (u.piece * dpSize != u.end - u.begin) {
            g.all = onDevice(u.piece * dpSize);
            into = g.all.data();
        }
        count(static_cast<std::ptrdiff_t>(g.all.size() * sizeof(float)), 0);
        g.work = m_dp.allGather(m_values.data() + u.shardOffset, into, u.piece, comm::DType::F32, options(u));
        pending.push_back(std::move(g));
        if (pending.size() >= kWindow)
            land();
    }
    while (!pending.empty())
        land();
}

double ShardedParams::normSquared(const std::function<bool(int tensor)>& counts) const
{
    double sum = 0;
    for (const auto& u : m_units) {
        const std::size_t from = pieceBegin(u), to = std::min(u.end, from + u.piece);
        for (int t : u.tensors) {
            const auto& s = m_params.spec(t);
            const std::size_t a = std::max(from, s.offset), b = std::min(to, s.offset + s.size());
            if (a < b && counts(t))
                sum += sumOfSquares(m_grads.data() + u.shardOffset + (a - from), b - a);
        }
    }
    return sum;
}

FlatValues ShardedParams::onDevice(std::size_t n) const
{
    FlatValues v(m_params.values.device());
    v.assign(n, 0.0f);
    return v;
}

std::vector<CheckpointSlice> ShardedParams::slices(AdamW& adam)
{
    std::vector<CheckpointSlice> out;
    for (const auto& u : m_units) {
        const std::size_t from = pieceBegin(u), to = std::min(u.end, from + u.piece);
        if (from < to)
            out.push_back({ from, to, m_values.data() + u.shardOffset, adam.firstMoment().data() + u.shardOffset,
                adam.secondMoment().data() + u.shardOffset, &m_values.device(), &adam.device() });
    }
    return out;
}

} // namespace loom::train
