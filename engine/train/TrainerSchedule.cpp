// The pipeline executor: one rank's ops of the schedule for a step, F, B and W (Schedule.h).
#include "engine/train/Trainer.h"

#include "engine/plan/EarlyWeights.h"

#include <deque>
#include <map>

namespace loom::train {

using plan::PipelineOp;

namespace {

// Activations and their gradients between virtual stages: sends in flight keep their buffers until done;
// a message to this rank itself (the V's turn, virtual stages p-1 and p both on the last rank) is kept by
// its tag instead of going through the communicator. Every buffer is on the stage's device and filled by
// its copies, so a GPU run sends and receives device memory.
class StageMail {
public:
    StageMail(comm::Communicator& pipe, std::size_t count, device::Device& device)
        : m_pipe(pipe)
        , m_count(count)
        , m_device(device)
    {
    }
    void send(const FlatValues& data, int peer, int tag)
    {
        if (peer == m_pipe.rank()) {
            m_own.insert_or_assign(tag, copyOf(data));
            return;
        }
        InFlight f { nullptr, copyOf(data) };
        f.work = m_pipe.send(f.buffer.data(), m_count, comm::DType::F32, peer, tag);
        m_sends.push_back(std::move(f));
    }
    // A receive from `peer` posted: its handle, or none for this rank's own message (the V's turn), which
    // complete() copies. The message must then be complete()d into the same `into`.
    comm::WorkPtr post(float* into, int peer, int tag)
    {
        return peer == m_pipe.rank() ? nullptr : m_pipe.recv(into, m_count, comm::DType::F32, peer, tag);
    }
    void complete(const comm::WorkPtr& posted, float* into, int tag)
    {
        if (posted) {
            posted->wait();
            return;
        }
        auto it = m_own.find(tag);
        if (it == m_own.end())
            throw std::logic_error("pipeline schedule: a stage reads its own rank's output before it is made");
        m_device.copyBytes(into, it->second.data(), m_count * sizeof(float), device::CopyKind::DeviceToDevice);
        m_device.synchronize();
        m_own.erase(it);
    }
    void reap()
    {
        while (!m_sends.empty() && m_sends.front().work->isCompleted()) {
            m_sends.front().work->wait(); // raises a failed send's error
            m_sends.pop_front();
        }
    }
    void finish()
    {
        for (auto& f : m_sends)
            f.work->wait();
    }

private:
    struct InFlight {
        comm::WorkPtr work;
        FlatValues buffer;
    };
    FlatValues copyOf(const FlatValues& data) const
    {
        FlatValues copy(m_device);
        copy.assign(m_count, 0.0f);
        copy.copyFrom(0, data.data(), m_count);
        return copy;
    }
    comm::Communicator& m_pipe;
    std::size_t m_count;
    device::Device& m_device;
    std::deque<InFlight> m_sends;
    std::map<int, FlatValues> m_own;
};

} // namespace

void Trainer::blockGradientsDone(std::int64_t layer)
{
    m_stage->sumSequenceParallelGrads(m_stage->blockParams(layer)); // before the DP reduction
    for (int index : m_stage->blockParams(layer))
        m_sync->markReady(index);
    if (!m_squares.empty())
        takeSquares(m_stage->blockParams(layer));
}

std::function<void(std::int64_t)> Trainer::chunkFinishing(std::size_t index)
{
    // The chunk's gradients are final: its blocks' go to the DP reduction as each completes, and a weight
    // matrix's squares are taken while its last share is in cache.
    const auto& op = m_schedule.opsOf(m_coord.pp)[index];
    if (m_lastBackward[static_cast<std::size_t>(op.chunk)] != static_cast<int>(index))
        return {};
    if (!m_squares.empty())
        m_stage->setWeightGradientDone([this](int tensor) { takeSquares({ tensor }); });
    return [this](std::int64_t layer) { blockGradientsDone(layer); };
}

void Trainer::runWeight(std::int64_t step, std::size_t index)
{
    const PipelineOp& op = m_schedule.opsOf(m_coord.pp)[index];
    const std::int64_t vs = m_schedule.virtualStage(m_coord.pp, op.chunk);
    const auto ready = chunkFinishing(index);
    beginDevice(trace::EventKind::Weight, step, op.microBatch, vs, op.chunk);
    m_stage->weightBackward(op.microBatch, op.chunk, ready);
    endDevice(trace::EventKind::Weight);
    m_stage->setWeightGradientDone({});
}

void Trainer::runSchedule(std::int64_t step, double& lossSum)
{
    const auto& p = m_layout.parallel;
    const int B = static_cast<int>(p.microBatch);
    // With sequence parallelism the stages pass this rank's part of the sequence
    // (of its s/cp tokens under context parallelism).
    const std::size_t activation = static_cast<std::size_t>(m_stage->localTokens(B) * m_layout.model.hidden);
    // Each CP rank's loss is the mean over its s/cp tokens: the sequence's mean is their average.
    const float lossScale = 1.0f / static_cast<float>(p.microBatches() * p.dp * p.cp);
    const bool split = m_schedule.splitsBackward();
    device::Device& device = m_stage->params().values.device();
    StageMail mail(*m_comms.pipeline, activation, device);
    plan::EarlyWeights early(m_schedule, m_coord.pp);
    std::vector<std::int32_t> tokens, targets;
    FlatValues in(device), out(device); // the stage's input and output activations (or their gradients)
    in.assign(activation, 0.0f);
    out.assign(activation, 0.0f);
    const auto rankOf = [&](std::int64_t stage) { return static_cast<int>(m_schedule.rankOf(stage)); };
    // Receives the input of `op` from virtual stage `from`; while it has not arrived, earlier B's W run
    // (EarlyWeights.h). The Wait event covers only the time spent waiting.
    const auto receive = [&](float* into, std::int64_t from, int tag, const PipelineOp& op, std::int64_t vs) {
        const comm::WorkPtr posted = mail.post(into, rankOf(from), tag);
        while (posted && posted->completesUnwaited() && !posted->isCompleted()) {
            const auto w = early.takeNext();
            if (!w)
                break;
            runWeight(step, *w);
        }
        const auto t0 = trace::nowNs();
        mail.complete(posted, into, tag);
        record(trace::EventKind::Wait, t0, step, op.microBatch, vs, op.chunk);
    };
    const auto& ops = m_schedule.opsOf(m_coord.pp);
    for (std::size_t i = 0; i < ops.size(); ++i) {
        const PipelineOp& op = ops[i];
        const std::int64_t vs = m_schedule.virtualStage(m_coord.pp, op.chunk);
        const auto& chunk = m_stage->chunks()[static_cast<std::size_t>(op.chunk)];
        if (op.kind == PipelineOp::Kind::Forward) {
            if (chunk.embedding || chunk.head) {
                const auto t0 = trace::nowNs();
                batchOf(step, op.microBatch, tokens, targets);
                record(trace::EventKind::DataLoad, t0, step, op.microBatch, vs, op.chunk);
            }
            if (!chunk.embedding)
                receive(in.data(), vs - 1, tag(0, op.microBatch, vs), op, vs);
            beginDevice(trace::EventKind::Forward, step, op.microBatch, vs, op.chunk);
            const double loss
                = m_stage->forward(op.microBatch, op.chunk, B, tokens.data(), targets.data(), in.data(), out.data());
            endDevice(trace::EventKind::Forward);
            m_auxSum += m_stage->takeAuxLoss(); // MoE blocks' load-balancing losses (0 without)
            if (chunk.head)
                lossSum += loss;
            else
                mail.send(out, rankOf(vs + 1), tag(0, op.microBatch, vs + 1));
        } else if (op.kind == PipelineOp::Kind::Backward) {
            if (!chunk.head)
                receive(out.data(), vs + 1, tag(1, op.microBatch, vs), op, vs);
            const auto ready = split ? std::function<void(std::int64_t)> {} : chunkFinishing(i);
            beginDevice(trace::EventKind::Backward, step, op.microBatch, vs, op.chunk);
            m_stage->backward(op.microBatch, op.chunk, out.data(), in.data(), lossScale, ready);
            endDevice(trace::EventKind::Backward);
            m_stage->setWeightGradientDone({});
            // B's result goes upstream at once: the previous stage waits for it, not for W.
            if (!chunk.embedding)
                mail.send(in, rankOf(vs - 1), tag(1, op.microBatch, vs - 1));
            early.backwardDone(i);
        } else if (early.runsHere(i)) {
            runWeight(step, i);
        }
        mail.reap();
    }
    mail.finish();
}

} // namespace loom::train
