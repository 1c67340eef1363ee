#pragma once

#include "engine/comm/Communicator.h"
#include "engine/comm/TraceGather.h"
#include "engine/plan/Layout.h"
#include "engine/trace/TelemetryFrames.h"
#include "engine/trace/TraceRecorder.h"
#include "engine/train/Trainer.h"

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace loom::tools {

// What loom-train reports and where.
struct ReportOptions {
    bool stream = false; // --stream: telemetry frames on standard output (rank 0)
    std::string metricsPath; // --metrics: one JSON line per step (rank 0)
    std::string traceOut; // --trace-out: a Chrome trace of every rank's events (rank 0 writes it)
    std::int64_t steps = 0; // the run's last step (the loop runs first..steps-1)
};

// loom-train's reporting, collective over the world: the clock alignment (at the start and every
// kClockRefreshSteps steps; events are moved to rank 0's clock with the offset of their stretch), the
// telemetry stream (run, groups, events, step, checkpoint and end frames), the console lines, the
// --metrics file and the --trace-out file. Every rank calls every method in the same order; only rank 0
// writes. Throws std::runtime_error when a file cannot be written.
class TrainReporter {
public:
    static constexpr std::int64_t kClockRefreshSteps = 25;
    // A step's events go out in frames of at most this many (about 100 bytes each), far below the
    // launcher's frame limit (RunController::kMaxFrameBytes, 8 MiB), however many ranks there are.
    static constexpr std::size_t kEventsPerFrame = 16384;

    TrainReporter(comm::Communicator& world, trace::TraceRecorder& recorder, const plan::Layout& layout,
        ReportOptions options, std::FILE* out = stdout);

    bool tracing() const { return m_tracing; }
    // Before the first step: the "run" frame (first step counted from 1).
    void begin(std::int64_t firstStep);
    // After step `s` (0-based): this step's events and memory on the stream, and the clock refresh.
    void stepDone(std::int64_t s, const train::StepResult& r);
    // Rank 0's console line and --metrics line for step `s`.
    void print(std::int64_t s, const train::StepResult& r);
    // A checkpoint of `stepsDone` steps was saved under `dir`.
    void checkpoint(std::int64_t stepsDone, const std::string& dir);
    // The "end" frame: finished or sigterm.
    void end(trace::EndReason reason);
    // At the end of a run: gathers every rank's events and writes --trace-out (when asked).
    void writeTrace();

private:
    void emit(const trace::TelemetryFrame& frame); // through trace::encode, the stream's one writer
    void alignRecorded();
    std::vector<std::int64_t> gatherPeakMemory();

    comm::Communicator& m_world;
    trace::TraceRecorder& m_recorder;
    const plan::Layout& m_layout;
    ReportOptions m_options;
    std::FILE* m_out;
    bool m_tracing = false;
    std::int64_t m_first = 0;
    comm::ClockAlignment m_clock;
    std::int64_t m_clockError = 0;
    std::vector<trace::TraceEvent> m_aligned; // this rank's events of earlier stretches, on rank 0's clock
    std::vector<trace::TraceEvent> m_streamed; // rank 0: what the stream carried, for --trace-out
    bool m_groupsSent = false;
    std::ofstream m_metrics;
};

// The step frame of step `s` (0-based): what the stream carries and, without the memory, the --metrics line.
trace::StepFrame stepFrame(std::int64_t s, const train::StepResult& r, std::vector<std::int64_t> memory);

// A rank's failure as an "error" frame on `out` (its standard output, which mpirun forwards to the
// launcher): `kind` one of trace::kErrorKinds, the message cut to the frame's text limit.
void reportFailure(std::FILE* out, int rank, std::string_view kind, const std::string& message);

// This process's resident-memory high-water mark (getrusage's ru_maxrss): the "memory high-water per
// rank" of the telemetry on CPU ranks.
std::int64_t peakResidentBytes();

} // namespace loom::tools
