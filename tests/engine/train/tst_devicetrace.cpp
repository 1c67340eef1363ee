// The trainer's forward, backward and optimizer events are timed by its Device's events (DeviceTimeline), not
// by the host clock: on a device whose events tick 5 ms per record, every such event lasts exactly 5 ms and
// starts on a tick, while the host-timed ones (data, wait) keep the host's times. Run: mpirun -np 1
// tst_devicetrace
#include "engine/plan/LayoutParser.h"
#include "engine/profiles/BuiltinProfiles.h"
#include "engine/train/CpuKernels.h"
#include "engine/train/Trainer.h"
#include "tests/engine/comm/MpiTest.h"

#include "engine/device/CpuDevice.h"

#include <memory>
#include <set>
#include <stdexcept>
#include <vector>

using namespace loom;

namespace {

constexpr double kTickMs = 5.0;

// Host memory (a CpuDevice underneath) with events whose time is a counter: each record is one tick later.
class TickingDevice final : public device::Device {
public:
    device::DeviceKind kind() const override { return device::DeviceKind::Cpu; }
    std::string name() const override { return "ticking cpu"; }
    void* allocateBytes(std::size_t bytes) override { return m_host.allocateBytes(bytes); }
    void freeBytes(void* p) noexcept override { m_host.freeBytes(p); }
    void copyBytes(void* dst, const void* src, std::size_t bytes, device::CopyKind kind, device::Stream s) override
    {
        m_host.copyBytes(dst, src, bytes, kind, s);
    }
    void fillBytes(void* dst, std::uint8_t value, std::size_t bytes, device::Stream s) override
    {
        m_host.fillBytes(dst, value, bytes, s);
    }
    void fillFloats(float* dst, float value, std::size_t n, device::Stream s) override
    {
        m_host.fillFloats(dst, value, n, s);
    }
    device::Stream createStream() override { return {}; }
    void destroyStream(device::Stream) noexcept override { }
    void synchronize(device::Stream) override { }
    void synchronize() override { }
    device::Event createEvent() override
    {
        m_events.push_back(std::make_unique<double>(-1.0));
        return device::Event { m_events.back().get() };
    }
    void destroyEvent(device::Event) noexcept override { } // kept until the device goes
    void recordEvent(device::Event e, device::Stream) override
    {
        *static_cast<double*>(e.handle) = kTickMs * static_cast<double>(++m_ticks);
    }
    void waitEvent(device::Stream, device::Event) override { }
    void synchronizeEvent(device::Event) override { }
    double elapsedMs(device::Event a, device::Event b) override
    {
        const double from = *static_cast<double*>(a.handle), to = *static_cast<double*>(b.handle);
        if (from < 0 || to < 0)
            throw device::DeviceError("ticking cpu: an event that was never recorded");
        return to - from;
    }

private:
    device::CpuDevice m_host;
    std::vector<std::unique_ptr<double>> m_events;
    long m_ticks = 0;
};

} // namespace

class TestDeviceTrace : public QObject {
    Q_OBJECT
private slots:
    void computeEventsTakeTheDevicesTime()
    {
        const std::string text = "{\"loom_layout\": 1, \"name\": \"trace\", \"model\": \"gpt-tiny\", \"cluster\": "
                                 "\"local\", \"parallel\": {\"tp\": 1, \"pp\": 1, \"dp\": 1, \"micro_batch\": 2, "
                                 "\"global_batch\": 4}}";
        const auto read = plan::readLayout(text, profiles::BuiltinProfiles::instance());
        QVERIFY2(read.ok(), read.diagnostics.format().c_str());
        auto comms = comm::makeMpiGridCommunicators(plan::RankGrid::forLayout(*read.layout), nullptr);
        const train::Corpus corpus = train::Corpus::synthetic(1);
        train::CpuKernels kernels;
        TickingDevice ticking;
        trace::TraceRecorder recorder(0);
        train::TrainOptions options;
        options.steps = 2;
        options.device = &ticking;
        options.recorder = &recorder;
        train::Trainer trainer(*read.layout, comms, corpus, options, kernels);
        std::vector<trace::TraceEvent> events;
        for (std::int64_t s = 0; s < options.steps; ++s) {
            const auto before = trace::nowNs();
            trainer.step(s);
            for (auto& e : recorder.take()) {
                if (e.kind == trace::EventKind::Forward || e.kind == trace::EventKind::Backward
                    || e.kind == trace::EventKind::Optimizer) {
                    // Exactly one tick long, starting a whole number of ticks after the step's origin.
                    QCOMPARE(e.endNs - e.startNs, std::int64_t(kTickMs * 1e6));
                    QVERIFY(e.startNs >= before);
                    events.push_back(e);
                }
            }
        }
        std::multiset<trace::EventKind> kinds;
        for (const auto& e : events)
            kinds.insert(e.kind);
        // Two micro-batches a step, forward and backward each, and one update a step.
        QCOMPARE(kinds.count(trace::EventKind::Forward), std::size_t(4));
        QCOMPARE(kinds.count(trace::EventKind::Backward), std::size_t(4));
        QCOMPARE(kinds.count(trace::EventKind::Optimizer), std::size_t(2));
        QCOMPARE(events.front().microBatch, 0);
    }

    void eventsTakeTheirSpansTimes()
    {
        std::vector<trace::TraceEvent> events(2);
        events[0].kind = trace::EventKind::Forward;
        events[1].kind = trace::EventKind::Backward;
        const std::vector<device::DeviceTimeline::Span> spans { { "kind0", 1.5, 2.0 }, { "kind1", 4.0, 0.25 } };
        const auto timed = train::withDeviceTimes(events, spans, 1'000'000'000);
        QCOMPARE(timed.size(), std::size_t(2));
        QVERIFY(timed[0].kind == trace::EventKind::Forward && timed[1].kind == trace::EventKind::Backward);
        QCOMPARE(timed[0].startNs, std::int64_t(1'001'500'000));
        QCOMPARE(timed[0].endNs, std::int64_t(1'003'500'000));
        QCOMPARE(timed[1].startNs, std::int64_t(1'004'000'000));
        QCOMPARE(timed[1].endNs, std::int64_t(1'004'250'000));
    }

    void anEventWithoutItsSpanIsAnError()
    {
        // Fewer spans than events (or more) must not drop an event silently: the error names both counts.
        const std::vector<trace::TraceEvent> events(3);
        const std::vector<device::DeviceTimeline::Span> spans { { "kind0", 0.0, 1.0 }, { "kind1", 1.0, 1.0 } };
        try {
            train::withDeviceTimes(events, spans, 0);
            QFAIL("3 events with 2 spans were accepted");
        } catch (const std::runtime_error& e) {
            const std::string what = e.what();
            QVERIFY2(what.find("2 spans for 3 device-timed events") != std::string::npos, what.c_str());
        }
        QVERIFY_THROWS_EXCEPTION(std::runtime_error, train::withDeviceTimes({}, spans, 0));
    }
};

int main(int argc, char** argv)
{
    return comm::testing::runOnEveryRank<TestDeviceTrace>(argc, argv);
}
#include "tst_devicetrace.moc"
