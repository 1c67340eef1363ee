#include "engine/train/GradientSync.h"

#include <algorithm>
#include <deque>
#include <stdexcept>

namespace loom::train {

GradientSync::GradientSync(ParamSet& params, comm::Communicator* dp, std::size_t bucketBytes, bool overlap,
    comm::CollectiveOptions options, bool errorFeedback, const std::vector<BucketGroup>& groups)
    : m_params(params)
    , m_dp(dp)
    , m_overlap(overlap)
    , m_errorFeedback(errorFeedback)
    , m_codec(options.codec)
    , m_options(options)
{
    const auto& specs = params.specs();
    m_bucketOf.assign(specs.size(), -1);
    for (int i = 0; i < static_cast<int>(specs.size()); ++i) {
        const auto& s = specs[static_cast<std::size_t>(i)];
        const bool otherGroup = !groups.empty() && i > 0
            && groups[static_cast<std::size_t>(i)] != groups[static_cast<std::size_t>(i) - 1];
        const bool startNew
            = m_buckets.empty() || otherGroup || (m_buckets.back().end - m_buckets.back().begin) * 4 >= bucketBytes;
        if (startNew)
            m_buckets.push_back({ s.offset, s.offset, 0, 0, nullptr, nullptr, {},
                groups.empty() ? BucketGroup::Plain : groups[std::size_t(i)] });
        m_buckets.back().end = s.offset + s.size();
        ++m_buckets.back().size;
        m_bucketOf[static_cast<std::size_t>(i)] = static_cast<int>(m_buckets.size()) - 1;
    }
    reset();
}

void GradientSync::reset()
{
    for (auto& b : m_buckets) {
        b.waiting = b.size;
        b.work.reset();
    }
}

GradientSync::~GradientSync()
{
    // The delayed all-reduce writes into m_delayed: let it finish before the buffer goes. A failed one has
    // already been reported by the communicator; there is nothing left to do with it here.
    for (auto& b : m_buckets)
        if (b.delayed) {
            try {
                b.delayed->wait();
            } catch (const std::exception&) {
            }
        }
}

void GradientSync::setStaleness(int staleness)
{
    m_staleness = staleness;
    if (staleness > 0) {
        m_delayed = FlatValues(m_params.grads.device());
        m_delayed.assign(m_params.grads.size(), 0.0f);
        std::size_t largest = 0;
        for (const auto& b : m_buckets)
            largest = std::max(largest, b.end - b.begin);
        m_swap = FlatValues(m_params.grads.device());
        m_swap.assign(largest, 0.0f);
    }
}

comm::WorkPtr GradientSync::launch(Bucket& b, float* base)
{
    comm::Communicator* c = b.comm ? b.comm : m_dp;
    if (!m_enabled || !c || c->size() == 1 || b.skipped)
        return nullptr;
    if (scatters(b)) { // in place: this member's piece of the bucket receives its sum (the bucket splits evenly)
        const Piece p = pieceOf(b, static_cast<std::size_t>(c->size()), static_cast<std::size_t>(c->rank()));
        return c->reduceScatter(
            base + b.begin, base + p.from, p.length, comm::DType::F32, comm::ReduceOp::Sum, m_scatterOptions);
    }
    comm::CollectiveOptions o = m_options;
    o.feedback = m_errorFeedback ? &b.feedback : nullptr;
    return c->allReduce(base + b.begin, b.end - b.begin, comm::DType::F32, comm::ReduceOp::Sum, o);
}

bool GradientSync::scatters(const Bucket& b) const
{
    using A = comm::CollectiveAlgorithm;
    const A a = m_scatterOptions.algorithm;
    // The ring copies its input first and the segment reads each element before it writes the sum there;
    // the library's reduce-scatter may not take its output inside its input.
    const bool inPlace = a == A::Ring || a == A::ChunkedRing || a == A::SharedMemory;
    return m_sharded && inPlace && !b.comm && m_dp && (b.end - b.begin) % static_cast<std::size_t>(m_dp->size()) == 0;
}

void GradientSync::setShardedReduction(comm::CollectiveOptions options)
{
    m_sharded = true;
    m_scatterOptions = options;
}

GradientSync::Piece GradientSync::pieceOf(const Bucket& b, std::size_t members, std::size_t member)
{
    const std::size_t length = (b.end - b.begin + members - 1) / members;
    const std::size_t from = std::min(b.end, b.begin + length * member);
    return { from, std::min(b.end, from + length), length };
}

std::vector<std::pair<std::size_t, std::size_t>> GradientSync::ownedPieces() const
{
    std::vector<std::pair<std::size_t, std::size_t>> out;
    const auto n = static_cast<std::size_t>(m_dp ? m_dp->size() : 1),
               r = static_cast<std::size_t>(m_dp ? m_dp->rank() : 0);
    for (const auto& b : m_buckets)
        if (const Piece p = pieceOf(b, n, r); p.from < p.to)
            out.emplace_back(p.from, p.to);
    return out;
}

std::vector<std::pair<std::size_t, std::size_t>> GradientSync::piecesOfTensor(int index) const
{
    const auto& s = m_params.spec(index);
    const Bucket& b = m_buckets[static_cast<std::size_t>(m_bucketOf[static_cast<std::size_t>(index)])];
    std::vector<std::pair<std::size_t, std::size_t>> out;
    if (b.size != 1 || !scatters(b))
        return out;
    const auto n = static_cast<std::size_t>(m_dp->size());
    for (std::size_t r = 0; r < n; ++r) {
        const Piece p = pieceOf(b, n, r);
        out.emplace_back(p.from - s.offset, p.to - s.offset);
    }
    return out;
}

void GradientSync::skipReduction(int index)
{
    if (piecesOfTensor(index).empty())
        throw std::logic_error("GradientSync::skipReduction: tensor " + m_params.spec(index).name
            + " does not fill a reduce-scattered bucket of its own");
    m_buckets[static_cast<std::size_t>(m_bucketOf[static_cast<std::size_t>(index)])].skipped = true;
}

void GradientSync::setGroupCommunicator(BucketGroup group, comm::Communicator* c)
{
    for (auto& b : m_buckets)
        if (b.group == group)
            b.comm = c;
}

std::vector<std::pair<std::size_t, std::size_t>> GradientSync::bucketRanges() const
{
    std::vector<std::pair<std::size_t, std::size_t>> out;
    for (const auto& b : m_buckets)
        out.emplace_back(b.begin, b.end);
    return out;
}

void GradientSync::markReady(int index)
{
    const int b = m_bucketOf[static_cast<std::size_t>(index)];
    Bucket& bucket = m_buckets[static_cast<std::size_t>(b)];
    if (--bucket.waiting == 0 && m_overlap && m_staleness == 0 && !bucket.work)
        bucket.work = launch(bucket, m_params.grads.data());
}

bool GradientSync::finish()
{
    if (m_staleness == 0) {
        for (auto& b : m_buckets)
            if (!b.work)
                b.work = launch(b, m_params.grads.data());
        for (auto& b : m_buckets)
            if (b.work)
                b.work->wait();
        return true;
    }
    // One step late: the buffer that was reduced during this step becomes the gradient to apply, and this
    // step's local gradients take its place until startDelayed().
    const bool previous = m_hasDelayed;
    for (auto& b : m_buckets) {
        if (b.delayed)
            b.delayed->wait();
        b.delayed.reset();
        const std::size_t n = b.end - b.begin;
        m_swap.copyFrom(0, m_params.grads.data() + b.begin, n);
        m_params.grads.copyFrom(b.begin, m_delayed.data() + b.begin, n);
        m_delayed.copyFrom(b.begin, m_swap.data(), n);
    }
    m_hasDelayed = true;
    return previous;
}

void GradientSync::startDelayed()
{
    if (m_staleness == 0)
        return;
    for (auto& b : m_buckets)
        b.delayed = launch(b, m_delayed.data());
}

void GradientSync::allGatherPieces(float* values, const comm::CollectiveTuning& tuning)
{
    // In place where the bucket splits evenly (member r's piece is block r of the bucket); otherwise
    // through a padded buffer. All are queued at once; the communicator runs them in order.
    comm::Communicator& dp = *m_dp;
    const auto n = static_cast<std::size_t>(dp.size()), r = static_cast<std::size_t>(dp.rank());
    struct Padded { // on the parameters' device
        std::size_t begin, end;
        FlatValues mine, all;
    };
    std::deque<Padded> padded;
    std::vector<comm::WorkPtr> works;
    for (const auto& b : m_buckets) {
        const Piece mine = pieceOf(b, n, r);
        const std::size_t piece = mine.length;
        // A bucket that was reduce-scattered (or whose rows its members completed) is gathered the same way,
        // in place; the rest by their size.
        const auto options
            = scatters(b) ? m_scatterOptions : tuning.shardOptions(piece * n * sizeof(float), static_cast<int>(n));
        if (options.algorithm != comm::CollectiveAlgorithm::Library && (b.end - b.begin) % n == 0) {
            works.push_back(dp.allGather(values + mine.from, values + b.begin, piece, comm::DType::F32, options));
            continue;
        }
        device::Device& device = m_params.values.device();
        Padded& g = padded.emplace_back(Padded { b.begin, b.end, FlatValues(device), FlatValues(device) });
        g.mine.assign(piece, 0.0f);
        g.all.assign(piece * n, 0.0f);
        g.mine.copyFrom(0, values + mine.from, mine.to - mine.from);
        works.push_back(dp.allGather(g.mine.data(), g.all.data(), piece, comm::DType::F32, options));
    }
    for (auto& w : works)
        w->wait();
    for (const auto& g : padded) {
        m_params.values.device().copyBytes(
            values + g.begin, g.all.data(), (g.end - g.begin) * sizeof(float), device::CopyKind::DeviceToDevice);
        m_params.values.device().synchronize();
    }
}

} // namespace loom::train
