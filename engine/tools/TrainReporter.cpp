#include "engine/tools/TrainReporter.h"

#include "engine/plan/LayoutParser.h"
#include "engine/trace/ChromeTrace.h"
#include "engine/trace/TelemetryFrames.h"

#include <nlohmann/json.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

namespace loom::tools {

std::int64_t peakResidentBytes()
{
    rusage usage {};
    return getrusage(RUSAGE_SELF, &usage) == 0 ? std::int64_t(usage.ru_maxrss) * 1024 : 0;
}

TrainReporter::TrainReporter(comm::Communicator& world, trace::TraceRecorder& recorder, const plan::Layout& layout,
    ReportOptions options, std::FILE* out)
    : m_world(world)
    , m_recorder(recorder)
    , m_layout(layout)
    , m_options(std::move(options))
    , m_out(out)
{
    m_tracing = !m_options.traceOut.empty() || m_options.stream;
    m_recorder.setEnabled(m_tracing);
    if (m_tracing) {
        m_clock = comm::alignClock(m_world);
        m_clockError = m_clock.errorNs;
    }
    if (m_world.rank() == 0 && !m_options.metricsPath.empty()) {
        m_metrics.open(m_options.metricsPath, std::ios::trunc);
        if (!m_metrics)
            throw std::runtime_error("cannot write the metrics file \"" + m_options.metricsPath + "\"");
    }
}

void TrainReporter::emit(const trace::TelemetryFrame& frame)
{
    const std::string line = trace::encode(frame);
    std::fwrite(line.data(), 1, line.size(), m_out);
    std::fflush(m_out);
}

void TrainReporter::alignRecorded()
{
    for (auto& e : m_recorder.take()) {
        e.startNs -= m_clock.offsetNs;
        e.endNs -= m_clock.offsetNs;
        m_aligned.push_back(std::move(e));
    }
}

std::vector<std::int64_t> TrainReporter::gatherPeakMemory()
{
    return comm::gatherValues(m_world, peakResidentBytes());
}

void TrainReporter::begin(std::int64_t firstStep)
{
    m_first = firstStep;
    if (m_options.stream && m_world.rank() == 0)
        emit(trace::RunFrame {
            trace::kStreamVersion, plan::writeLayout(m_layout), m_world.size(), firstStep + 1, m_options.steps });
}

trace::StepFrame stepFrame(std::int64_t s, const train::StepResult& r, std::vector<std::int64_t> memory)
{
    trace::StepFrame f;
    f.step = s + 1;
    f.loss = r.loss;
    f.tokensPerSecond = r.tokensPerSecond;
    f.stepTimeSeconds = r.seconds;
    f.gradNorm = r.gradNorm;
    f.lr = r.lr;
    f.flopsPerSecond = r.flopsPerSecond;
    f.memoryHighWaterBytes = std::move(memory);
    f.hardwareFlopsPerSecond = r.hardwareFlopsPerSecond;
    return f;
}

void TrainReporter::stepDone(std::int64_t s, const train::StepResult& r)
{
    if (m_options.stream) {
        auto events = comm::gatherEvents(m_world, m_recorder.take(), m_clock.offsetNs);
        auto memory = gatherPeakMemory();
        if (m_world.rank() == 0) {
            if (!m_groupsSent) {
                // Every rank creates its groups in the same order, so rank 0's ids name everyone's.
                emit(trace::GroupsFrame { m_recorder.groups() });
                m_groupsSent = true;
            }
            if (!m_options.traceOut.empty())
                m_streamed.insert(m_streamed.end(), events.begin(), events.end());
            for (std::size_t at = 0; at == 0 || at < events.size(); at += kEventsPerFrame) { // an empty step too
                const auto first = events.begin() + static_cast<std::ptrdiff_t>(at);
                const auto last
                    = events.begin() + static_cast<std::ptrdiff_t>(std::min(at + kEventsPerFrame, events.size()));
                emit(trace::EventsFrame { std::vector<trace::TraceEvent>(first, last) });
            }
            emit(stepFrame(s, r, std::move(memory)));
        }
    }
    if (m_tracing && (s + 1 - m_first) % kClockRefreshSteps == 0 && s + 1 < m_options.steps) {
        if (!m_options.stream) // the stream has already moved this stretch's events
            alignRecorded();
        m_clock = comm::alignClock(m_world);
        m_clockError = std::max(m_clockError, m_clock.errorNs);
    }
}

void TrainReporter::print(std::int64_t s, const train::StepResult& r)
{
    if (m_world.rank() != 0)
        return;
    std::fprintf(m_out, "step %4lld/%lld  loss %.6f  grad norm %.4f  lr %.2e  %.1f ms  %.0f tokens/s  %.3f GFLOP/s\n",
        static_cast<long long>(s + 1), static_cast<long long>(m_options.steps), r.loss, r.gradNorm, r.lr,
        r.seconds * 1e3, r.tokensPerSecond, r.flopsPerSecond / 1e9);
    std::fflush(m_out);
    if (m_metrics.is_open()) // the step frame's payload (without the memory, gathered only for the stream)
        m_metrics << trace::payloadOf(stepFrame(s, r, {})) << "\n" << std::flush;
}

void TrainReporter::checkpoint(std::int64_t stepsDone, const std::string& dir)
{
    if (!m_options.stream || m_world.rank() != 0)
        return;
    std::error_code ec;
    const auto folder
        = std::filesystem::absolute(std::filesystem::path(dir) / ("step-" + std::to_string(stepsDone)), ec);
    emit(trace::CheckpointFrame { stepsDone, folder.string() });
}

void TrainReporter::end(trace::EndReason reason)
{
    if (m_options.stream && m_world.rank() == 0)
        emit(trace::EndFrame { reason });
}

void reportFailure(std::FILE* out, int rank, std::string_view kind, const std::string& message)
{
    trace::ErrorFrame f;
    f.rank = rank;
    f.kind = std::string(kind);
    f.message = message.substr(0, trace::FrameLimits::kMaxText);
    const std::string line = trace::encode(f);
    std::fwrite(line.data(), 1, line.size(), out);
    std::fflush(out);
}

void TrainReporter::writeTrace()
{
    if (m_options.traceOut.empty())
        return;
    std::int64_t worstError = m_clockError;
    m_world.allReduce(&worstError, 1, comm::DType::I64, comm::ReduceOp::Max)->wait();
    alignRecorded();
    const auto mine = std::move(m_aligned);
    auto perRank = comm::gatherValues(m_world, static_cast<std::int64_t>(mine.size()));
    auto events = comm::gatherEvents(m_world, mine, 0);
    const auto memory = gatherPeakMemory();
    if (m_world.rank() != 0)
        return;
    if (m_options.stream) { // the stream already gathered each step's events
        for (const auto& e : m_streamed)
            ++perRank[static_cast<std::size_t>(e.rank)];
        events.insert(events.begin(), m_streamed.begin(), m_streamed.end());
    }
    std::ofstream out(m_options.traceOut, std::ios::trunc);
    const nlohmann::ordered_json other = { { "generator", "loom-train" }, { "loom_trace", 1 },
        { "ranks", m_world.size() }, { "steps", m_options.steps - m_first }, { "clock_error_ns", worstError },
        { "events_per_rank", perRank }, { "memory_high_water_bytes", memory },
        { "layout", nlohmann::ordered_json::parse(plan::writeLayout(m_layout)) } };
    trace::writeChromeTrace(out, events, m_recorder.groups(), other.dump());
    if (!out.flush())
        throw std::runtime_error("cannot write the trace file \"" + m_options.traceOut + "\"");
    std::fprintf(m_out, "loom-train: wrote %zu events of %d ranks to %s (clocks aligned to rank 0 within %.1f us)\n",
        events.size(), m_world.size(), m_options.traceOut.c_str(), double(worstError) / 1000.0);
}

} // namespace loom::tools
