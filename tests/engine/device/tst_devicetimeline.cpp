// DeviceTimeline on CpuDevice: regions come back in begin order with their device-side start and duration
// (host time on the CPU), nesting and two streams, events reused across steps, and the errors it promises.
#include "engine/device/CpuDevice.h"
#include "engine/device/DeviceTimeline.h"

#include <QTest>

#include <chrono>

using namespace loom::device;

namespace {

// Work of at least `ms` milliseconds: wait until the clock has moved that far (a condition, not a sleep).
void busy(double ms)
{
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() < ms) { }
}

} // namespace

class TstDeviceTimeline : public QObject {
    Q_OBJECT
private slots:
    void regionsInOrder()
    {
        CpuDevice device;
        DeviceTimeline timeline(device);
        const Stream comm = device.createStream();
        timeline.start();
        timeline.begin("forward");
        busy(2);
        timeline.begin("attention"); // nested
        busy(1);
        timeline.end("attention");
        timeline.end("forward");
        timeline.begin("allreduce", comm);
        busy(1);
        timeline.end("allreduce", comm);
        const auto spans = timeline.collect();
        QCOMPARE(spans.size(), std::size_t(3));
        QCOMPARE(QString::fromStdString(spans[0].name), QString("forward"));
        QCOMPARE(QString::fromStdString(spans[1].name), QString("attention"));
        QCOMPARE(QString::fromStdString(spans[2].name), QString("allreduce"));
        QVERIFY(spans[0].startMs >= 0);
        QVERIFY2(spans[0].durationMs >= 3.0, qPrintable(QString::number(spans[0].durationMs)));
        QVERIFY(spans[1].startMs >= spans[0].startMs + 2.0);
        QVERIFY(spans[1].durationMs >= 1.0);
        QVERIFY(spans[1].startMs + spans[1].durationMs <= spans[0].startMs + spans[0].durationMs);
        QVERIFY(spans[2].startMs >= spans[0].startMs + spans[0].durationMs);
        device.destroyStream(comm);
    }

    void stepsReuseTheTimeline()
    {
        CpuDevice device;
        DeviceTimeline timeline(device);
        for (int step = 0; step < 3; ++step) {
            timeline.start();
            timeline.begin("optimizer");
            timeline.end("optimizer");
            const auto spans = timeline.collect();
            QCOMPARE(spans.size(), std::size_t(1)); // start() forgot the previous step's
            QVERIFY(spans[0].durationMs >= 0);
        }
    }

    void errors()
    {
        CpuDevice device;
        DeviceTimeline timeline(device);
        QVERIFY_THROWS_EXCEPTION(DeviceError, timeline.collect()); // no start()
        timeline.start();
        QVERIFY_THROWS_EXCEPTION(DeviceError, timeline.end("backward")); // never begun
        timeline.begin("backward");
        QVERIFY_THROWS_EXCEPTION(DeviceError, timeline.collect()); // never ended
        timeline.end("backward");
        QCOMPARE(timeline.collect().size(), std::size_t(1));
    }
};

QTEST_GUILESS_MAIN(TstDeviceTimeline)
#include "tst_devicetimeline.moc"
